import Foundation
import SIMPClient
import SIMPTestSupport
import Testing

@Suite(.serialized) struct ReconnectTests {
    /// The server goes away and comes back on the same address: both clients reconnect by
    /// themselves, what alice sent meanwhile is resent, and bob gets it once.
    @Test func clientsReconnectAndResendAfterAServerRestart() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let before = try await sendAll(alice, to: "bob", prefix: "before", count: 5)
        #expect(await aliceLog.wait { $0.delivered.count == 5 })

        try await cluster.restartServer()
        let during = try await sendAll(alice, to: "bob", prefix: "during", count: 5)
        #expect(await aliceLog.wait { Set($0.delivered).isSuperset(of: during) })
        #expect(await bobLog.wait { $0.messages.count >= 10 })
        #expect(await cluster.settled("bob"))
        #expect(bobLog.messages.map(\.id) == before + during)
        #expect(aliceLog.all.contains { if case .reconnecting = $0 { return true } else { return false } })
        #expect(aliceLog.all.filter { if case .connected = $0 { return true } else { return false } }.count == 2)
        await alice.disconnect()
        await bob.disconnect()
        await cluster.stop()
    }

    /// The session ends with the connection (ClientEngineTests checks, on the engine's clock,
    /// that no reconnect is ever scheduled after a disconnect).
    @Test func aDisconnectEndsTheSession() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        await alice.disconnect()
        #expect(await cluster.sessionsEnd())
        #expect(!aliceLog.all.contains { if case .reconnecting = $0 { return true } else { return false } })
        await cluster.stop()
    }

    /// A peer that stops answering is dropped after three heartbeat intervals.
    @Test func silentControlPeerIsDroppedByTheServer() async throws {
        let cluster = try await TestCluster.start(heartbeat: .milliseconds(500))
        try await cluster.register("erin")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("erin", "pw-erin"))
        #expect(await cluster.server.sessionCount() == 1)
        // The raw peer never answers pings; the server pings, then gives up.
        var sawPing = false
        while let envelope = try peer.read() {
            if case .ping = envelope.body { sawPing = true }
        }
        #expect(sawPing)
        #expect(await cluster.sessionsEnd(), "the connection closed: its session leaves the table")
        await cluster.stop()
    }
}
