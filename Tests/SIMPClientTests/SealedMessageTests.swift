import Foundation
import SIMPCore
import SIMPMLS
import Testing
@testable import SIMPClient

/// The sealed form (docs/PROTOCOL.md, Sealed messages), with real MLS groups made here: a
/// full sealed part with the longest id and recipient fits what a client may send, the
/// server's rule takes it, sizes are padded, and the receiving member opens what was sealed.
struct SealedMessageTests {
    static let suite = ConversationKeys.suite
    static func random(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }

    /// Two members: the sender's group and the receiver's, joined from the Welcome.
    static func pair() throws -> (sender: MLSGroup, receiver: MLSGroup) {
        let credential = { (name: String) in Credential.basic(identity: Array("\(name)/phone".utf8)) }
        let receiverSigner = try SignaturePrivateKey(rawRepresentation: random(32))
        let bundle = try MLSKeyPackageBundle(suite: suite, credential: credential("bob"), capabilities: ConversationKeys.capabilities,
                                             lifetime: Lifetime(notBefore: 0, notAfter: .max), signer: receiverSigner, randomness: random)
        var sender = try MLSGroup.create(groupID: random(16), suite: suite, credential: credential("alice"),
                                         capabilities: ConversationKeys.capabilities, lifetime: Lifetime(notBefore: 0, notAfter: .max),
                                         signer: try SignaturePrivateKey(rawRepresentation: random(32)), randomness: random)
        let output = try sender.commit(adding: [bundle.keyPackage], randomness: random)
        let receiver = try MLSGroup(joining: try #require(output.welcome), with: bundle, policy: ConversationKeys.policy)
        return (output.group, receiver)
    }

    @Test func aFullSealedPartWithTheLongestIdAndRecipientFitsAndOpens() throws {
        var (sender, receiver) = try Self.pair()
        let recipient = String(repeating: "r", count: 32)
        let id = LongText.PartID(base: String(repeating: "9", count: 20), index: 148, count: 148).description
        var message = ClientEngine.plain(String(repeating: "é", count: SealedText.partBytes / 2), type: Simp_Message.MessageType.textPart)
        message.version = 1
        message.messageID = id
        message.toUser = recipient
        message.time = Int64(Date().timeIntervalSince1970 * 1000)
        message.clientSeq = UInt64(UInt32.max)
        message.fresh = true
        let sealed = try ConversationKeys.sealed(Outgoing(to: recipient, message: message), in: &sender, randomness: Self.random)
        let size = (try sealed.message.serializedBytes() as [UInt8]).count
        #expect(size <= MessageRules.maxMessageBytes, "\(size) bytes")
        #expect(MessageRules.problem(in: sealed.message, sealedOnly: true) == nil)
        #expect(!sealed.message.content.contains("é") && sealed.message.imageURL.isEmpty)

        let bytes = try #require(SealedText.mlsBytes(of: sealed.message.content))
        guard case .privateMessage(let wire) = try MLSMessage(mlsDecoding: bytes) else { Issue.record("not a PrivateMessage"); return }
        guard case .application(_, let data, _, _) = try receiver.process(.privateMessage(wire)) else { Issue.record("not application data"); return }
        let inner = try Simp_Message(serializedBytes: data)
        #expect(inner.content == message.content && inner.messageID == id && inner.type == .textPart)
    }

    static func sealedBytes(_ text: String, in group: inout MLSGroup) throws -> MLSMessage {
        var message = ClientEngine.plain(text)
        message.messageID = "1"
        let sealed = try ConversationKeys.sealed(Outgoing(to: "bob", message: message), in: &group, randomness: random)
        return try MLSMessage(mlsDecoding: try #require(SealedText.mlsBytes(of: sealed.message.content)))
    }

    /// Forward secrecy (RFC 9420 section 16.6): a state saved after the receiver read a message
    /// and a commit came cannot read that message again, and after more commits than the kept
    /// past epochs, not even one it never read.
    @Test func aStateSavedAfterACommitCannotDecryptWhatWasCapturedBefore() throws {
        var (alice, bob) = try Self.pair()
        let read = try Self.sealedBytes("read before the commit", in: &alice)
        let unread = try Self.sealedBytes("never read", in: &alice)
        guard case .application = try bob.process(read) else { Issue.record("not read"); return }
        for _ in 0..<3 {
            let update = try alice.commit(randomness: Self.random)
            alice = update.group
            #expect(try bob.process(update.message) == .newEpoch(alice.epoch))
        }
        let stolen = try MLSGroup(savedState: try bob.savedState(), credentialValidator: nil, proposalApprover: nil)
        var thief = stolen
        #expect(throws: (any Error).self) { try thief.process(read) }
        thief = stolen
        #expect(throws: (any Error).self, "the epoch's keys are gone after 3 commits") { try thief.process(unread) }
    }

    /// Post-compromise security (section 16.6): a clone of a device's state taken before that
    /// device's Update cannot follow the group past it.
    @Test func aClonedStateCannotDecryptAfterTheVictimsNextUpdate() throws {
        var (alice, bob) = try Self.pair()
        let clone = try MLSGroup(savedState: try bob.savedState(), credentialValidator: nil, proposalApprover: nil)
        let update = try bob.commit(randomness: Self.random)
        bob = update.group
        #expect(try alice.process(update.message) == .newEpoch(bob.epoch))
        let after = try Self.sealedBytes("after the update", in: &alice)
        guard case .application(_, let data, _, _) = try bob.process(after) else { Issue.record("bob cannot read"); return }
        #expect(try Simp_Message(serializedBytes: data).content == "after the update")
        var thief = clone
        #expect(throws: (any Error).self, "the clone cannot take the victim's commit") { try thief.process(update.message) }
        thief = clone
        #expect(throws: (any Error).self, "nor read what follows it") { try thief.process(after) }
    }

    @Test func sizesArePaddedToTheBlock() throws {
        var (sender, _) = try Self.pair()
        var sizes: Set<Int> = []
        for length in 1...40 {
            var message = ClientEngine.plain(String(repeating: "x", count: length))
            message.messageID = "1"
            let sealed = try ConversationKeys.sealed(Outgoing(to: "bob", message: message), in: &sender, randomness: Self.random)
            sizes.insert(try #require(SealedText.mlsBytes(of: sealed.message.content)).count)
        }
        #expect(sizes.count == 1, "texts of 1 to 40 bytes look alike: \(sizes)")
    }

    @Test func theServerRuleRefusesWhatIsNotSealedOrNotItsForm() {
        var plain = ClientEngine.plain("hello")
        plain.messageID = "1"
        plain.toUser = "bob"
        #expect(MessageRules.problem(in: plain, sealedOnly: true)?.code == .e2ERequired)
        plain.toUser = "#team"
        #expect(MessageRules.problem(in: plain, sealedOnly: true)?.code == .e2ERequired, "groups are encrypted too")
        var sealed = plain
        sealed.toUser = "bob"
        sealed.type = .sealed
        sealed.content = "hello"
        #expect(MessageRules.problem(in: sealed)?.code == .badRequest)
        sealed.content = Data([0, 1, 0, 1, 9]).base64EncodedString()
        #expect(MessageRules.problem(in: sealed)?.code == .badRequest, "a PublicMessage is not a sealed message")
        sealed.content = Data(SealedText.privateMessagePrefix + [9]).base64EncodedString()
        #expect(MessageRules.problem(in: sealed) == nil)
        sealed.messageID = "7/2/\(SealedText.maxParts(forMaxBytes: LongText.defaultMaxBytes) + 1)"
        #expect(MessageRules.problem(in: sealed)?.code == .messageTooLarge)
        sealed.messageID = "7/2/3"
        sealed.imageURL = "https://example.com/a.png"
        #expect(MessageRules.problem(in: sealed)?.code == .badRequest, "the image goes inside")
    }
}

/// Read receipts and typing sealed (docs/E2EE.md, Part 7), with real MLS groups made here.
struct SealedSignalMLSTests {
    typealias Pair = SealedMessageTests

    @Test func aReadIsASealedReadThatHidesItsIdsFitsAndOpensToARead() throws {
        var (sender, receiver) = try Pair.pair()
        let ids = SignalRules.route((0..<40).map { n in .with { $0.fromUser = "alice"; $0.messageID = "1234567890123456789\(n)"; $0.seq = 1 } },
                                    endToEnd: true, encrypted: ["alice"]).sealed[0].ids
        let made = try ClientEngine.message(ClientEngine.plain(ids.joined(separator: " "), type: .read), to: String(repeating: "r", count: 32),
                                            at: 1_700_000_000_000, random: { UInt64.max })
        let sealed = try ConversationKeys.sealed(made.items[0], in: &sender, randomness: Pair.random)
        #expect(sealed.message.type == .sealedRead)
        let bytes: [UInt8] = try sealed.message.serializedBytes()
        #expect(bytes.count <= MessageRules.maxMessageBytes, "\(bytes.count) bytes")
        #expect(MessageRules.problem(in: sealed.message, sealedOnly: true) == nil)
        for id in ids {
            #expect(!sealed.message.content.contains(id))
            #expect(!bytes.starts(with: Array(id.utf8)) && String(decoding: bytes, as: UTF8.self).range(of: id) == nil, "\(id) in the datagram")
        }
        let mls = try #require(SealedText.mlsBytes(of: sealed.message.content))
        let opened = try ConversationKeys.openedSignal(mls, in: receiver)
        #expect(opened == SignalRules.Opened(sender: "alice", type: .read))
        guard case .privateMessage(let wire) = try MLSMessage(mlsDecoding: mls),
              case .application(_, let data, _, _) = try receiver.process(.privateMessage(wire)) else { Issue.record("did not open"); return }
        #expect(try Simp_Message(serializedBytes: data).content == ids.joined(separator: " "))
    }

    /// A group's read, to the longest `SENDER#NAME`, with the most ids one carries, still fits.
    @Test func aGroupsReadToTheLongestAddressFits() throws {
        var (sender, _) = try Pair.pair()
        let ids = SignalRules.route((0..<40).map { n in .with { $0.fromUser = "alice"; $0.messageID = "1234567890123456789\(n)"; $0.seq = 1 } },
                                    endToEnd: true, encrypted: ["alice"]).sealed[0].ids
        let address = SealedSignals.ReadAddress(sender: String(repeating: "s", count: 32), group: String(repeating: "g", count: 32))
        var made = try ClientEngine.message(ClientEngine.plain(ids.joined(separator: " "), type: .read), to: address.toUser,
                                            at: 1_700_000_000_000, random: { UInt64.max })
        made.items[0].message.clientSeq = UInt64(UInt32.max)
        made.items[0].message.fresh = true
        let sealed = try ConversationKeys.sealed(made.items[0], in: &sender, randomness: Pair.random)
        #expect(sealed.message.type == .sealedRead && sealed.message.toUser == address.toUser)
        let bytes: [UInt8] = try sealed.message.serializedBytes()
        #expect(bytes.count <= MessageRules.maxMessageBytes, "\(bytes.count) bytes")
        #expect(MessageRules.problem(in: sealed.message, sealedOnly: true) == nil)
    }

    /// The group's other members never see the generations a reader used for reads: its next
    /// text is that many ahead. Up to the Update every 1,000 sealed messages (reads counted)
    /// it opens; a reader that never sent an Update would, past 1,000 reads, make its next text
    /// undecryptable for them.
    @Test func aTextAfterReadsTheOthersNeverSawOpensUpToTheUpdatesBound() throws {
        var (reader, member) = try Pair.pair()
        _ = try member.process(try Pair.sealedBytes("before", in: &reader))
        for _ in 0..<(ConversationKeys.updateAfterMessages - 2) { _ = try Pair.sealedBytes("a read to another member", in: &reader) }
        _ = try member.process(try Pair.sealedBytes("after 998 reads", in: &reader))
        for _ in 0..<(ConversationKeys.updateAfterMessages + 1) { _ = try Pair.sealedBytes("a read to another member", in: &reader) }
        #expect(throws: (any Error).self, "1,001 generations ahead") { try member.process(try Pair.sealedBytes("too far", in: &reader)) }
    }

    /// Why a group's read is opened on a copy: its sender sees only the reads addressed to it, so
    /// one that comes before the reader's text (stored apart, in its inbox) is far ahead of it;
    /// taken on the real state it would leave the text only 32 skipped keys, and reads to other
    /// members are in between.
    @Test func aGroupsReadOpenedOnACopyLeavesTheTextBeforeItOpenable() throws {
        var (reader, sender) = try Pair.pair()
        let text = try Pair.sealedBytes("the reader's text", in: &reader)
        for _ in 0..<40 { _ = try Pair.sealedBytes("a read to another member", in: &reader) }
        let read = try Pair.sealedBytes("a read to this member", in: &reader)
        var moved = sender
        _ = try moved.process(read)
        #expect(throws: (any Error).self, "the text's key was dropped") { try moved.process(text) }
        let bytes = try read.mlsEncoded()
        #expect(try ConversationKeys.openedSignal(bytes, in: sender).sender == "alice")
        _ = try sender.process(text)
    }

    /// Why a typing is opened on a copy: texts sealed before it, still on their way, open after
    /// it; had the typing moved the receiver's ratchet, only the last 32 would.
    @Test func aTypingOpenedOnACopyLeavesTheTextsBeforeItOpenable() throws {
        var (sender, receiver) = try Pair.pair()
        let texts = try (0..<40).map { _ in try Pair.sealedBytes("on its way", in: &sender) }
        let typing = try ConversationKeys.sealedTyping(in: &sender, randomness: Pair.random)
        #expect(typing.count + 6 <= DatagramHeader.maxPayload)
        #expect(try ConversationKeys.openedSignal(typing, in: receiver) == SignalRules.Opened(sender: "alice", type: .typing))
        #expect(try ConversationKeys.openedSignal(typing, in: receiver).type == .typing, "a replay opens again: nothing was kept")
        var moved = receiver
        guard case .privateMessage(let wire) = try MLSMessage(mlsDecoding: typing) else { Issue.record("not a PrivateMessage"); return }
        _ = try moved.process(.privateMessage(wire))
        #expect(throws: (any Error).self, "the ratchet moved past the first text") { try moved.process(texts[0]) }
        for text in texts { _ = try receiver.process(text) }
        // Another group's member (or the server) cannot make one that opens.
        var (stranger, _) = try Pair.pair()
        #expect(throws: (any Error).self) { try ConversationKeys.openedSignal(try ConversationKeys.sealedTyping(in: &stranger, randomness: Pair.random), in: receiver) }
    }
}
