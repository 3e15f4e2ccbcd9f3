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
