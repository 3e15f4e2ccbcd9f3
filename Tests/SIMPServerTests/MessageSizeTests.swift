import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A message must still fit one datagram when it is pushed, with the sender, time and seq the
/// server adds (docs/PROTOCOL.md, section 3): the client library refuses one that could not,
/// and the server refuses one sent past the library, rather than store what it cannot push.
@Suite(.serialized) struct MessageSizeTests {
    /// The longest user names, so the server adds the most it can.
    private let sender = String(repeating: "s", count: 32)
    private let recipient = String(repeating: "r", count: 32)

    /// Version, a 20-digit id, time, the text's tag and 2-byte length, and the recipient: the
    /// most a client's message holds besides its text.
    private static let overheadWithLongestID = 2 + 22 + 7 + 3 + 34

    @Test func theLargestMessageTheLibrarySendsIsDelivered() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient(sender)
        let (bob, bobLog) = try await cluster.connectedClient(recipient)
        let text = String(repeating: "x", count: MessageRules.maxMessageBytes - Self.overheadWithLongestID)
        let id = try await alice.send(to: recipient, text: text)
        #expect(await aliceLog.wait(timeout: .seconds(10)) { $0.delivered.contains(id) })
        #expect(bobLog.messages.map(\.text) == [text])

        // One byte of text more than fits with the shortest id: refused before anything is sent.
        let tooLong = String(repeating: "x", count: MessageRules.maxMessageBytes - (2 + 3 + 7 + 3 + 34) + 1)
        let refused = await #expect(throws: ClientError.self) { _ = try await alice.send(to: self.recipient, text: tooLong) }
        #expect(refused?.code == .messageTooLarge)
        #expect(refused?.message.hasSuffix("the limit is \(MessageRules.maxMessageBytes)") == true, "\(refused?.message ?? "")")
        #expect(cluster.metric("simp_messages_stored_total") == 1)
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
        var message = Simp_Message()
        message.version = 1
        message.messageID = id
        message.toUser = recipient
        message.type = .text
        message.content = text
        message.clientSeq = clientSeq
        return try message.serializedBytes()
    }
}
