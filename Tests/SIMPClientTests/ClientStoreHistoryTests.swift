import Foundation
import GRDB
import SIMPCore
import Testing

@testable import SIMPClient

/// The data directory's local history and its migrations (SQLite in a temporary directory).
@Suite struct ClientStoreHistoryTests {
    static func directory() -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("simp-history-\(UUID())").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func sent(_ id: String, to: String, _ text: String, at millis: Int64) -> Outgoing {
        var message = Simp_Message()
        message.messageID = id
        message.toUser = to
        message.content = text
        message.time = millis
        return Outgoing(to: to, message: message)
    }

    static func received(_ id: String, from: String, _ text: String, seq: UInt64) -> IncomingMessage {
        var message = Simp_Message()
        message.messageID = id
        message.fromUser = from
        message.toUser = "alice"
        message.content = text
        message.seq = seq
        return IncomingMessage(message)
    }

    static func written(_ body: (@escaping @Sendable (Result<Void, StoreWriteError>) -> Void) -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            body { continuation.resume(with: $0.mapError { $0 as any Error }) }
        }
    }

    /// A data directory written before migrations existed opens: its device, outbox and received
    /// messages are kept, and the history starts from them.
    @Test func aDataDirectoryOfTheFirstSchemaOpensWithItsDataInTheHistory() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let old = try DatabaseQueue(path: directory + "/alice.sqlite")
        let pending = try Self.sent("p1", to: "bob", "still to go", at: 5).message.serializedBytes() as [UInt8]
        try await old.write { db in
            try db.execute(sql: """
                CREATE TABLE outbox (id TEXT PRIMARY KEY, recipient TEXT NOT NULL, payload BLOB NOT NULL,
                    position INTEGER NOT NULL, seq INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE received (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, sender TEXT NOT NULL, text TEXT NOT NULL,
                    imageURL TEXT, sentAt INTEGER NOT NULL);
                CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
                INSERT INTO meta (key, value) VALUES ('device', 3054), ('lastDelivered', 1);
                INSERT INTO received (seq, id, sender, text, sentAt) VALUES (1, 'r1', 'bob', 'hello', 4);
                """)
            try db.execute(sql: "INSERT INTO outbox (id, recipient, payload, position) VALUES ('p1', 'bob', ?, 1)",
                           arguments: [Data(pending)])
        }
        try old.close()

        let store = try ClientStore(directory: directory, user: "alice")
        let saved = try store.load()
        #expect(saved.device == ClientStore.deviceName(3054), "the device is kept")
        #expect(saved.savedUpTo == 1 && saved.pending.map(\.id) == ["p1"])
        let history = try await store.messages(in: "bob", before: nil, limit: 10)
        #expect(history.map(\.text) == ["hello", "still to go"])
        #expect(history.map(\.status?.stage) == [nil, .sending])
        #expect(history.map(\.unread) == [false, false], "version 1 showed what it received")
        // Opening again runs no migration twice.
        #expect(try await ClientStore(directory: directory, user: "alice").messages(in: "bob", before: nil, limit: 10).count == 2)
    }

    @Test func theHistoryKeepsSentAndReceivedInOrderWithStatesAndUnreadCounts() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        let a1 = Self.sent("a1", to: "bob", "first", at: 10)
        try await store.add([("a1", "bob", a1.message)], shown: HistoryEntry.sent(a1, user: "alice"))
        try await Self.written { store.receive([Self.received("b1", from: "bob", "second", seq: 1),
                                                Self.received("c1", from: "carol", "elsewhere", seq: 2)], savedUpTo: 2, done: $0) }
        let a2 = Self.sent("a2", to: "bob", "third", at: 30)
        try await store.add([("a2", "bob", a2.message)], shown: HistoryEntry.sent(a2, user: "alice"))
        var delivered = MessageStatus(id: "a1", to: "bob", stage: .delivered)
        delivered.seq = 4
        try await Self.written { store.setStatus(delivered, done: $0) }
        var failed = MessageStatus(id: "a2", to: "bob", stage: .failed)
        failed.failure = .init(code: .notAContact, reason: "not a contact")
        try await Self.written { store.setStatus(failed, done: $0) }

        let bob = try await store.messages(in: "bob", before: nil, limit: 10)
        #expect(bob.map(\.text) == ["first", "second", "third"])
        #expect(bob.map(\.isOutgoing) == [true, false, true])
        #expect(bob.map(\.status?.stage) == [.delivered, nil, .failed])
        #expect(bob[0].status?.seq == 4 && bob[2].status?.failure?.code == .notAContact)
        #expect(try store.load().statuses.map(\.id) == ["a1"], "a restart goes on from the open fates")
        #expect(try await store.messages(in: "bob", before: bob[2].position, limit: 1).map(\.text) == ["second"])

        let conversations = try await store.conversations()
        #expect(conversations.map(\.conversation) == ["bob", "carol"])
        #expect(conversations.map(\.unreadCount) == [1, 1])
        #expect(conversations.map(\.lastMessage.text) == ["third", "elsewhere"])
        #expect(try await store.markShown(in: "bob", upTo: nil).map(\.id) == ["b1"])
        #expect(try await store.conversations().map(\.unreadCount) == [0, 1])
        // A message received again (the server pushed it again) is kept once.
        try await Self.written { store.receive([Self.received("b1", from: "bob", "second", seq: 1)], savedUpTo: 2, done: $0) }
        #expect(try await store.messages(in: "bob", before: nil, limit: 10).count == 3)
    }

    /// A long message takes its place when its first part comes, and is shown once whole.
    @Test func aLongMessageIsShownWholeInThePlaceOfItsFirstPart() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ClientStore(directory: directory, user: "alice")
        var part = Simp_Message()
        part.type = .textPart
        part.messageID = LongText.PartID(base: "L", index: 1, count: 2).description
        part.fromUser = "bob"
        part.toUser = "alice"
        part.content = "ab"
        part.seq = 1
        try await Self.written { store.receive([IncomingMessage(part), Self.received("x", from: "bob", "after", seq: 2)], savedUpTo: 2, done: $0) }
        #expect(try await store.messages(in: "bob", before: nil, limit: 10).map(\.text) == ["after"], "not shown in part")
        #expect(try await store.conversations().first?.unreadCount == 1)

        var whole = Self.received("L", from: "bob", "abcd", seq: 3)
        whole.parts = 2
        let entry = try #require(HistoryEntry.received(whole, user: "alice"))
        try await Self.written { store.record(.add(entry), done: $0) }
        let messages = try await store.messages(in: "bob", before: nil, limit: 10)
        #expect(messages.map(\.text) == ["abcd", "after"])
        #expect(messages.first?.markID == LongText.PartID(base: "L", index: 2, count: 2).description && messages.first?.seq == 3)
        #expect(try await store.conversations().first?.unreadCount == 2)
    }

    /// The history opens without a server, for one user per client; before it is open, reading it says so.
    @Test func theHistoryOpensOfflineForOneUser() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ClientConfiguration(host: "127.0.0.1", port: 1)
        configuration.dataDirectory = directory
        let client = SIMPClient(configuration: configuration)
        await #expect(throws: ClientError.self) { try await client.conversations() }
        try await client.openHistory(user: "alice")
        #expect(try await client.conversations().isEmpty)
        #expect(try await client.messages(in: "bob").isEmpty)
        try await client.openHistory(user: "alice")
        await #expect(throws: ClientError.self) { try await client.openHistory(user: "bob") }
        await client.close()
        await #expect(throws: ClientError.self) { try await SIMPClient(configuration: ClientConfiguration()).openHistory(user: "alice") }
    }
}
