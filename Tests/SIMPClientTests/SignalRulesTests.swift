import Foundation
@testable import SIMPClient
import SIMPCore
import Testing

/// Read receipts and typing in encrypted conversations (docs/E2EE.md, Part 7), the pure
/// decisions and the engine's part: what is sealed, what is shown, what is dropped and counted.
struct SignalRulesTests {
    typealias Body = SealedSignals.TypingBody
    static let mls = SealedText.privateMessagePrefix + [1, 2, 3]

    @Test func aClientThatDoesNotEncryptShowsPlainTypingAndDropsSealed() {
        #expect(SignalRules.typingStep(Body(user: "bob"), endToEnd: false) == .show(from: "bob"))
        #expect(SignalRules.typingStep(Body(user: "bob", sealed: Self.mls), endToEnd: false) == .drop(.unopened))
        #expect(SignalRules.typingStep(Body(user: "bob"), endToEnd: true) == .check(Body(user: "bob")))
    }

    @Test func anEncryptedConversationTakesOnlyATypingThatOpenedFromItsTyper() {
        let plain = Body(user: "bob")
        let sealed = Body(user: "bob", sealed: Self.mls)
        // Not encrypted: as before.
        #expect(SignalRules.typingVerdict(plain, encrypted: false, opened: nil) == .show)
        #expect(SignalRules.typingVerdict(sealed, encrypted: false, opened: nil) == .drop(.unopened))
        // Encrypted: never plain.
        #expect(SignalRules.typingVerdict(plain, encrypted: true, opened: nil) == .drop(.unsealed))
        #expect(SignalRules.typingVerdict(sealed, encrypted: true, opened: nil) == .drop(.unopened))
        #expect(SignalRules.typingVerdict(sealed, encrypted: true, opened: .init(sender: "bob", type: .typing)) == .show)
        #expect(SignalRules.typingVerdict(sealed, encrypted: true, opened: .init(sender: "carol", type: .typing)) == .drop(.unopened),
                "another member's typing under bob's name")
        #expect(SignalRules.typingVerdict(sealed, encrypted: true, opened: .init(sender: "bob", type: .text)) == .drop(.unopened),
                "a text moved into a TYPING")
    }

    @Test func typingGoesSealedWhereTheConversationIsEncryptedAndNeverPlainThere() {
        #expect(SignalRules.typingForm(endToEnd: false, encrypted: false, sealed: nil) == .plain)
        #expect(SignalRules.typingForm(endToEnd: true, encrypted: false, sealed: nil) == .plain)
        #expect(SignalRules.typingForm(endToEnd: true, encrypted: true, sealed: Self.mls) == .sealed(Self.mls))
        #expect(SignalRules.typingForm(endToEnd: true, encrypted: true, sealed: nil) == SignalRules.TypingForm.none)
    }

    @Test func aPlainReadIsDroppedOnlyForAnEncryptedConversation() {
        #expect(SignalRules.plainReadVerdict(encrypted: false) == .show)
        #expect(SignalRules.plainReadVerdict(encrypted: true) == .drop(.unsealed))
        // A group's plain READ notice names the group: its conversation is the group's.
        let notice = IncomingMessage(Simp_Message.with { $0.type = .read; $0.fromUser = "carol"; $0.toUser = "#team"; $0.content = "1" })
        #expect(ConversationKeys.conversation(of: notice, user: "alice") == "#team")
    }

    /// A group's sealed read is opened in the group's MLS group, and taken as the group's read
    /// by its sender, as what its user read by the reader's other devices; by no one else.
    @Test func aGroupsSealedReadOpensInTheGroupAndIsTakenByItsSenderOrItsReader() {
        let sealed = IncomingMessage(Simp_Message.with { $0.type = .sealedRead; $0.fromUser = "carol"; $0.toUser = "alice#team" })
        #expect(ConversationKeys.isGroupRead(sealed))
        #expect(ConversationKeys.conversation(of: sealed, user: "alice") == "#team")
        #expect(ConversationKeys.conversation(of: sealed, user: "carol") == "#team")
        let oneToOne = IncomingMessage(Simp_Message.with { $0.type = .sealedRead; $0.fromUser = "carol"; $0.toUser = "alice" })
        #expect(!ConversationKeys.isGroupRead(oneToOne))
        let address = SealedSignals.ReadAddress(sender: "alice", group: "team")
        #expect(SignalRules.groupReadAddressing(address, from: "carol", user: "alice")! == ("#team", "team"))
        #expect(SignalRules.groupReadAddressing(address, from: "carol", user: "carol")! == ("alice", nil), "the reader's own copy")
        #expect(SignalRules.groupReadAddressing(address, from: "carol", user: "bob") == nil, "another member's messages")
        #expect(SignalRules.groupReadAddressing(.init(sender: "alice"), from: "carol", user: "alice") == nil)
    }

    /// Reads stop short of the generations the group's other members can jump: with the Update
    /// made at 1,000 they always fit; when it could not be made, they stop.
    @Test func groupReadsStopBeforeTheNextTextWouldBeOutOfReach() {
        #expect(SignalRules.groupReadsFit(1, sealedSinceUpdate: 0, maximumForwardDistance: 1000))
        #expect(SignalRules.groupReadsFit(1, sealedSinceUpdate: ConversationKeys.updateAfterMessages - 1, maximumForwardDistance: 1000),
                "below the Update's count")
        #expect(SignalRules.groupReadsFit(2, sealedSinceUpdate: 998, maximumForwardDistance: 1000), "the next text is generation 1,000 at most")
        #expect(!SignalRules.groupReadsFit(1, sealedSinceUpdate: 1000, maximumForwardDistance: 1000), "the Update was due and not made")
        #expect(!SignalRules.groupReadsFit(3, sealedSinceUpdate: 998, maximumForwardDistance: 1000))
        #expect(!SignalRules.groupReadsFit(1, sealedSinceUpdate: 5_000, maximumForwardDistance: 1000))
    }

    /// A sealed read naming a message this device knows went to another conversation is one its
    /// reader could not have made: dropped whole. Messages it does not know are taken.
    @Test func aSealedReadNamesOnlyMessagesOfItsConversation() {
        let known = ["g1": "#team", "g2": "#team", "d1": "carol", "o1": "#other"]
        #expect(SignalRules.readNamesOnly(["g1", "g2"], of: "#team", knownTo: { known[$0] }))
        #expect(SignalRules.readNamesOnly(["g1", "forgotten"], of: "#team", knownTo: { known[$0] }))
        #expect(!SignalRules.readNamesOnly(["g1", "d1"], of: "#team", knownTo: { known[$0] }), "a one-to-one message in a group's read")
        #expect(!SignalRules.readNamesOnly(["o1"], of: "#team", knownTo: { known[$0] }), "another group's")
        #expect(SignalRules.readNamesOnly(["d1"], of: "carol", knownTo: { known[$0] }))
        #expect(!SignalRules.readNamesOnly(["g1"], of: "carol", knownTo: { known[$0] }), "a group's message in a one-to-one read")
    }

    static func mark(_ from: String, _ id: String, seq: UInt64 = 1, group: String = "") -> Simp_ReadMark {
        .with { $0.fromUser = from; $0.messageID = id; $0.seq = seq; $0.group = group; $0.groupSeq = group.isEmpty ? 0 : 4 }
    }

    @Test func marksOfEncryptedConversationsGoSealedPerSender() {
        let marks = [Self.mark("bob", "1"), Self.mark("carol", "2"), Self.mark("bob", "3"), Self.mark("bob", "1", seq: 2),
                     Self.mark("bob", "9", group: "team"), Self.mark("carol", "8", group: "team"), Self.mark("bob", "7", group: "other")]
        let routed = SignalRules.route(marks, endToEnd: true, encrypted: ["bob", "#team"])
        #expect(routed.plain == [marks[1], marks[6]], "carol's conversation and #other are not encrypted: plain")
        // A group's marks go to each sender in the group, never to the whole group.
        #expect(routed.sealed.map(\.peer) == ["bob", "bob#team", "carol#team"])
        #expect(routed.sealed.map(\.ids) == [["1", "3"], ["9"], ["8"]], "each id once")
        #expect(SignalRules.route(marks, endToEnd: false, encrypted: ["bob"]).plain == marks, "a client that does not encrypt: as before")
    }

    @Test func manyIdsAreCutIntoSealedReadsThatFitAPart() {
        let ids = (0..<40).map { String(repeating: "7", count: 20) + String($0) }
        let routed = SignalRules.route(ids.map { Self.mark("bob", $0) }, endToEnd: true, encrypted: ["bob"])
        #expect(routed.sealed.count > 1)
        #expect(routed.sealed.flatMap(\.ids) == ids)
        #expect(routed.sealed.allSatisfy { $0.ids.joined(separator: " ").utf8.count <= SealedText.partBytes })
    }

    @Test func aBatchGoesThroughTheKeysForSealedMessagesAndReads() {
        var read = IncomingMessage(Simp_Message.with { $0.type = .read; $0.fromUser = "bob"; $0.toUser = "alice"; $0.content = "1" })
        #expect(!ReceivedSaves.needsKeys([read], endToEnd: false))
        #expect(ReceivedSaves.needsKeys([read], endToEnd: true))
        read.group = "team"
        #expect(ReceivedSaves.needsKeys([read], endToEnd: true), "a group's plain READ is judged by the group's keys too")
        let sealedRead = IncomingMessage(Simp_Message.with { $0.type = .sealedRead; $0.fromUser = "bob"; $0.toUser = "alice" })
        #expect(sealedRead.sealed && sealedRead.sealedRead)
        #expect(ReceivedSaves.needsKeys([sealedRead], endToEnd: false))
    }

    @Test func anOpenedSealedReadIsARead() {
        var message = IncomingMessage(Simp_Message.with { $0.type = .sealedRead; $0.messageID = "r"; $0.fromUser = "bob"; $0.toUser = "alice" })
        message.unseal(.with { $0.type = .read; $0.messageID = "r"; $0.content = "1 2" })
        #expect(message.kind == .read && message.text == "1 2" && !message.sealed)
    }

    // MARK: the engine

    @Test func anEncryptingEngineHandsATypingToTheKeysAndShowsOrCountsTheirVerdict() {
        var engine = ClientEngineTests.connected(endToEnd: true)
        let body = Body(user: "bob", sealed: Self.mls)
        let actions = engine.handle(ClientEngineTests.datagram(.typing, body.bytes, packet: 1), at: ClientEngineTests.start)
        #expect(ClientEngineTests.events(actions).isEmpty, "nothing shown before the keys judged it")
        #expect(actions.contains { if case .checkTyping(body) = $0 { true } else { false } })
        #expect(ClientEngineTests.events(engine.handle(.typingChecked(from: "bob", .show), at: ClientEngineTests.start)) == [.typing(from: "bob")])
        let dropped = engine.handle(.typingChecked(from: "bob", .drop(.unsealed)), at: ClientEngineTests.start)
        #expect(ClientEngineTests.events(dropped).isEmpty)
        #expect(dropped.contains { if case .countDroppedSignal(.typing, .unsealed) = $0 { true } else { false } })
    }

    @Test func anEngineThatDoesNotEncryptDropsASealedTypingAndSendsTheSealedForm() {
        var engine = ClientEngineTests.connected()
        let body = Body(user: "bob", sealed: Self.mls)
        let actions = engine.handle(ClientEngineTests.datagram(.typing, body.bytes, packet: 1), at: ClientEngineTests.start)
        #expect(ClientEngineTests.events(actions).isEmpty)
        #expect(actions.contains { if case .countDroppedSignal(.typing, .unopened) = $0 { true } else { false } })
        let sent = ClientEngineTests.datagrams(engine.handle(.typing(to: "bob", sealed: Self.mls), at: ClientEngineTests.start))
        #expect(sent.map(\.0.kind) == [.typing] && sent.first?.1 == body.bytes)
    }

    @Test func sealedReadsAreSentWithoutEventsForTheirAnswers() {
        var engine = ClientEngineTests.connected()
        var item = ClientEngineTests.outgoing("r1", to: "bob")
        item.message.type = .sealedRead
        _ = engine.handle(.sendSilently([item]), at: ClientEngineTests.start)
        let accepted = engine.handle(.control(Simp_Envelope(.accepted(.with { $0.messageID = "r1"; $0.toUser = "bob"; $0.seq = 3 }))),
                                     at: ClientEngineTests.start)
        #expect(ClientEngineTests.events(accepted).isEmpty)
        let delivered = engine.handle(.control(Simp_Envelope(.delivered(.with { $0.messageID = "r1"; $0.toUser = "bob"; $0.seq = 3 }))),
                                      at: ClientEngineTests.start)
        #expect(ClientEngineTests.events(delivered).isEmpty)
        #expect(engine.silent.isEmpty, "forgotten once settled")
    }

    @Test func anEncryptingEngineLeavesItsConfirmedReadMarksToTheDriver() {
        var engine = ClientEngineTests.connected(confirmWhenShown: true, endToEnd: true)
        _ = engine.handle(ClientEngineTests.datagram(.data, ClientEngineTests.message(seq: 1), packet: 1), at: ClientEngineTests.start)
        let actions = engine.handle(.shown([1], marks: [Self.mark("bob", "m1")]), at: ClientEngineTests.start)
        #expect(actions.contains { if case .tellReadMarks(let marks) = $0 { marks == [Self.mark("bob", "m1")] } else { false } })
        #expect(!ClientEngineTests.controls(actions).contains { if case .markRead = $0 { true } else { false } })
    }
}

