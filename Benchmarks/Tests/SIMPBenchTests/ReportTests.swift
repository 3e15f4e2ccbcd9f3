import Histogram
import MQTTLoad
@testable import SIMPBench
import Testing

@Suite struct LoadTextTests {
    @Test func aTextCarriesItsCounterAndSendTimeAtTheRequestedSize() throws {
        let text = SIMPLoad.text(42, 1_234_567_890, size: 64)
        #expect(text.utf8.count == 64)
        let parsed = try #require(SIMPLoad.parse(text))
        #expect(parsed.counter == 42 && parsed.sentAt == 1_234_567_890)
    }

    @Test func aForeignTextIsNotCounted() {
        #expect(SIMPLoad.parse("hello bob") == nil)
        #expect(SIMPLoad.parse("") == nil)
    }

    @Test func theMeasuredWindowExcludesWarmUpAndDrain() {
        let clock = LoadClock(LoadPattern(pairs: 1, window: 1, duration: 2, warmup: 1, drain: 3), start: 0)
        #expect(!clock.measured(999_999_999))
        #expect(clock.measured(1_000_000_000))
        #expect(clock.measured(2_999_999_999))
        #expect(!clock.measured(3_000_000_000))
        #expect(clock.drainUntil == 6_000_000_000)
    }
}

@Suite struct ReportTests {
    @Test func throughputCountsMessagesSentInTheWindowAndReceived() {
        var result = LoadResult()
        for micros in [100, 200, 300, 400] { _ = result.sendToReceive.record(UInt64(micros)) }
        result.measuredSeconds = 2
        #expect(result.messagesPerSecond == 2)
    }

    @Test func twoSystemsGetARatioColumn() {
        var fast = LoadResult()
        var slow = LoadResult()
        for _ in 0..<300 { _ = fast.sendToReceive.record(100) }
        for _ in 0..<100 { _ = slow.sendToReceive.record(400) }
        fast.measuredSeconds = 1
        slow.measuredSeconds = 1
        let report = BenchReport(pattern: LoadPattern(pairs: 1, window: 1),
                                 systems: [SystemReport(system: "A", fast), SystemReport(system: "B", slow)])
        #expect(report.table().contains("A/B"))
        #expect(line("delivered msg/s", of: report)?.hasSuffix("3.00x") == true)
        #expect(report.json().contains("\"messagesPerSecond\":300"))
    }
}

/// The table row that starts with `name`.
func line(_ name: String, of report: BenchReport) -> Substring? {
    report.table().split(separator: "\n").first { $0.hasPrefix(name) }
}
