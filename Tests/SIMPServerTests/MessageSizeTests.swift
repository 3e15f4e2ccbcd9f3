import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A message must still fit one datagram when it is pushed, with the sender, time and seq the
/// server adds (docs/PROTOCOL.md, section 3): the client library sends a longer text in parts
/// (Long messages), refuses one over the server's limit, and the server refuses a message sent
/// past the library that it could not push, rather than store it.
@Suite(.serialized) struct MessageSizeTests {
    /// The longest user names, so the server adds the most it can.
    private let sender = String(repeating: "s", count: 32)
    private let recipient = String(repeating: "r", count: 32)

    /// A text of up to `LongText.partBytes` goes as one message, with the longest names; one
    /// byte more goes as two parts and arrives whole, as one message.
    @Test func aTextOverOnePartGoesInPartsAndArrivesWhole() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient(sender)
        let (bob, bobLog) = try await cluster.connectedClient(recipient)
        let one = String(repeating: "x", count: LongText.partBytes)
        let oneID = try await alice.send(to: recipient, text: one)
        #expect(await aliceLog.wait(timeout: .seconds(10)) { $0.delivered.contains(oneID) })
        #expect(cluster.metric("simp_messages_stored_total") == 1)

        let two = String(repeating: "y", count: LongText.partBytes + 1)
        let twoID = try await alice.send(to: recipient, text: two)
        #expect(await aliceLog.wait(timeout: .seconds(10)) { $0.delivered.contains(twoID) })
        #expect(cluster.metric("simp_messages_stored_total") == 3, "the second text went as two stored parts")
        #expect(bobLog.messages.map(\.text) == [one, two])
        #expect(bobLog.messages.map(\.id) == [oneID, twoID])
        #expect(bobLog.messages.map(\.parts) == [1, 2])
        await alice.close()
        await bob.close()
        await cluster.stop()
    }

    /// Over the server's `--max-message-bytes` (told at connect) the library refuses the text
    /// before anything is sent: the server receives no datagram for it.
    @Test func aTextOverTheServersLimitIsRefusedBeforeSending() async throws {
        let cluster = try await TestCluster.start { $0.limits.maxMessageBytes = 5_000 }
        // No keepalive falls between the two readings of the datagram counter.
        var config = cluster.clientConfiguration()
        config.keepaliveInterval = .seconds(600)
        let alice = SIMPClient(configuration: config)
        try await alice.register(user: sender, password: "pw-\(sender)")
        try await alice.connect(user: sender, password: "pw-\(sender)")
        let bob = SIMPClient(configuration: config)
        let bobLog = EventLog(bob)
        try await bob.register(user: recipient, password: "pw-\(recipient)")
        try await bob.connect(user: recipient, password: "pw-\(recipient)")
        let datagramsBefore = cluster.metric("simp_datagrams_received_total")
        let refused = await #expect(throws: ClientError.self) {
            _ = try await alice.send(to: self.recipient, text: String(repeating: "z", count: 5_001))
        }
        #expect(refused?.code == .messageTooLarge)
        #expect(refused?.message == "message is 5001 bytes; the limit is 5000", "\(refused?.message ?? "")")
        #expect(cluster.metric("simp_datagrams_received_total") == datagramsBefore, "nothing was sent")
        let fits = String(repeating: "w", count: 5_000)
        _ = try await alice.send(to: recipient, text: fits)
        #expect(await bobLog.wait(timeout: .seconds(10)) { $0.messages.map(\.text) == [fits] })
        #expect(cluster.metric("simp_messages_stored_total") == 6, "only the 5,000-byte text's six parts were stored")
        #expect(cluster.metric("simp_datagrams_received_total") >= datagramsBefore + 6)
        await alice.close()
        await bob.close()
        await cluster.stop()
    }

    /// A datagram within the size limit whose message, stored, could not be pushed: the sender
    /// gets `failed` MESSAGE_TOO_LARGE, nothing is stored, and its next message is not held up.
    @Test func theServerRefusesWhatItCouldNotPush() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register(sender)
        let (bob, bobLog) = try await cluster.connectedClient(recipient)
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login(sender, "pw-\(sender)"))

        let big = try message(id: "big-1", clientSeq: 1, text: String(repeating: "y", count: 1_120))
        #expect(big.count <= DatagramHeader.maxPayload, "the datagram itself is within the limit")
        peer.sendDatagram(.data, big)
        peer.sendDatagram(.data, try message(id: "small-2", clientSeq: 2, text: "after"))
        let (failed, accepted) = try peer.readFailedAndAccepted()
        #expect(failed?.messageID == "big-1" && failed?.code == .messageTooLarge)
        #expect(failed?.reason.hasSuffix("the limit is \(MessageRules.maxStoredBytes)") == true, "\(failed?.reason ?? "")")
        #expect(accepted?.messageID == "small-2", "stored without waiting for the refused number")
        #expect(await bobLog.wait { $0.messages.map(\.id) == ["small-2"] })
        #expect(cluster.metric("simp_messages_stored_total") == 1)
        await bob.close()
        await cluster.stop()
    }

    private func message(id: String, clientSeq: UInt64, text: String) throws -> [UInt8] {
        try datagramMessage(id: id, clientSeq: clientSeq, to: recipient, content: text)
    }
}
