import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Early delivery (docs/PROTOCOL.md, section 4): a recipient that asked for it and has
/// nothing under way gets a message before its store answers, once, and is told when the
/// store then failed.
@Suite(.serialized) struct EarlyDeliveryTests {
    private func connected(_ user: String, early: Bool, on cluster: TestCluster) async throws -> (SIMPClient, EventLog) {
        var configuration = cluster.clientConfiguration()
        configuration.earlyDelivery = early
        let log = EventLog()
        let client = SIMPClient(configuration: configuration, eventHandler: { log.record($0) })
        try await client.register(user: user, password: "pw-\(user)")
        try await client.connect(user: user, password: "pw-\(user)")
        return (client, log)
    }

    /// Each message goes out once the previous one is delivered, so bob is idle every time:
    /// every one comes early (seq 0), and its numbered copy, which bob confirms (alice learns
    /// of the delivery from that receipt), is not handed over again.
    @Test func anIdleRecipientGetsEachMessageEarlyAndOnce() async throws {
        let cluster = try await TestCluster.start()
        let (bob, bobLog) = try await connected("bob", early: true, on: cluster)
        let (alice, aliceLog) = try await connected("alice", early: false, on: cluster)
        for i in 0..<5 {
            let id = try await alice.send(to: "bob", text: "e-\(i)")
            #expect(await aliceLog.wait(timeout: .seconds(10)) { $0.delivered.contains(id) })
        }
        #expect(bobLog.messages.map(\.text) == (0..<5).map { "e-\($0)" }, "each once, in order")
        #expect(bobLog.messages.allSatisfy { $0.seq == 0 && $0.storedAt != nil && $0.from == "alice" })
        #expect(cluster.metric("simp_early_pushes_total") == 5)
        #expect(cluster.metric("simp_messages_stored_total") == 5, "early, and stored all the same")

        // Alice did not ask for early delivery: bob's message to her comes numbered.
        let reply = try await bob.send(to: "alice", text: "numbered")
        #expect(await bobLog.wait(timeout: .seconds(10)) { $0.delivered.contains(reply) })
        #expect(aliceLog.messages.map(\.seq) == [1])
        #expect(cluster.metric("simp_early_pushes_total") == 5)
        await alice.disconnect()
        await bob.disconnect()
        await cluster.stop()
    }

    /// A burst: the first message may go early, the rest wait for their store (bob is no longer
    /// idle). Bob gets every message once and in alice's order.
    @Test func aBurstKeepsTheSendersOrder() async throws {
        let cluster = try await TestCluster.start()
        let (bob, bobLog) = try await connected("bob", early: true, on: cluster)
        let (alice, aliceLog) = try await connected("alice", early: false, on: cluster)
        for round in 0..<3 {
            var ids: [String] = []
            for i in 0..<40 { ids.append(try alice.post(to: "bob", text: "b-\(round)-\(i)")) }
            #expect(await aliceLog.wait(timeout: .seconds(20)) { Set($0.delivered).isSuperset(of: ids) })
        }
        let expected = (0..<3).flatMap { round in (0..<40).map { "b-\(round)-\($0)" } }
        #expect(bobLog.messages.map(\.text) == expected)
        let early = cluster.metric("simp_early_pushes_total")
        #expect(early >= 1 && early < 120, "the first of a burst may go early; the others go numbered")
        #expect(bobLog.messages.filter { $0.seq == 0 }.count == Int(early))
        await alice.disconnect()
        await bob.disconnect()
        await cluster.stop()
    }

