import Foundation
import SIMPCore
import Testing

/// The wire forms of read receipts and typing between encrypting users (docs/PROTOCOL.md,
/// TYPING and Read receipts; docs/E2EE.md, Part 7).
struct SealedSignalsTests {
    static let mls = SealedText.privateMessagePrefix + [0x20, 0x00, 0x41]

    @Test func aTypingBodyIsANameOrANameAZeroByteAndAPrivateMessage() {
        #expect(SealedSignals.TypingBody(Array("bob".utf8)) == SealedSignals.TypingBody(user: "bob"))
        let sealed = SealedSignals.TypingBody(user: "bob", sealed: Self.mls)
        #expect(sealed.bytes == Array("bob".utf8) + [0] + Self.mls)
        #expect(SealedSignals.TypingBody(sealed.bytes) == sealed, "a zero byte inside the MLS message is kept")
        #expect(sealed.naming("alice") == SealedSignals.TypingBody(user: "alice", sealed: Self.mls))
        #expect(SealedSignals.TypingBody(user: "bob").bytes == Array("bob".utf8))
    }

    @Test(arguments: [[UInt8](), Array("Bob".utf8), Array("bob".utf8) + [0], Array("bob".utf8) + [0] + SealedText.privateMessagePrefix,
                      Array("bob".utf8) + [0, 0, 1, 0, 1, 7], [0] + mls, Array("b b".utf8) + [0] + mls])
    func malformedBodiesDoNotParse(_ body: [UInt8]) {
        #expect(SealedSignals.TypingBody(body) == nil)
    }

    @Test func aSealedReadGoesToAUserUnderAPlainIdWithAPrivateMessage() {
        var message = Simp_Message()
        message.messageID = "5"
        message.toUser = "alice"
        message.type = .sealedRead
        message.content = Data(Self.mls).base64EncodedString()
        #expect(MessageRules.problem(in: message) == nil)
        #expect(MessageRules.problem(in: message, sealedOnly: true) == nil, "sealed: taken under --e2e required")
        var part = message
        part.messageID = "5/1/2"
        #expect(MessageRules.problem(in: part)?.code == .badRequest)
        var group = message
        group.toUser = "#team"
        #expect(MessageRules.problem(in: group)?.code == .badRequest)
        var plain = message
        plain.content = "5 6 7"
        #expect(MessageRules.problem(in: plain)?.code == .badRequest)
        var image = message
        image.imageURL = "https://example.com/a.png"
        #expect(MessageRules.problem(in: image)?.code == .badRequest)
        var read = message
        read.type = .read
        read.content = "5"
        #expect(MessageRules.problem(in: read)?.code == .badRequest, "a plain READ is never sent as data")
        var typing = message
        typing.type = .typing
        #expect(MessageRules.problem(in: typing)?.code == .badRequest, "nor a TYPING")
    }

    /// A group's read goes to its sender in the group, `SENDER#NAME`: one inbox, one MLS group.
    @Test func aGroupsSealedReadGoesToItsSenderInTheGroup() {
        #expect(SealedSignals.ReadAddress("alice#team") == .init(sender: "alice", group: "team"))
        #expect(SealedSignals.ReadAddress("alice") == .init(sender: "alice"))
        #expect(SealedSignals.ReadAddress("alice#team")?.conversation == "#team")
        #expect(SealedSignals.ReadAddress("alice")?.conversation == "alice")
        #expect(SealedSignals.ReadAddress(sender: "alice", group: "team").toUser == "alice#team")
        for bad in ["#team", "alice#", "#", "Alice#team", "alice#Team", "alice##team", "alice#team#x", "alice#te am", ""] {
            #expect(SealedSignals.ReadAddress(bad) == nil, "\(bad)")
        }
        var message = Simp_Message()
        message.messageID = "5"
        message.toUser = "alice#team"
        message.type = .sealedRead
        message.content = Data(Self.mls).base64EncodedString()
        #expect(MessageRules.problem(in: message) == nil)
        #expect(MessageRules.problem(in: message, sealedOnly: true) == nil)
        var noGroup = message
        noGroup.toUser = "alice#"
        #expect(MessageRules.problem(in: noGroup)?.code == .unknownUser)
        var plain = message
        plain.content = "5 6"
        #expect(MessageRules.problem(in: plain)?.code == .badRequest)
        #expect(SealedSignals.inboxOwner(of: message) == "alice")
        #expect(SealedSignals.inboxOwner(of: .with { $0.toUser = "alice"; $0.type = .sealedRead }) == "alice")
        #expect(SealedSignals.inboxOwner(of: .with { $0.toUser = "alice#team"; $0.type = .sealed }) == "alice#team", "only a read")
        // Only a read is addressed so: a sealed text goes to a user or to the whole group.
        var text = message
        text.type = .sealed
        #expect(MessageRules.problem(in: text)?.code == .unknownUser)
    }

    @Test func eachOuterFormHoldsItsOwnContent() {
        for inner: Simp_Message.MessageType in [.text, .image, .textPart] {
            #expect(SealedSignals.innerFits(outer: .sealed, inner: inner))
            #expect(!SealedSignals.innerFits(outer: .sealedRead, inner: inner))
            #expect(!SealedSignals.innerFits(outer: nil, inner: inner))
        }
        #expect(SealedSignals.innerFits(outer: .sealedRead, inner: .read))
        #expect(!SealedSignals.innerFits(outer: .sealed, inner: .read))
        #expect(!SealedSignals.innerFits(outer: nil, inner: .read))
        #expect(SealedSignals.innerFits(outer: nil, inner: .typing))
        #expect(!SealedSignals.innerFits(outer: .sealed, inner: .typing) && !SealedSignals.innerFits(outer: .sealedRead, inner: .typing))
        #expect(!SealedSignals.innerFits(outer: .text, inner: .text))
    }
}
