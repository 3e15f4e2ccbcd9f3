import SIMPCore
import Testing

@Suite struct HistoryPagingTests {
    func stored(_ count: Int, size: Int) -> [[UInt8]] {
        (0..<count).map { [UInt8](repeating: UInt8($0 % 256), count: size) }
    }

    @Test func aFieldCostsItsTagItsLengthAndItsBody() {
        #expect(HistoryPaging.fieldCost(0) == 2)
        #expect(HistoryPaging.fieldCost(127) == 129)
        #expect(HistoryPaging.fieldCost(128) == 131)
        #expect(HistoryPaging.fieldCost(16_384) == 16_388)
    }

    /// 100 messages of 1,100 bytes in a 20,000-byte budget: each page is the newest run that
    /// fits, and walking the cursor back yields every message once, in order.
    @Test func pagesWalkBackThroughEveryMessageWithinTheBudget() {
        let all = stored(100, size: 1_100)
        let budget = 20_000
        var before = 0
        var pages: [[[UInt8]]] = []
        while true {
            let read = Array(all[max(0, all.count - before - 30) ..< all.count - before])
            let page = HistoryPaging.page(oldestFirst: read, before: before, stored: all.count, budget: budget)
            #expect(page.items.map { HistoryPaging.fieldCost($0.count) }.reduce(0, +) <= budget)
            #expect(page.items.count == min(18, all.count - before), "18 of 1,103 bytes fit 20,000")
            pages.append(page.items)
            #expect(page.nextBefore == UInt64(before + page.items.count))
            before = Int(page.nextBefore)
            guard page.more else { break }
        }
        #expect(pages.count == 6)
        #expect(Array(pages.reversed().joined()) == all)
    }

    @Test func theCursorPastTheEndGivesAnEmptyLastPage() {
        let page = HistoryPaging.page(oldestFirst: [], before: 50, stored: 10, budget: 1_000)
        #expect(page == HistoryPaging.Page(items: [], nextBefore: 50, more: false))
    }

    /// A message no page could hold is passed over, so the cursor still moves.
    @Test func aMessageTooLargeForAnyPageIsSkippedNotRepeated() {
        let read = [[UInt8](repeating: 1, count: 10), [UInt8](repeating: 2, count: 5_000), [UInt8](repeating: 3, count: 10)]
        let page = HistoryPaging.page(oldestFirst: read, before: 0, stored: 3, budget: 100)
        #expect(page.items == [read[0], read[2]])
        #expect(page.nextBefore == 3)
        #expect(!page.more)
    }

    @Test func theDefaultBudgetLeavesTheMarginBelowTheFrameLimit() {
        #expect(HistoryPaging.budget() == Frame.defaultMaxLength - HistoryPaging.frameMargin)
        #expect(HistoryPaging.budget() >= 40 * HistoryPaging.fieldCost(1_300), "a page holds at least 40 of the largest messages")
    }
}