    /// Redis is down: the message bob got early is not stored. Alice is told it failed, bob that
    /// it was retracted, for the same reason; nothing else changes for either.
    @Test func aMessageNotStoredIsRetracted() async throws {
        let cluster = try await TestCluster.start()
        let (bob, bobLog) = try await connected("bob", early: true, on: cluster)
        let (alice, aliceLog) = try await connected("alice", early: false, on: cluster)
        let before = try await alice.send(to: "bob", text: "before")
        #expect(await aliceLog.wait(timeout: .seconds(10)) { $0.delivered.contains(before) })

        cluster.redis.stop()
        let lost = try await alice.send(to: "bob", text: "while Redis is down")
        #expect(await aliceLog.wait(timeout: .seconds(60)) { $0.failed.contains { $0.id == lost } })
        #expect(await bobLog.wait(timeout: .seconds(10)) { $0.retracted.contains { $0.id == lost } })
        let failure = try #require(aliceLog.failed.first { $0.id == lost })
        #expect(failure.reason.hasPrefix("message store unavailable"))
        #expect(bobLog.retracted.map(\.reason) == [failure.reason])
        #expect(bobLog.retracted.map(\.from) == ["alice"])
        #expect(bobLog.messages.map(\.text) == ["before", "while Redis is down"], "bob had it early")
        #expect(cluster.metric("simp_early_retracted_total") == 1)

        try cluster.redis.start()
        let resumed = await eventually {
            let id = try await alice.send(to: "bob", text: "after")
            return await aliceLog.wait(timeout: .seconds(5)) { $0.delivered.contains(id) }
        }
        #expect(resumed, "service resumes by itself")
        // What bob kept, retractions taken out, is exactly what alice was told was delivered,
        // in her order; every retraction names a message alice was told failed.
        let retracted = Set(bobLog.retracted.map(\.id))
        #expect(bobLog.messages.map(\.id).filter { !retracted.contains($0) } == aliceLog.delivered)
        #expect(retracted.isSubset(of: Set(aliceLog.failed.map(\.id))))
        await alice.disconnect()
        await bob.disconnect()
        await cluster.stop()
    }
}

/// A sender that marks a resend `fresh` (against the protocol) has it pushed early again to a
/// recipient that had confirmed it: the store finds the id delivered, the sender is answered
/// accepted and delivered, and the recipient is told the second copy was retracted.
@Suite(.serialized) struct EarlyRepeatTests {
    @Test func aConfirmedMessageSentAgainAsFreshIsRetracted() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        var configuration = cluster.clientConfiguration()
        configuration.earlyDelivery = true
        let bobLog = EventLog()
        let bob = SIMPClient(configuration: configuration, eventHandler: { bobLog.record($0) })
        try await bob.register(user: "bob", password: "pw-bob")
        try await bob.connect(user: "bob", password: "pw-bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        peer.sendDatagram(.data, try message(clientSeq: 1))
        #expect(try delivered(on: peer), "bob confirmed it")
        // Senders are told at once; the confirmed mark reaches Redis with the node's next tick.
        #expect(await waitFor { (try? cluster.redis.command(["GET", "simp:{bob}:acked"]))?.hasSuffix("\r\n1\r\n") == true })
        peer.sendDatagram(.data, try message(clientSeq: 2))
        #expect(try delivered(on: peer), "answered from what was stored")
        #expect(await bobLog.wait(timeout: .seconds(10)) { $0.retracted.map(\.id) == ["again"] })
        #expect(bobLog.messages.map(\.id) == ["again", "again"], "shown early twice: the sender said fresh twice")
        #expect(bobLog.retracted.first?.reason == "the sender had sent this message before")
        #expect(cluster.metric("simp_early_pushes_total") == 2)
        #expect(cluster.metric("simp_messages_stored_total") == 1)
        await bob.disconnect()
        await cluster.stop()
    }

    private func message(clientSeq: UInt64) throws -> [UInt8] {
        try datagramMessage(id: "again", clientSeq: clientSeq, content: "twice", fresh: true)
    }

    private func delivered(on peer: RawPeer) throws -> Bool {
        while let envelope = try peer.read() {
            if case .delivered(let delivered) = envelope.body, delivered.messageID == "again" { return true }
        }
        return false
    }
}

extension EventLog {
    var retracted: [(id: String, from: String, reason: String)] {
        all.compactMap { if case .retracted(let id, let from, let reason) = $0 { return (id, from, reason) } else { return nil } }
    }
}
