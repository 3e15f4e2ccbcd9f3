import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A message the server refuses for its content (`failed`) used a `clientSeq` of the sender's
/// send order; the sender forgets it, so the server must not wait for that number.
@Suite(.serialized) struct RefusedMessageOrderTests {
    @Test func aRefusedMessageDoesNotHoldUpTheSendersNextOne() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        peer.sendDatagram(.data, try message(id: "bad-1", clientSeq: 1, type: .receipt))
        peer.sendDatagram(.data, try message(id: "good-2", clientSeq: 2, type: .text))
        var failed: Simp_Failed?
        var accepted: Simp_Accepted?
        while failed == nil || accepted == nil, let envelope = try peer.read() {
            if case .failed(let f) = envelope.body { failed = f }
            if case .accepted(let a) = envelope.body { accepted = a }
        }
        #expect(failed?.messageID == "bad-1" && failed?.code == .badRequest)
        #expect(accepted?.messageID == "good-2", "stored without waiting for the refused number")
        #expect(await bobLog.wait { $0.messages.map(\.id) == ["good-2"] })
        await bob.close()
        await cluster.stop()
    }

    func message(id: String, clientSeq: UInt64, type: Simp_Message.MessageType) throws -> [UInt8] {
        var message = Simp_Message()
        message.version = 1
        message.messageID = id
        message.toUser = "bob"
        message.type = type
        message.content = "hello"
        message.clientSeq = clientSeq
        return try message.serializedBytes()
    }
}
