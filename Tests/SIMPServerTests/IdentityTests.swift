import SIMPCore
import SIMPTestSupport
import Testing

@Suite(.serialized) struct IdentityTests {
    @Test func forgedFromUserAndFromDeviceDoNotChangeTheSender() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        var message = Simp_Message()
        message.messageID = "777"
        message.toUser = "bob"
        message.fromUser = "alice"
        // As if sent from one of bob's own devices (issue 46, finding 8): the server takes the
        // field from the session, one to one never at all.
        message.fromDevice = "laptop"
        message.content = "it's me, alice"
        peer.sendDatagram(.data, try message.serializedBytes())

        #expect(await bobLog.wait { $0.messages.count == 1 })
        #expect(bobLog.messages.first?.from == "mallory")
        #expect(bobLog.messages.first?.fromDevice == "")
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
        let before = cluster.droppedDatagrams()
        stranger.sendDatagram(.data, try message.serializedBytes())
        // And an unknown session id from the validated socket.
        peer.session?.sessionID ^= 0xFFFF
        peer.sendDatagram(.data, try message.serializedBytes())
        #expect(await waitFor { cluster.droppedDatagrams() >= before + 2 }, "both counted dropped")
        #expect(await cluster.settled("bob"))
        #expect(bobLog.messages.isEmpty)
        await bob.disconnect()
        await cluster.stop()
    }
}

@Suite(.serialized) struct SealedDatagramTests {
    /// Tampered, wrongly keyed and replayed datagrams are dropped before they are parsed:
    /// of five attempts only the one honest datagram is delivered, once.
    @Test func tamperedForgedAndReplayedDatagramsAreDropped() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        func message(_ id: String) throws -> [UInt8] {
            var m = Simp_Message()
            m.messageID = id
            m.toUser = "bob"
            m.content = "text \(id)"
            return try m.serializedBytes()
        }
        let before = cluster.droppedDatagrams()
        peer.sendDatagram(.data, try message("honest"))
        let honest = peer.lastSent
        peer.sendRaw(honest)                              // replayed as is
        var tampered = honest
        tampered[tampered.count - 20] ^= 0x01             // a flipped ciphertext bit
        peer.sendRaw(tampered)
        peer.sealKey = DatagramSeal.newKey()              // someone without the session key
        peer.sendDatagram(.data, try message("forged"))

        #expect(await bobLog.wait { $0.messages.count >= 1 })
        #expect(await waitFor { cluster.droppedDatagrams() >= before + 3 }, "the replayed, tampered and forged ones counted dropped")
        #expect(await cluster.settled("bob"))
        #expect(bobLog.messages.map(\.id) == ["honest"])
        await bob.disconnect()
        await cluster.stop()
    }
}
