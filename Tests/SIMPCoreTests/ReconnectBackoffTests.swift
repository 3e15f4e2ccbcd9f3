import NIOCore
import SIMPCore
import Testing

@Suite struct ReconnectBackoffTests {
    @Test func delaysDoubleFromTwoSecondsToTheCap() {
        var b = ReconnectBackoff(base: .seconds(2), cap: .seconds(64))
        let delays = (0..<8).map { _ in b.nextDelay(jitter: 1).nanoseconds / 1_000_000_000 }
        #expect(delays == [2, 4, 8, 16, 32, 64, 64, 64])
    }

    @Test func jitterScalesBetweenHalfAndFull() {
        var low = ReconnectBackoff(base: .seconds(2), cap: .seconds(64))
        var high = low
        #expect(low.nextDelay(jitter: 0) == .seconds(1))
        #expect(high.nextDelay(jitter: 1) == .seconds(2))
    }

    @Test func resetStartsOver() {
        var b = ReconnectBackoff(base: .seconds(2), cap: .seconds(64))
        _ = b.nextDelay(jitter: 1)
        _ = b.nextDelay(jitter: 1)
        b.reset()
        #expect(b.nextDelay(jitter: 1) == .seconds(2))
    }
}
