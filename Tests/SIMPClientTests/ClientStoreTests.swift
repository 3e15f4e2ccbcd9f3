import Crypto
import Foundation
import GRDB
import SIMPCore
import Testing

@testable import SIMPClient

/// The client's data directory (SQLite in a temporary directory), as a restarted client reads it.
@Suite struct ClientStoreTests {
    func message(_ id: String, to: String) -> Simp_Message {
        var message = Simp_Message()
        message.messageID = id
        message.toUser = to
        message.content = "text of \(id)"
        return message
    }

    func accepted(_ store: ClientStore, _ id: String, seq: UInt64) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            store.markAccepted(id: id, seq: seq) { continuation.resume(with: $0) }
            // A mark is deferred to the next batch; nothing else comes here to take it.
            store.scheduleDeferred()
        }
    }

    /// An outbox mark is deferred (`enqueue(deferred:)`): alone it is not written, so it costs
    /// no sync of its own; the next write takes it in its batch, and a read through `db` sees
    /// it. Counted by what another connection finds on disk, and by the marks' callbacks.
    @Test func anOutboxMarkWaitsForTheNextBatchAndAReadSeesIt() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        for id in ["a", "b"] { try await store.add(id: id, to: "bob", message: message(id, to: "bob")) }
        let reported = Locked<[String]>([])
        store.markAccepted(id: "a", seq: 7) { if case .success = $0 { reported.withLock { $0.append("a") } } }
        let other = try DatabaseQueue(path: store.path)
        func seq(_ id: String) throws -> Int64? {
            try other.read { try Int64.fetchOne($0, sql: "SELECT seq FROM outbox WHERE id = ?", arguments: [id]) }
        }
        #expect(try seq("a") == 0 && reported.value.isEmpty, "alone, the mark waits")
        // The next write that schedules a batch takes it, in order before itself.
        try await store.add(id: "c", to: "bob", message: message("c", to: "bob"))
        #expect(try seq("a") == 7 && reported.value == ["a"])
        // A read of the store's own sees a mark deferred just before it.
        store.remove(id: "b") { _ in }
        let left = try await store.db.read { try String.fetchAll($0, sql: "SELECT id FROM outbox ORDER BY position") }
        #expect(left == ["a", "c"])
        // Alone and with nothing after it, a mark is written within `deferredBound` all the same.
        store.markAccepted(id: "c", seq: 9) { _ in }
        var landed = false
        for _ in 0..<200 where !landed {
            try await Task.sleep(for: .milliseconds(50))
            landed = try seq("c") == 9
        }
        #expect(landed, "a deferred mark waits at most its bound")
    }

    /// What the client reports written survives a power loss: the write-ahead log is synced at
    /// every commit (`synchronous = FULL`, 2), on the connection the store writes with. Until
    /// 2026-11-30 GRDB's WAL set-up left NORMAL (1) there, synced at checkpoints only.
    @Test func theStoreSyncsItsLogAtEveryCommit() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        let (mode, synchronous) = try store.db.writeWithoutTransaction { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"))
        }
        #expect(mode == "wal")
        #expect(synchronous == 2)
    }

    /// A restarted client must not have an earlier message stored after a later one to the same
    /// recipient that was already accepted: it comes back marked `overtaken`, in send order.
    @Test func aPendingMessageBeforeAnAcceptedOneToTheSameRecipientComesBackOvertaken() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        for (id, to) in [("a", "bob"), ("c", "carol"), ("b", "bob"), ("d", "bob")] {
            try await store.add(id: id, to: to, message: message(id, to: to))
        }
        try await accepted(store, "b", seq: 5)

        let saved = try ClientStore(directory: directory, user: "alice").load()
        #expect(saved.pending.map(\.id) == ["a", "c", "d"])
        #expect(saved.pending.map(\.message.overtaken) == [true, false, false])
        #expect(saved.accepted.map(\.id) == ["b"])
    }

    /// Writes queued while the writer is busy go in one transaction (a group commit): they are
    /// on disk in the order queued; one that fails is not, not even the part it did before it
    /// threw, nor are those queued after it in its batch (they are reported failed); what is
    /// reported written is on disk, and a later batch goes on.
    @Test func writesQueuedTogetherKeepTheirOrderAndNothingLandsAfterAFailureInItsBatch() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        let ids = (0..<200).map { "m\($0)" }
        let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            // Queued from one place in order, so that the order is known; completed together.
            for (index, id) in ids.enumerated() {
                let done = AsyncStream<Bool>.makeStream()
                let payload = Data(try message(id, to: "bob").serializedBytes() as [UInt8])
                store.enqueue({ done.continuation.yield((try? $0.get()) != nil); done.continuation.finish() }) { db in
                    try db.execute(sql: "INSERT INTO outbox (id, recipient, payload, position) VALUES (?, 'bob', ?, ?)",
                                   arguments: [id, payload, index])
                    // Fails after its first statement: that row must not land either.
                    if id == "m100" { try db.execute(sql: "INSERT INTO no_such_table VALUES (1)") }
                }
                group.addTask {
                    for await ok in done.stream { return (index, ok) }
                    return (index, false)
                }
            }
            var results = [Bool](repeating: false, count: ids.count)
            for try await (index, ok) in group { results[index] = ok }
            return results
        }
        #expect(results[0..<100].allSatisfy { $0 }, "what was queued before the failure is written")
        #expect(!results[100], "the failing write is reported failed")
        let saved = try ClientStore(directory: directory, user: "alice").load()
        let written = ids.enumerated().filter { results[$0.offset] }.map(\.element)
        #expect(saved.pending.map(\.id) == written, "on disk is exactly what was reported written, in order")
        // A batch after the failure goes on.
        try await store.add(id: "later", to: "bob", message: message("later", to: "bob"))
        #expect(try ClientStore(directory: directory, user: "alice").load().pending.last?.id == "later")
    }

    /// Another connection holds the file's write lock past the busy timeout: the batch queued
    /// meanwhile fails (its writes are reported failed, none is on disk) and the writer is not
    /// stranded: once the lock is gone the next write lands.
    @Test func aBatchThatCannotTakeTheWriteLockFailsAndTheNextWriteGoesOn() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        var configuration = Configuration()
        configuration.journalMode = .wal
        let other = try DatabaseQueue(path: store.path, configuration: configuration)
        let locked = AsyncStream<Void>.makeStream()
        let release = AsyncStream<Void>.makeStream()
        let holder = Task.detached {
            try other.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                locked.continuation.yield()
                // Held until the store's batch has failed.
                let done = DispatchSemaphore(value: 0)
                Task { for await _ in release.stream { break }; done.signal() }
                done.wait()
                try db.execute(sql: "ROLLBACK")
            }
        }
        for await _ in locked.stream { break }
        var failure: StoreWriteError?
        do {
            try await store.add(id: "blocked", to: "bob", message: message("blocked", to: "bob"))
        } catch {
            failure = error
        }
        release.continuation.yield()
        try await holder.value
        #expect(failure != nil, "a write that could not take the lock is reported failed")
        try await store.add(id: "later", to: "bob", message: message("later", to: "bob"))
        #expect(try ClientStore(directory: directory, user: "alice").load().pending.map(\.id) == ["later"])
    }

    /// A new device key drops every conversation's keys made under the old one (group states,
    /// pending commits, KeyPackages); re-saving the same key drops nothing. A write made under
    /// the old key's generation after that (a `ConversationKeys` still running) is refused,
    /// queued or direct, and the old state does not come back.
    @Test func aNewDeviceKeyDropsWhatTheOldMadeAndRefusesItsLaterWrites() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        let identity = [UInt8](repeating: 1, count: 32)
        try store.save(ClientStore.OwnKeys(identityKey: identity, deviceKey: [UInt8](repeating: 2, count: 32), published: false))
        let old = try #require(try store.ownKeysAndGeneration()).generation
        try store.saveGroup("bob", state: [1, 2, 3], keys: old)
        try store.keepPending("bob", epoch: 1, commit: [4], state: [5], keys: old)
        try store.addKeyPackages([.init(reference: [9], package: [9], initSeed: [9], encryptionSeed: [9], lastResort: true)], keys: old)
        try store.save(ClientStore.OwnKeys(identityKey: identity, deviceKey: [UInt8](repeating: 2, count: 32), published: true))
        #expect(try store.groupState(of: "bob") == [1, 2, 3], "the same key, published: nothing dropped")
        #expect(try store.ownKeysAndGeneration()?.generation == old)

        try store.save(ClientStore.OwnKeys(identityKey: [UInt8](repeating: 7, count: 32), deviceKey: [UInt8](repeating: 8, count: 32),
                                           published: false))
        #expect(try store.groupState(of: "bob") == nil)
        #expect(try store.pending(of: "bob") == nil)
        #expect(try store.keyPackages().isEmpty)
        let oldPublic = Array(try Curve25519.Signing.PrivateKey(rawRepresentation: identity).publicKey.rawRepresentation)
        #expect(ClientStore.identityKey(inFileAt: store.path, user: "alice")?.replaced == oldPublic,
                "the identity it replaced is recorded, for the device beside it (SiblingIdentity)")
        #expect(throws: ClientStore.StaleKeys.self) { try store.saveGroup("bob", state: [6], keys: old) }
        #expect(throws: ClientStore.StaleKeys.self) { try store.keepPending("bob", epoch: 2, commit: [6], state: [6], keys: old) }
        await #expect(throws: StoreWriteError.self) { try await store.written(store.queueSealed("bob", state: [6], sealed: 1, keys: old)) }
        #expect(try store.groupState(of: "bob") == nil, "the old key's state did not come back")
        let new = try #require(try store.ownKeysAndGeneration()).generation
        #expect(new != old)
        try store.saveGroup("bob", state: [7], keys: new)
        #expect(try store.groupState(of: "bob") == [7])
    }

    /// The devices seen certified are kept a user at a time, the newest `seenDevicesKept`; one
    /// seen again is newer. Verifying a peer drops those seen under the peer's other identity
    /// keys (one a server showed before); a new device key of this device drops its own.
    @Test func theNewestSeenDevicesOfEachUserAreKept() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        func device(_ n: Int, user: String = "bob", under identity: [UInt8] = [1]) -> ClientStore.SeenDevice {
            .init(identity: Array("\(user)/d\(n)".utf8), key: [UInt8(n % 256), 1], identityKey: identity)
        }
        let kept = ClientStore.seenDevicesKept
        for n in 0..<kept { try store.recordSeen([device(n)], of: "bob", at: Int64(n)) }
        try store.recordSeen([device(0)], of: "bob", at: Int64(kept))
        try store.recordSeen([device(kept)], of: "bob", at: Int64(kept + 1))
        try store.recordSeen([device(1, user: "carol")], of: "carol", at: 0)
        let bobs = Set(try store.seenDevices(of: "bob"))
        #expect(bobs.count == kept)
        #expect(bobs.contains(device(0)) && bobs.contains(device(kept)), "seen again, and the newest")
        #expect(!bobs.contains(device(1)), "the oldest went")
        #expect(try store.seenDevices(of: "carol") == [device(1, user: "carol")], "another user's are counted apart")

        // carol's identity [1] was first shown; the user verifies [2]: those under [1] go.
        _ = try store.record(peer: "carol", identityKey: [2], nowMillis: 1)
        try store.recordSeen([device(2, user: "carol", under: [2])], of: "carol", at: 2)
        #expect(try store.verify(peer: "carol", identityKey: [2]))
        #expect(try store.seenDevices(of: "carol") == [device(2, user: "carol", under: [2])])
        #expect(try store.seenDevices(of: "bob").count == kept, "another peer's stay")

        try store.recordSeen([device(3, user: "alice")], of: "alice", at: 3)
        try store.save(ClientStore.OwnKeys(identityKey: [UInt8](repeating: 1, count: 32), deviceKey: [UInt8](repeating: 2, count: 32), published: true))
        #expect(try store.seenDevices(of: "alice").count == 1, "the first keys: nothing dropped")
        try store.save(ClientStore.OwnKeys(identityKey: [UInt8](repeating: 3, count: 32), deviceKey: [UInt8](repeating: 4, count: 32), published: false))
        #expect(try store.seenDevices(of: "alice").isEmpty, "a new device key: this user's own go")
    }

    /// A verified peer's changed identity holds sending until the user verifies again, through
    /// further changes: a server switching back to the verified key and then away again does
    /// not lift the hold.
    @Test func aHoldStaysUntilTheUserVerifiesAgain() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        let (real, forged) = ([UInt8](repeating: 1, count: 32), [UInt8](repeating: 2, count: 32))
        #expect(try store.record(peer: "bob", identityKey: real, nowMillis: 0) == .new)
        #expect(try store.verify(peer: "bob", identityKey: real))
        #expect(try store.record(peer: "bob", identityKey: forged, nowMillis: 1) == .changed(wasVerified: true))
        #expect(try store.isHeld(peer: "bob"))
        #expect(try store.record(peer: "bob", identityKey: real, nowMillis: 2) == .changed(wasVerified: false))
        #expect(try store.isHeld(peer: "bob"), "back to the verified key: still held")
        #expect(try store.record(peer: "bob", identityKey: forged, nowMillis: 3) == .changed(wasVerified: false))
        #expect(try store.isHeld(peer: "bob"), "and away again: still held")
        #expect(try store.verify(peer: "bob", identityKey: forged))
        #expect(try !store.isHeld(peer: "bob"))
    }

    /// A seal's state write is queued, not awaited (`queueSealed`); the outbox rows of what it
    /// sealed rest on it: when it fails, they fail too and are not on disk (they must never be
    /// sent with keys whose state was not kept), in its batch or a later one; a write that does
    /// not rest on it lands.
    @Test func outboxRowsRestingOnAFailedSealedStateFailToo() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-store-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        // The state write will fail: its table is gone.
        try await store.db.write { try $0.execute(sql: "DROP TABLE mls_groups") }
        let state = store.queueSealed("bob", state: [1, 2, 3], sealed: 1, keys: 0)
        await #expect(throws: StoreWriteError.self) {
            try await store.add([("sealed", "bob", message("sealed", to: "bob"))], after: state)
        }
        await #expect(throws: StoreWriteError.self) { try await store.written(state) }
        await #expect(throws: StoreWriteError.self) {
            try await store.add([("later", "bob", message("later", to: "bob"))], after: state)
        }
        try await store.add(id: "plain", to: "bob", message: message("plain", to: "bob"))
        // In a later batch the write resting on it fails alone: the others of that batch land
        // (the writer is held by a first write until both are queued, so they share a batch).
        let gate = DispatchSemaphore(value: 0)
        let outcomes = AsyncStream<(String, Bool)>.makeStream()
        store.enqueue({ _ in }) { _ in gate.wait() }
        for (id, resting) in [("resting", true), ("independent", false)] {
            let payload = Data(try message(id, to: "bob").serializedBytes() as [UInt8])
            store.enqueue({ outcomes.continuation.yield((id, (try? $0.get()) != nil)) }, after: resting ? state : nil) { db in
                try db.execute(sql: "INSERT INTO outbox (id, recipient, payload, position) VALUES (?, 'bob', ?, 100)", arguments: [id, payload])
            }
        }
        gate.signal()
        var landed: [String: Bool] = [:]
        for await (id, ok) in outcomes.stream {
            landed[id] = ok
            if landed.count == 2 { break }
        }
        #expect(landed == ["resting": false, "independent": true])
        #expect(try ClientStore(directory: directory, user: "alice").load().pending.map(\.id) == ["plain", "independent"])
    }
}
