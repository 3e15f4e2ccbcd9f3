@testable import SIMPServer
import SIMPCore
import Testing

/// Which read marks are told, and the notices that tell them.
struct ReadReceiptRulesTests {
    static func mark(_ from: String, _ id: String, _ seq: UInt64) -> Simp_ReadMark {
        var mark = Simp_ReadMark()
        mark.fromUser = from
        mark.messageID = id
        mark.seq = seq
        return mark
    }

    static func groupMark(_ from: String, _ id: String, _ seq: UInt64, group: String, at place: UInt64) -> Simp_ReadMark {
        var mark = mark(from, id, seq)
        mark.group = group
        mark.groupSeq = place
        return mark
    }

    static let reader = ReadReceipts.Reader(user: "bob", device: "phone", deviceMark: 5, otherDevices: true)

    @Test func onlyWhatTheSessionConfirmedIsToldOnce() {
        var request = Simp_ReadRequest()
        request.reads = [Self.mark("alice", "a", 4), Self.mark("alice", "b", 6), Self.mark("alice", "a", 4), Self.mark("carol", "c", 5)]
        #expect(ReadReceipts.delivered(request, reader: Self.reader).map(\.messageID) == ["a", "c"])
        // The one above the confirmed mark is counted, not lost without a trace; a repeat is no loss.
        #expect(ReadReceipts.sorted(request, reader: Self.reader).unconfirmed == 1)
        var confirmed = Self.reader
        confirmed.deviceMark = 6
        #expect(ReadReceipts.sorted(request, reader: confirmed) == .init(delivered: [request.reads[0], request.reads[1], request.reads[3]], unconfirmed: 0))
    }

    @Test func oneNoticePerSenderAndOneForTheReadersOtherDevices() throws {
        var next: UInt64 = 0
        let notices = ReadReceipts.notices([Self.mark("alice", "a", 1), Self.mark("carol", "c", 2), Self.mark("alice", "b", 3)],
                                           reader: Self.reader, sendersTakingReceipts: ["alice"], ids: { next += 1; return next }, nowMillis: 9)
        #expect(notices.map(\.to) == ["alice", "bob", "bob"], "carol takes no read receipts: only bob's devices learn")
        #expect(notices.allSatisfy { $0.notice && !$0.inHistory && $0.from == "bob" })
        let told = try Simp_Message(serializedBytes: notices[0].bytes)
        #expect(told.type == .read && told.content == "a b" && told.toUser == "alice" && told.fromDevice.isEmpty)
        let own = try Simp_Message(serializedBytes: notices[1].bytes)
        #expect(own.toUser == "alice" && own.fromDevice == "phone", "the reading device skips its own")
        var single = Self.reader
        single.otherDevices = false
        #expect(ReadReceipts.notices([Self.mark("alice", "a", 1)], reader: single, sendersTakingReceipts: ["alice"], ids: { 1 }, nowMillis: 9).count == 1)
    }

    @Test func aGroupMarkIsToldToItsSenderNamingTheGroupAndToTheReadersDevicesNamingTheSender() throws {
        var next: UInt64 = 0
        let marks = [Self.groupMark("alice", "g1", 1, group: "crew", at: 7), Self.mark("alice", "a", 2),
                     Self.groupMark("alice", "g2", 3, group: "crew", at: 9), Self.groupMark("carol", "c", 4, group: "crew", at: 8)]
        let notices = ReadReceipts.notices(marks, reader: Self.reader, sendersTakingReceipts: ["alice", "carol"],
                                           ids: { next += 1; return next }, nowMillis: 9)
        // By sender and conversation: alice's group messages, alice's own, carol's group message.
        #expect(notices.map(\.to) == ["alice", "bob", "alice", "bob", "carol", "bob"])
        let told = try notices.map { try Simp_Message(serializedBytes: $0.bytes) }
        #expect(told[0].toUser == "#crew" && told[0].content == "g1 g2" && told[0].fromUser == "bob" && told[0].type == .read)
        #expect(told[1].toUser == "alice" && told[1].content == "g1 g2" && told[1].fromDevice == "phone",
                "the reader's other devices know the message by its sender and id")
        #expect(told[2].toUser == "alice" && told[2].content == "a")
        #expect(told[4].toUser == "#crew" && told[4].content == "c")
        #expect(notices.allSatisfy { $0.notice && !$0.inHistory })
    }

    @Test func aGroupMarkAndAOneToOneMarkOfOneIdAreTwoMarks() {
        var request = Simp_ReadRequest()
        request.reads = [Self.mark("alice", "a", 4), Self.groupMark("alice", "a", 5, group: "crew", at: 3), Self.groupMark("alice", "a", 5, group: "crew", at: 3)]
        #expect(ReadReceipts.sorted(request, reader: Self.reader).delivered.count == 2)
    }

    @Test func aGroupMarkNamesItsGroupAndPlaceTogether() {
        var request = Simp_ReadRequest()
        request.reads = [Self.groupMark("alice", "a", 1, group: "crew", at: 2)]
        #expect(ReadReceipts.problem(in: request, from: "bob") == nil)
        request.reads = [Self.groupMark("alice", "a", 1, group: "crew", at: 0)]
        #expect(ReadReceipts.problem(in: request, from: "bob") != nil, "a group without its place")
        request.reads = [Self.groupMark("alice", "a", 1, group: "", at: 2)]
        #expect(ReadReceipts.problem(in: request, from: "bob") != nil, "a place without its group")
        request.reads = [Self.groupMark("alice", "a", 1, group: "Bad Name", at: 2)]
        #expect(ReadReceipts.problem(in: request, from: "bob") != nil)
        // Priced per group named: each is checked in its own slot.
        request.reads = [Self.groupMark("alice", "a", 1, group: "crew", at: 2), Self.groupMark("carol", "b", 2, group: "crew", at: 3),
                         Self.groupMark("alice", "c", 3, group: "team", at: 2), Self.mark("alice", "d", 4)]
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, .markRead(request))) == RequestCost.redisRead + 2)
    }

    @Test func badRequests() {
        var request = Simp_ReadRequest()
        request.reads = [Self.mark("bob", "a", 1)]
        #expect(ReadReceipts.problem(in: request, from: "bob") != nil)
        request.reads = [Self.mark("alice", "a", 0)]
        #expect(ReadReceipts.problem(in: request, from: "bob") != nil)
        request.reads = (0...256).map { Self.mark("alice", "\($0)", 1) }
        #expect(ReadReceipts.problem(in: request, from: "bob") == "at most 256 marks in one request")
        request.reads = [Self.mark("alice", "a", 1)]
        #expect(ReadReceipts.problem(in: request, from: "bob") == nil)
    }
}
