import Foundation
import SIMPClient
import SIMPCore
import Testing

/// Typing (docs/PROTOCOL.md, Typing and presence): one TYPING datagram, relayed to every
/// connected device of the peer, never stored, and not to a user who blocked the typer.
@Suite(.serialized) struct TypingTests {
    /// Every key in Redis (SCAN), to show that typing writes none.
    static func keys(_ cluster: TestCluster) throws -> [String] {
        var keys: [String] = []
        var cursor = "0"
        repeat {
            let lines = try cluster.redis.command(["SCAN", cursor, "COUNT", "1000"]).split(separator: "\r\n").map(String.init)
            // *2, $n, cursor, *k, then $len/name pairs.
            cursor = lines[2]
            keys += stride(from: 5, to: lines.count, by: 2).map { lines[$0] }
        } while cursor != "0"
        return keys.sorted()
    }

    @Test func typingReachesEveryConnectedDeviceOfThePeerAndWritesNothing() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (alice, _) = try await cluster.connectedDevice("alice", "phone")
        let (phone, phoneLog) = try await cluster.connectedDevice("bob", "phone")
        let (tablet, tabletLog) = try await cluster.connectedDevice("bob", "tablet")
        // Presence is written once each session is bound; after that typing must change nothing.
        _ = try await alice.send(to: "bob", text: "hi")
        #expect(await phoneLog.wait { $0.messages.count == 1 })
        #expect(await tabletLog.wait { $0.messages.count == 1 })
        let before = try Self.keys(cluster)

        var latencies: [Double] = []
        // The session's burst (4); the rate is 2 a second.
        for round in 1...4 {
            let sent = Date()
            try alice.sendTyping(to: "bob")
            #expect(await phoneLog.wait(timeout: .seconds(5)) { $0.typing.count == round })
            #expect(await tabletLog.wait(timeout: .seconds(5)) { $0.typing.count == round })
            if let heard = phoneLog.typing.last?.at { latencies.append(heard.timeIntervalSince(sent) * 1000) }
        }
        #expect(phoneLog.typing.allSatisfy { $0.from == "alice" })
        #expect(try Self.keys(cluster) == before, "typing leaves no key in Redis")
        latencies.sort()
        // Measured, not asserted (a shared machine): docs/PROTOCOL.md quotes it.
        print("typing latency over 4 (ms): p50 \(latencies[latencies.count / 2]), max \(latencies.last ?? 0)")
        // A flood past the session's typing rate is dropped and counted, not relayed.
        for _ in 1...10 { try alice.sendTyping(to: "bob") }
        let dropped = "simp_datagrams_dropped_total{reason=\"rate_limited\"}"
        #expect(await waitFor { cluster.metric(dropped) >= 9 }, "at most one more fits the bucket so soon")
        #expect(cluster.metric("simp_typing_relayed_total") <= 10, "4 rounds to 2 devices, and at most one more")
        for client in [alice, phone, tablet] { await client.close() }
        await cluster.stop()
    }

    @Test func aUserWhoBlockedTheTyperDoesNotHearIt() async throws {
        let cluster = try await TestCluster.start()
        let (alice, _) = try await cluster.connectedClient("alice")
        let (carol, _) = try await cluster.connectedClient("carol")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        try await bob.block("alice")
        try alice.sendTyping(to: "bob")
        // A later typing that is relayed: the relay counter says the blocked one never was.
        try carol.sendTyping(to: "bob")
        #expect(await bobLog.wait(timeout: .seconds(5)) { !$0.typing.isEmpty })
        #expect(bobLog.typing.map(\.from) == ["carol"])
        #expect(cluster.metric("simp_typing_relayed_total") == 1)
        // A bad name is refused before anything is sent.
        #expect(throws: ClientError.self) { try alice.sendTyping(to: "Not A Name") }
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }
}
