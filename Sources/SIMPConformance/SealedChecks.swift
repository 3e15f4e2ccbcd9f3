import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// Sealed messages (section 4, Sealed messages): the server stores and pushes what it cannot
    /// read unchanged, and checks only the form.
    static let sealed: [ConformanceCheck] = [
        ConformanceCheck("4.21", "4. Messages, Sealed messages",
                         "a SEALED message (base64 of an MLS PrivateMessage) is pushed with its content unchanged; one whose content is not that is BAD_REQUEST") { target in
            let (alice, _) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            // The form only: version mls10, wire format mls_private_message, then opaque bytes.
            let content = Data(SealedText.privateMessagePrefix + (0..<120).map { UInt8(truncatingIfNeeded: $0 &* 37) }).base64EncodedString()
            alice.sendDatagram(.data, try sealedMessage(id: "s1", to: bob, order: 1, content: content))
            guard let pushed = try bobPeer.push(of: "s1") else { throw ConformanceFailure("a SEALED message was not pushed") }
            try expect(pushed.type == .sealed && pushed.content == content, "pushed as \(pushed)")
            alice.sendDatagram(.data, try sealedMessage(id: "s2", to: bob, order: 2, content: "not base64 of an MLS message"))
            let answers = try alice.answers(until: "s2")
            try expect(answers.last?.kind == "failed bad_request", "a SEALED message with a plaintext content: \(answers)")
        },
    ]

    static func sealedMessage(id: String, to user: String, order: UInt64, content: String) throws -> [UInt8] {
        try Simp_Message.with {
            $0.version = 1
            $0.messageID = id
            $0.toUser = user
            $0.type = .sealed
            $0.content = content
            $0.clientSeq = order
        }.serializedBytes()
    }
}