extension SignalRulesTests {
    @Test func aMessageOfATypeThisClientDoesNotKnowIsNotShown() {
        var engine = ClientEngineTests.connected()
        var message = Simp_Message()
        message.seq = 1
        message.fromUser = "bob"
        message.toUser = "alice"
        message.messageID = "u1"
        message.content = "opaque bytes of a later protocol"
        message.type = .UNRECOGNIZED(99)
        let bytes: [UInt8] = try! message.serializedBytes()
        let actions = engine.handle(ClientEngineTests.datagram(.data, bytes, packet: 1), at: ClientEngineTests.start)
        #expect(ClientEngineTests.events(actions).isEmpty)
        #expect(IncomingMessage(message).unknownType && !IncomingMessage(Simp_Message.with { $0.type = .audio }).unknownType)
    }
}

extension SignalRulesTests {
    @Test func aSealedReadPushedEarlyIsNeverShownAsAMessage() throws {
        var engine = ClientEngineTests.connected()
        func early(_ type: Simp_Message.MessageType, id: String, packet: UInt64) throws -> [ClientEvent] {
            let message = Simp_Message.with {
                $0.fromUser = "bob"; $0.toUser = "alice"; $0.messageID = id; $0.type = type
                $0.content = type == .text ? "hi" : Data(SealedText.privateMessagePrefix + [1, 2, 3]).base64EncodedString()
            }
            let payload = try #require(EarlyPayload(afterSeq: 0, message: try message.serializedBytes()).encoded())
            return ClientEngineTests.events(engine.handle(ClientEngineTests.datagram(.early, payload, packet: packet), at: ClientEngineTests.start))
        }
        #expect(try early(.sealedRead, id: "r1", packet: 1).isEmpty)
        #expect(try early(.UNRECOGNIZED(99), id: "u1", packet: 2).isEmpty)
        #expect(try early(.text, id: "t1", packet: 3).count == 1, "the early path works: a text is shown")
    }
}
