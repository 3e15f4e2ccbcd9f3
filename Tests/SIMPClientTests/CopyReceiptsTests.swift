import Testing
@testable import SIMPClient

@Suite struct CopyReceiptsTests {
    @Test func aReceiptAfterItsCopyIsReportedOnce() {
        var receipts = CopyReceipts()
        #expect(receipts.shown(id: "m1", to: "alice") == nil)
        #expect(receipts.delivered(id: "m1", to: "alice", seq: 4) == .init(to: "alice", seq: 4))
        #expect(receipts.delivered(id: "m1", to: "alice", seq: 4) == nil, "reported once")
    }

    @Test func aReceiptBeforeItsCopyWaitsForIt() {
        var receipts = CopyReceipts()
        #expect(receipts.delivered(id: "m2", to: "bob", seq: 9) == nil)
        #expect(receipts.shown(id: "m2", to: "bob") == .init(to: "bob", seq: 9))
        #expect(receipts.delivered(id: "m2", to: "bob", seq: 9) == nil)
    }

    @Test func onlyTheLatestAreKept() {
        var receipts = CopyReceipts(capacity: 2)
        for n in 1...5 { _ = receipts.delivered(id: "e\(n)", to: "bob", seq: UInt64(n)) }
        #expect(receipts.shown(id: "e1", to: "bob") == nil, "the oldest receipt was dropped")
        #expect(receipts.shown(id: "e5", to: "bob") == .init(to: "bob", seq: 5))
    }
}
