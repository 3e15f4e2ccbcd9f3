import Foundation
import SIMPClient
import SIMPTestSupport
import Testing

/// The local history an application reads (`messages(in:)`, `conversations()`), and the
/// status of each message it sent (`sendTracked`), against a real server and Redis: it keeps
/// in step with what the server confirms, and reads the same offline and after a restart.
@Suite(.serialized) struct LocalHistoryTests {
    static func directory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("simp-history-\(UUID().uuidString)").path
    }

    static func client(_ cluster: TestCluster, dataDirectory: String) -> SIMPClient {
        var configuration = cluster.clientConfiguration()
        configuration.dataDirectory = dataDirectory
        return SIMPClient(configuration: configuration)
    }

    /// What alice's history says of her conversation with bob: (from, text, stage or nil, unread).
    static func summary(_ messages: [LocalMessage]) -> [String] {
        messages.map { m in "\(m.from): \(m.text) \(m.status.map { "\($0.stage)" } ?? (m.unread ? "unread" : "shown"))" }
    }

    @Test func theConversationReadsTheSameOfflineAndAfterARestart() async throws {
        let cluster = try await TestCluster.start()
        let aliceDirectory = Self.directory(), bobDirectory = Self.directory()
        defer {
            try? FileManager.default.removeItem(atPath: aliceDirectory)
            try? FileManager.default.removeItem(atPath: bobDirectory)
        }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let alice = Self.client(cluster, dataDirectory: aliceDirectory)
        let aliceLog = EventLog(alice)
        try await alice.connect(user: "alice", password: "pw-alice")
        let bob = Self.client(cluster, dataDirectory: bobDirectory)
        let bobLog = EventLog(bob)
        try await bob.connect(user: "bob", password: "pw-bob")

        // One after the other, so the order is known: a1, b1, a2, b2, a3.
        let a1 = try await alice.sendTracked(to: "bob", text: "a1")
        #expect(await eventually { a1.status.stage == .delivered })
        _ = try await bob.send(to: "alice", text: "b1")
        #expect(await aliceLog.wait { $0.messages.count == 1 })
        let a2 = try await alice.sendTracked(to: "bob", text: "a2")
        #expect(await eventually { a2.status.stage == .delivered })
        _ = try await bob.send(to: "alice", text: "b2")
        #expect(await aliceLog.wait { $0.messages.count == 2 })
        // bob's application shows a1 and a2: alice hears they were read.
        #expect(await bobLog.wait { $0.messages.count == 2 })
        let shown = try await bob.markShown(in: "alice")
        #expect(shown.map(\.text) == ["a1", "a2"])
        #expect(await eventually { a1.status.stage == .read && a2.status.stage == .read })
        #expect(await a1.wait(for: .read).stage == .read, "wait returns at once once there")
        // The last is sent and accepted, then bob goes away: it stays accepted.
        await bob.close()
        let a3 = try await alice.sendTracked(to: "bob", text: "a3")
        #expect(await eventually { a3.status.stage == .accepted })

        let expected = ["alice: a1 read", "bob: b1 unread", "alice: a2 read", "bob: b2 unread", "alice: a3 accepted"]
        // The store follows the statuses on GRDB's writer: wait for the last to be on disk.
        #expect(await eventually { Self.summary(try await alice.messages(in: "bob")) == expected })

        // Offline: the server and Redis are gone.
        await cluster.stop()
        #expect(Self.summary(try await alice.messages(in: "bob")) == expected)
        let conversations = try await alice.conversations()
        #expect(conversations.map(\.conversation) == ["bob"])
        #expect(conversations.first?.unreadCount == 2)
        #expect(conversations.first?.lastMessage.text == "a3")
        #expect(try await alice.messages(in: "bob", before: try await alice.messages(in: "bob")[2].position, limit: 1).map(\.text) == ["b1"])
        let errors = aliceLog.errors.filter { !$0.hasPrefix("reconnect failed") }
        #expect(errors.isEmpty, "no write to the data directory failed: \(errors)")
        await alice.close()

        // A new process on the same data directory, never connected.
        let again = Self.client(cluster, dataDirectory: aliceDirectory)
        try await again.openHistory(user: "alice")
        #expect(Self.summary(try await again.messages(in: "bob")) == expected)
        #expect(try await again.messages(in: "bob").compactMap(\.status?.seq) == [1, 2, 3], "bob's inbox seqs")
        #expect(try await again.conversations().first?.unreadCount == 2)
        // Shown offline: only the local history changes.
        #expect(try await again.markShown(in: "bob").map(\.text) == ["b1", "b2"])
        #expect(try await again.conversations().first?.unreadCount == 0)
        await again.close()
    }

    /// A group send's handle hears each member's delivery, then settles delivered.
    @Test func aGroupSendsHandleCombinesTheMembersDeliveries() async throws {
        let cluster = try await TestCluster.start()
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        let alice = Self.client(cluster, dataDirectory: directory)
        try await alice.connect(user: "alice", password: "pw-alice")
        try cluster.letAnyoneAdd(["bob", "carol"])
        _ = try await alice.createGroup("crew", members: ["bob", "carol"])
        let (bob, bobLog) = try await cluster.connectedDevice("bob", "main")

        let handle = try await alice.sendTracked(to: "#crew", text: "hello crew")
        let seen = Locked([MessageStatus]())
        let watching = Task {
            for await status in handle.updates() {
                seen.withLockedValue { $0.append(status) }
                if status.isSettled { return status }
            }
            return handle.status
        }
        #expect(await bobLog.wait { $0.messages.count == 1 })
        #expect(await eventually { handle.status.members["bob"] == .delivered })
        #expect(handle.status.stage == .accepted, "carol has not confirmed it")
        #expect(handle.status.recipients == 2)
        // carol comes online later and takes it from her inbox.
        let (carol, carolLog) = try await cluster.connectedDevice("carol", "main")
        #expect(await carolLog.wait { $0.messages.count == 1 })
        let isSettled = await eventually { handle.status.isSettled }
        #expect(isSettled)
        if !isSettled { watching.cancel() }
        let settled = await watching.value
        #expect(settled.stage == .delivered)
        #expect(settled.members == ["bob": .delivered, "carol": .delivered])
        let heard = seen.withLockedValue { $0 }
        #expect(heard.map(\.stage).last == .delivered)
        #expect(heard.contains { $0.members == ["bob": .delivered] && $0.stage == .accepted }, "bob's delivery alone")
        #expect(zip(heard, heard.dropFirst()).allSatisfy { $0.stage <= $1.stage && $0.members.count <= $1.members.count })
        // The history keeps the combined status.
        #expect(await eventually {
            try await alice.messages(in: "#crew").last?.status?.members == ["bob": .delivered, "carol": .delivered]
        })
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    /// What a member marks shown in a group's conversation is read on the sender's handle (the
    /// history keeps each group message's place, which the mark names); with every member's
    /// read the handle is final, and the sender's history says so.
    @Test func aGroupMessageMarkedShownIsReadByThatMember() async throws {
        let cluster = try await TestCluster.start()
        let aliceDirectory = Self.directory(), bobDirectory = Self.directory()
        defer {
            try? FileManager.default.removeItem(atPath: aliceDirectory)
            try? FileManager.default.removeItem(atPath: bobDirectory)
        }
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        let alice = Self.client(cluster, dataDirectory: aliceDirectory)
        try await alice.connect(user: "alice", password: "pw-alice")
        try cluster.letAnyoneAdd(["bob", "carol"])
        _ = try await alice.createGroup("crew", members: ["bob", "carol"])
        let bob = Self.client(cluster, dataDirectory: bobDirectory)
        try await bob.connect(user: "bob", password: "pw-bob")
        let (carol, carolLog) = try await cluster.connectedDevice("carol", "main")

        let handle = try await alice.sendTracked(to: "#crew", text: "hello crew")
        #expect(await eventually { try await bob.messages(in: "#crew").count == 1 })
        #expect(await carolLog.wait { $0.groupMessages("crew").count == 1 })
        #expect(await eventually { handle.status.isSettled })
        let marked = try await bob.markShown(in: "#crew")
        #expect(marked.map(\.id) == [handle.id])
        #expect(await eventually { handle.status.members["bob"] == .read })
        #expect(!handle.status.isFinal, "carol has not read it")
        try await carol.markRead(carolLog.groupMessages("crew"))
        #expect(await eventually { handle.status.isFinal })
        #expect(handle.status.stage == .read && handle.status.members == ["bob": .read, "carol": .read])
        #expect(await eventually {
            try await alice.messages(in: "#crew").last?.status?.members == ["bob": .read, "carol": .read]
        })
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    /// Two devices of one user keep one history: what one sends appears on the other with its
    /// status, a long message is kept whole, and what one marks shown is no longer unread on the other.
    @Test func theUsersDevicesKeepInStep() async throws {
        let cluster = try await TestCluster.start()
        let phoneDirectory = Self.directory(), laptopDirectory = Self.directory()
        defer {
            try? FileManager.default.removeItem(atPath: phoneDirectory)
            try? FileManager.default.removeItem(atPath: laptopDirectory)
        }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        func device(_ name: String, _ directory: String) async throws -> (SIMPClient, EventLog) {
            var configuration = cluster.clientConfiguration()
            configuration.dataDirectory = directory
            configuration.device = name
            let client = SIMPClient(configuration: configuration)
            let log = EventLog(client)
            try await client.connect(user: "alice", password: "pw-alice")
            return (client, log)
        }
        let (phone, phoneLog) = try await device("phone", phoneDirectory)
        let (laptop, laptopLog) = try await device("laptop", laptopDirectory)
        let (bob, bobLog) = try await cluster.connectedDevice("bob", "main")

        let long = String(repeating: "long text. ", count: 300)
        let fromLaptop = try await laptop.sendTracked(to: "bob", text: long)
        #expect(await bobLog.wait { $0.messages.count == 1 })
        #expect(await eventually { fromLaptop.status.stage == .delivered })
        _ = try await bob.send(to: "alice", text: "got it")
        for log in [phoneLog, laptopLog] {
            #expect(await log.wait { $0.messages.contains { $0.text == "got it" } })
        }
        let expected = ["alice: \(long) delivered", "bob: got it unread"]
        for client in [phone, laptop] {
            let same = await eventually { Self.summary(try await client.messages(in: "bob")) == expected }
            let seen = Self.summary((try? await client.messages(in: "bob")) ?? []).map { $0.suffix(30) }
            #expect(same, "\(seen)")
        }
        #expect(try await phone.conversations().first?.unreadCount == 1)

        // Shown on the laptop: the phone hears it was read there.
        #expect(try await laptop.markShown(in: "bob").map(\.text) == ["got it"])
        #expect(await eventually { try await phone.conversations().first?.unreadCount == 0 })
        for client in [phone, laptop, bob] { await client.close() }
        await cluster.stop()
    }
}
