import Foundation
import SIMPClient
import SIMPCore
import Testing

/// `confirmWhenShown` against a real server and Redis: the sender hears **delivered** once the
/// recipient's application showed the message, not when it arrived, and a restart keeps what
/// was not shown held (docs/PROTOCOL.md, Receipts: "Received but not confirmed").
@Suite(.serialized) struct ShownDeliveryTests {
    static func client(_ cluster: TestCluster, dataDirectory: String? = nil) -> SIMPClient {
        var configuration = cluster.clientConfiguration()
        configuration.confirmWhenShown = true
        configuration.dataDirectory = dataDirectory
        return SIMPClient(configuration: configuration)
    }

    /// Waits until the server took `count` receipts that hold messages, then makes a round
    /// trip on `sender`'s control connection: a `delivered` told for them would have been
    /// written to it before the answer (the receipt's turn writes it; the answer needs Redis).
    static func heldAndSettled(_ cluster: TestCluster, count: Double, sender: SIMPClient) async throws -> Bool {
        let held = await eventually { cluster.metric("simp_receipts_holding_total") >= count }
        _ = try await sender.settings()
        return held
    }

    /// A server, alice, and bob's client with `confirmWhenShown`, both connected.
    static func aliceAndBobConfirmingWhenShown() async throws -> (TestCluster, SIMPClient, EventLog, SIMPClient, EventLog) {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await cluster.connectedClient("alice", register: false)
        let bob = client(cluster)
        let bobLog = EventLog(bob)
        try await bob.connect(user: "bob", password: "pw-bob")
        return (cluster, alice, aliceLog, bob, bobLog)
    }

    @Test func theSenderHearsDeliveredWhenTheMessageWasShownNotWhenItArrived() async throws {
        let (cluster, alice, aliceLog, bob, bobLog) = try await Self.aliceAndBobConfirmingWhenShown()

        let one = try await alice.sendTracked(to: "bob", text: "one")
        let two = try await alice.sendTracked(to: "bob", text: "two")
        #expect(await bobLog.wait { $0.messages.map(\.text) == ["one", "two"] })
        #expect(try await Self.heldAndSettled(cluster, count: 1, sender: alice))
        #expect(aliceLog.delivered.isEmpty, "arrived, not shown: \(aliceLog.delivered)")
        #expect(one.status.stage == .accepted && two.status.stage == .accepted)

        // Shown out of order: "two" alone confirms nothing (confirmation is cumulative).
        try await bob.markRead([bobLog.messages[1]])
        _ = try await alice.settings()
        try await bob.markRead([bobLog.messages[0]])
        #expect(await eventually { one.status.stage == .read && two.status.stage == .read })
        let delivered = aliceLog.index { if case .delivered(one.id, _, _) = $0 { true } else { false } }
        let read = aliceLog.index { if case .read(one.id, _, _) = $0 { true } else { false } }
        #expect(delivered != nil && read != nil && delivered! < read!, "delivered first, then read")
        #expect(cluster.metric("simp_retransmits_total") == 0, "what arrived was not pushed again")
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func withReadReceiptsOffShowingStillConfirms() async throws {
        let (cluster, alice, aliceLog, bob, bobLog) = try await Self.aliceAndBobConfirmingWhenShown()
        try await bob.set(.readReceipts(false))

        let id = try await alice.send(to: "bob", text: "quiet")
        #expect(await bobLog.wait { $0.messages.count == 1 })
        #expect(try await Self.heldAndSettled(cluster, count: 1, sender: alice))
        #expect(aliceLog.delivered.isEmpty)
        try await bob.markRead(bobLog.messages)
        #expect(await aliceLog.wait { $0.delivered == [id] })
        _ = try await alice.settings()
        #expect(aliceLog.reads.isEmpty, "no read: bob turned them off")
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func aMessageNotShownBeforeARestartStaysHeldUntilTheHistoryMarksItShown() async throws {
        let cluster = try await TestCluster.start()
        let directory = LocalHistoryTests.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await cluster.connectedClient("alice", register: false)
        let bob = Self.client(cluster, dataDirectory: directory)
        let bobLog = EventLog(bob)
        try await bob.connect(user: "bob", password: "pw-bob")

        let id = try await alice.send(to: "bob", text: "kept")
        #expect(await bobLog.wait { $0.messages.count == 1 })
        #expect(try await Self.heldAndSettled(cluster, count: 1, sender: alice))
        await bob.close()

        // The next process on the same directory: pushed again (nothing confirmed it), still
        // held, because the history counts it unread.
        let again = Self.client(cluster, dataDirectory: directory)
        let againLog = EventLog(again)
        try await again.connect(user: "bob", password: "pw-bob")
        #expect(try await Self.heldAndSettled(cluster, count: 2, sender: alice))
        #expect(aliceLog.delivered.isEmpty)
        #expect(againLog.messages.isEmpty, "on disk already: not handed over twice")
        let shown = try await again.markShown(in: "alice")
        #expect(shown.map(\.text) == ["kept"])
        #expect(await aliceLog.wait { $0.delivered == [id] })
        for client in [alice, again] { await client.close() }
        await cluster.stop()
    }
}
