import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Issue 9, finding 12: what one user sends must not steer another's terminal or application.
@Suite(.serialized) struct UntrustedContentTests {
    /// A hand-driven sender (the library would refuse): an image URL of another scheme gets
    /// `failed{BAD_REQUEST}`, and the sender's next message is not left waiting for its number.
    @Test func anImageURLOfAnotherSchemeIsRefusedAndTheNextMessageStillGoes() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        peer.sendDatagram(.data, try image(id: "bad-1", clientSeq: 1, url: "javascript:alert(document.cookie)"))
        peer.sendDatagram(.data, try image(id: "good-2", clientSeq: 2, url: "https://example.org/cat.png"))
        var failed: Simp_Failed?
        var accepted: Simp_Accepted?
        while failed == nil || accepted == nil, let envelope = try peer.read() {
            if case .failed(let f) = envelope.body { failed = f }
            if case .accepted(let a) = envelope.body { accepted = a }
        }
        #expect(failed?.messageID == "bad-1")
        #expect(failed?.code == .badRequest)
        #expect(failed?.reason == "imageURL must start with http:// or https://")
        #expect(accepted?.messageID == "good-2")
        #expect(await bobLog.wait { !$0.messages.isEmpty })
        try await Task.sleep(for: .milliseconds(200))
        #expect(bobLog.messages.map(\.imageURL) == ["https://example.org/cat.png"], "only the web URL reached bob")
        await bob.close()
        await cluster.stop()
    }

    func image(id: String, clientSeq: UInt64, url: String) throws -> [UInt8] {
        var message = Simp_Message()
        message.version = 1
        message.messageID = id
        message.toUser = "bob"
        message.type = .image
        message.imageURL = url
        message.clientSeq = clientSeq
        return try message.serializedBytes()
    }
}
