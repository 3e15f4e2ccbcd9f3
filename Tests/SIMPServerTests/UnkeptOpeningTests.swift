import Foundation
@testable import SIMPClient
import Testing

/// An encrypted conversation's state that went on from an opening whose write failed (a full
/// disk) used that message's key: written, the message could never be opened again when the
/// server pushes it once more. Such states wait until the group was dropped from memory
/// (`ClientStore.unkeptOpenings`), whatever writes them: a seal, a typing, a catch-up.
@Suite(.serialized, .enabled(if: SmallDisk.canMount, "needs root and tmpfs mounts"))
struct UnkeptOpeningTests {
    @Test func aStateMadeAfterAnOpeningThatWasNotKeptWaitsUntilTheGroupIsDropped() async throws {
        let disk = try SmallDisk()
        defer { disk.unmount() }
        let store = try ClientStore(directory: disk.path, user: "bob")
        let generation = store.keysGeneration.value
        try store.saveGroup("alice", state: [1, 2, 3], keys: generation)

        try disk.fill()
        let opening = await withCheckedContinuation { (done: CheckedContinuation<Result<Void, StoreWriteError>, Never>) in
            store.queueOpened("alice", state: [UInt8](repeating: 7, count: 65_536), opened: (5, .init(id: "m5", inner: [9])),
                              keys: generation) { done.resume(returning: $0) }
        }
        guard case .failure = opening else { Issue.record("the opening's state was written on a full disk"); return }
        try disk.free()

        // The disk has room: only the opening not kept stops these.
        #expect(throws: ClientStore.OpeningNotKept.self) { try store.saveGroup("alice", state: [4], keys: generation) }
        #expect(throws: ClientStore.OpeningNotKept.self) {
            try store.keepPending("alice", epoch: 1, commit: [1], state: [4], keys: generation)
        }
        await #expect(throws: StoreWriteError.self) { try await store.written(store.queueSealed("alice", state: [4], sealed: 1, keys: generation)) }
        try store.saveGroup("carol", state: [6], keys: generation)
        #expect(try store.groupState(of: "alice") == [1, 2, 3], "the state before the opening stays")
        #expect(try store.opened(seqs: [5]).isEmpty)

        store.forgetUnkeptOpenings(of: ["alice"])
        try store.saveGroup("alice", state: [5], keys: generation)
        #expect(try store.groupState(of: "alice") == [5])
        #expect(try store.groupState(of: "carol") == [6])
    }
}
