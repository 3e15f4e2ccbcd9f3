import Foundation
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
        }
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
}
