import SIMPCore
import SIMPTestSupport
import Testing

/// The server reads its datagram socket once per wake-up (one `recvmmsg` of at most 32
/// datagrams). What a burst leaves in the socket must be read on the loop's next turns, with
/// nothing more arriving to wake it.
@Suite(.serialized) struct DatagramBurstTests {
    @Test func aBurstLargerThanOneReadIsAllStored() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        try await cluster.register("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        let count = 300
        for n in 1...count { peer.sendDatagram(.data, try datagramMessage(id: "burst-\(n)", clientSeq: UInt64(n), content: "message \(n) of a burst")) }
        var accepted = Set<String>()
        // A datagram stranded in the socket would never be answered: read() gives up after 15 s.
        while accepted.count < count, let envelope = try peer.read() {
            if case .accepted(let answer) = envelope.body { accepted.insert(answer.messageID) }
            if case .failed(let failed) = envelope.body { Issue.record("\(failed.messageID) failed: \(failed.reason)") }
        }
        #expect(accepted == Set((1...count).map { "burst-\($0)" }))
        #expect(cluster.metric("simp_messages_stored_total") == Double(count))
        await cluster.stop()
    }
}
