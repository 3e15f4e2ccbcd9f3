import Foundation
import SIMPRedis
import NIOCore
@testable import SIMPServer
import SIMPCore
import Testing

/// Read receipts and typing between encrypting users (docs/E2EE.md, Part 7) as the server
/// routes them, pure: a sealed TYPING is relayed with its MLS message unchanged, naming the
/// typer; under `--e2e required` a plain one is dropped; a sealed read receipt is stored out of
/// the history and refused by the recipient's read-receipts setting; a group's goes to its
/// sender's inbox alone, its membership checked; every `markRead` mark is refused under
/// `--e2e required`.
struct SealedSignalsRoutingTests {
    typealias Node = DeliveryEngineEventTests.Node
    static let mls = SealedText.privateMessagePrefix + [0x20, 0x00, 0x41, 0xff, 0x00]

    @Test func aSealedTypingIsRoutedAndRelayedWithItsMLSMessageUnchanged() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        let bob = try node.online("bob", port: 4001)
        try node.datagram(.typing, SealedSignals.TypingBody(user: "bob", sealed: Self.mls).bytes, from: alice, port: 4000)
        #expect(node.actions.contains { if case .routeTyping("alice", "bob", .some(Self.mls)) = $0 { true } else { false } })
        node.on(.typingNodes(from: "alice", to: "bob", nodes: ["n1", "n2"], sealed: Self.mls))
        let relayed = node.actions.compactMap { if case .datagram(let out) = $0, out.header.sessionID == bob.id { out } else { nil } }
        #expect(relayed.map(\.header.kind) == [.typing])
        #expect(relayed.first?.payload == Array("alice".utf8) + [0] + Self.mls, "the typer's name, then the MLS message as it came")
        #expect(node.actions.contains { if case .publish(.typing(from: "alice", to: "bob", sealed: .some(Self.mls)), ["n2"]) = $0 { true } else { false } })
    }

    @Test func underE2ERequiredAPlainTypingIsDroppedAndASealedOneRouted() throws {
        var node = Node.make(sealedOnly: true)
        let alice = try node.online("alice", port: 4000)
        _ = try node.online("bob", port: 4001)
        try node.datagram(.typing, Array("bob".utf8), from: alice, port: 4000)
        #expect(!node.actions.contains { if case .routeTyping = $0 { true } else { false } })
        try node.datagram(.typing, SealedSignals.TypingBody(user: "bob", sealed: Self.mls).bytes, from: alice, port: 4000)
        #expect(node.actions.contains { if case .routeTyping("alice", "bob", .some(Self.mls)) = $0 { true } else { false } })
    }

    @Test func malformedTypingBodiesAreNotRouted() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        for body in [Array("bob".utf8) + [0], Array("bob".utf8) + [0] + SealedText.privateMessagePrefix, Array("bob".utf8) + [0, 9, 9, 9, 9, 9],
                     [0] + Self.mls, Array("alice".utf8) + [0] + Self.mls] {
            try node.datagram(.typing, body, from: alice, port: 4000)
            #expect(!node.actions.contains { if case .routeTyping = $0 { true } else { false } }, "\(body)")
        }
    }

    @Test func aSealedReadIsStoredOutOfTheHistoryAndFilteredWithTheReadReceiptsSetting() {
        var request = StoreRequest(from: "bob", id: "7", to: "alice", bytes: [1])
        #expect(MessageStore.storeFlag(request) == "bob", "a message: filtered, in the history")
        request.inHistory = false
        request.sealedRead = true
        #expect(MessageStore.storeFlag(request) == "~bob", "a sealed read: filtered, read-receipts too, out of the history")
        var notice = StoreRequest(from: "bob", id: "8", to: "alice", bytes: [1])
        notice.notice = true
        notice.inHistory = false
        #expect(MessageStore.storeFlag(notice) == "-")
        notice.inHistory = true
        #expect(MessageStore.storeFlag(notice) == "")
    }

    @Test func aSealedReadDatagramBecomesAStoreRequestOutOfTheHistory() throws {
        var message = Simp_Message()
        message.messageID = "r1"
        message.toUser = "alice"
        message.type = .sealedRead
        message.content = Data(Self.mls).base64EncodedString()
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        guard case .unordered(let request) = DeliveryEngine.storeRequest(for: message, from: bob, now: DeliveryEngineEventTests.at()) else {
            Issue.record("not stored")
            return
        }
        #expect(request.sealedRead && !request.inHistory && request.filtered)
        #expect(MessageRules.problem(in: message, sealedOnly: true) == nil, "taken under --e2e required")
        message.toUser = "#team"
        #expect(MessageRules.problem(in: message)?.code == .badRequest, "not to a group")
    }

    @Test func everyMarkIsRefusedUnderE2ERequired() {
        var request = Simp_ReadRequest()
        request.reads = [.with { $0.fromUser = "alice"; $0.messageID = "1"; $0.seq = 3 }]
        #expect(ReadReceipts.sealedOnlyProblem(in: request, sealedOnly: false) == nil)
        #expect(ReadReceipts.sealedOnlyProblem(in: request, sealedOnly: true) != nil)
        request.reads = [.with { $0.fromUser = "alice"; $0.messageID = "1"; $0.seq = 3; $0.group = "team"; $0.groupSeq = 2 }]
        #expect(ReadReceipts.sealedOnlyProblem(in: request, sealedOnly: false) == nil)
        #expect(ReadReceipts.sealedOnlyProblem(in: request, sealedOnly: true) != nil, "a group's mark goes sealed too")
        request.reads = []
        #expect(ReadReceipts.sealedOnlyProblem(in: request, sealedOnly: true) == nil)
    }

    /// A group's sealed read (`SENDER#NAME`) goes to SENDER's inbox alone, copied as one to
    /// SENDER, its `toUser` kept; the store checks SENDER is in the group, the engine its reader.
    @Test func aGroupsSealedReadIsStoredForItsSenderAlone() throws {
        var message = Simp_Message()
        message.messageID = "r2"
        message.toUser = "alice#team"
        message.type = .sealedRead
        message.content = Data(Self.mls).base64EncodedString()
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        guard case .unordered(let request) = DeliveryEngine.storeRequest(for: message, from: bob, now: DeliveryEngineEventTests.at()) else {
            Issue.record("not stored")
            return
        }
        #expect(request.to == "alice", "in alice's inbox, not the group's")
        #expect(request.sealedRead && !request.inHistory && request.filtered)
        #expect(try Simp_Message(serializedBytes: request.bytes).toUser == "alice#team", "its address kept for the MLS group")
        #expect(MessageStore.storeFlag(request) == "~bob#team", "refused unless alice is in #team")
        #expect(request.readGroup == "team")
        var oneToOne = request
        oneToOne.readGroup = nil
        #expect(MessageStore.storeFlag(oneToOne) == "~bob")
    }

    static func groupRead(_ id: String, to address: String, order: UInt64 = 0) throws -> [UInt8] {
        var message = Simp_Message()
        message.messageID = id
        message.toUser = address
        message.type = .sealedRead
        message.clientSeq = order
        message.content = Data(Self.mls).base64EncodedString()
        return try message.serializedBytes()
    }

    static func checks(_ node: Node) -> [(StoreRequest, String)] {
        node.actions.compactMap { if case .checkReader(let request, let group) = $0 { (request, group) } else { nil } }
    }

    /// A group's sealed read from a reader who is not in the group is refused NOT_A_MEMBER
    /// before anything is stored, whoever SENDER is: the answer tells a stranger nothing of the
    /// group's members, and nothing reaches SENDER's inbox (finding of session 36).
    @Test func aGroupsSealedReadWaitsForItsReaderToBeFoundAMember() throws {
        var node = Node.make(sealedOnly: true)
        let mallory = try node.online("mallory", port: 4002)
        try node.datagram(.data, try Self.groupRead("r9", to: "alice#team"), from: mallory, port: 4002)
        let asked = Self.checks(node)
        #expect(asked.map(\.1) == ["team"] && asked.first?.0.from == "mallory", "the reader's membership asked of the store")
        #expect(node.batches.isEmpty, "nothing stored before the answer")
        node.on(.readerChecked(asked[0].0, member: .success(false)))
        #expect(node.batches.isEmpty && !node.actions.contains { if case .later = $0 { true } else { false } }, "nothing goes to the store")
        guard case .failed(let failed)? = node.sent(to: mallory).first else {
            Issue.record("no answer: \(node.actions)")
            return
        }
        #expect(failed.code == .notAMember && failed.messageID == "r9" && failed.toUser == "alice", "named as the store names it")
        #expect(metricValue(node.engine.metrics.render(), "simp_group_reads_refused_total") == 1)
    }

    @Test func aMembersGroupReadGoesToTheStoreOnceCheckedAndAFailedCheckIsAnsweredAsAStoreOutage() throws {
        var node = Node.make(sealedOnly: true)
        let bob = try node.online("bob", port: 4001)
        try node.datagram(.data, try Self.groupRead("r1", to: "alice#team", order: 1), from: bob, port: 4001)
        let asked = Self.checks(node)
        #expect(asked.count == 1)
        node.on(.readerChecked(asked[0].0, member: .success(true)))
        #expect(Self.checks(node).isEmpty, "checked once")
        node.on(.due(.flushStores))
        let stored = node.batches.flatMap(\.items)
        #expect(stored.map(\.id) == ["r1"] && stored.first?.to == "alice" && stored.first?.readerChecked == true)
        #expect(stored.first.map(MessageStore.storeFlag) == "~bob#team", "the store still checks alice is in #team")

        try node.datagram(.data, try Self.groupRead("r2", to: "alice#team", order: 2), from: bob, port: 4001)
        let again = Self.checks(node)
        node.on(.readerChecked(again[0].0, member: .failure(RedisError(.protocolViolation, "down"))))
        guard case .failed(let failed)? = node.sent(to: bob).first else {
            Issue.record("no answer: \(node.actions)")
            return
        }
        #expect(failed.code == .storeUnavailable && failed.messageID == "r2", "the client sends it again")
    }

    /// A group's sealed read counts towards the new-recipients pacing as one to its SENDER: a
    /// member's reads to `NAME#GROUP` for name after name would otherwise tell, unpaced, which
    /// names exist (the store answers `UNKNOWN_USER` for one that does not). A group's message
    /// does not count (the group answers the same for every name).
    @Test func aGroupsSealedReadIsPacedAsOneToItsSender() throws {
        var message = Simp_Message()
        message.toUser = "alice#team"
        message.type = .sealedRead
        #expect(DeliveryEngine.isPaced(message))
        message.toUser = "alice"
        #expect(DeliveryEngine.isPaced(message))
        message.type = .sealed
        #expect(DeliveryEngine.isPaced(message))
        message.toUser = "#team"
        #expect(!DeliveryEngine.isPaced(message))
    }

    /// A node that drains answers every read it is checking before it says its stores are idle.
    @Test func aDrainWaitsForTheReadersBeingChecked() throws {
        var node = Node.make(sealedOnly: true)
        let bob = try node.online("bob", port: 4001)
        try node.datagram(.data, try Self.groupRead("r1", to: "alice#team"), from: bob, port: 4001)
        let asked = Self.checks(node)
        #expect(asked.count == 1)
        node.on(.draining)
        #expect(!node.actions.contains { if case .storesIdle = $0 { true } else { false } }, "a read is being checked")
        node.on(.readerChecked(asked[0].0, member: .success(false)))
        #expect(node.actions.contains { if case .storesIdle = $0 { true } else { false } }, "answered: idle")
    }
}
