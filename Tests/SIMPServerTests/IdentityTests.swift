import SIMPCore
import Testing

@Suite(.serialized) struct IdentityTests {
    @Test func forgedFromUserDoesNotChangeTheSender() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        var message = Simp_Message()
        message.messageID = "777"
        message.toUser = "bob"
        message.fromUser = "alice"
        message.content = "it's me, alice"
        peer.sendDatagram(.data, try message.serializedBytes())

        #expect(await bobLog.wait { $0.messages.count == 1 })
        #expect(bobLog.messages.first?.from == "mallory")
        #expect(bobLog.messages.first?.text == "it's me, alice")
        await bob.disconnect()
        await cluster.stop()
    }

    @Test func datagramsFromAnotherAddressOrSessionAreDropped() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))
        // A second socket knows mallory's session id but is not the validated address.
        let stranger = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        stranger.session = peer.session
        var message = Simp_Message()
        message.messageID = "1"
        message.toUser = "bob"
        message.content = "spoofed path"
        stranger.sendDatagram(.data, try message.serializedBytes())
        // And an unknown session id from the validated socket.
        peer.session?.sessionID ^= 0xFFFF
        peer.sendDatagram(.data, try message.serializedBytes())
        try await Task.sleep(for: .milliseconds(500))
        #expect(bobLog.messages.isEmpty)
        await bob.disconnect()
        await cluster.stop()
    }
}
