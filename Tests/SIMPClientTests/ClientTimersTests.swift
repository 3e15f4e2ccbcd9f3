import NIOCore
import Testing

@testable import SIMPClient

@Suite struct ClientTimersTests {
    let t0 = NIODeadline.uptimeNanoseconds(100_000_000_000)

    func timers() -> ClientTimers {
        ClientTimers(keepaliveInterval: .seconds(15), bindRetry: .milliseconds(250))
    }

    /// Timers that sent everything just now, at `t0`.
    func freshTimers() -> ClientTimers {
        var timers = timers()
        timers.keepaliveSent(at: t0)
        timers.bindSent(at: t0)
        timers.deliveryQuerySent(at: t0)
        timers.gapReported(first: 1, at: t0)
        return timers
    }

    // MARK: next tick

    @Test(arguments: [
        ClientTimers.Waits(path: .bound, acceptance: true),
        ClientTimers.Waits(path: .bound, gap: true),
        ClientTimers.Waits(path: .binding),
        ClientTimers.Waits(path: .closed, acceptance: true),
    ])
    func whileSomethingWaitsOnATimerTheTickIsFast(waits: ClientTimers.Waits) {
        #expect(freshTimers().nextTick(waits, now: t0 + .seconds(1)) == t0 + .seconds(1) + .milliseconds(10))
    }

    @Test func atRestBoundTheNextTickIsTheKeepalive() {
        let next = freshTimers().nextTick(.init(path: .bound), now: t0 + .seconds(1))
        #expect(next == t0 + .seconds(15))
    }

    @Test func atRestADeliveryQueryCanComeFirst() {
        let next = freshTimers().nextTick(.init(path: .bound, delivery: true), now: t0 + .seconds(1))
        #expect(next == t0 + .seconds(5))
    }

    @Test func withNoSessionTheClientLooksOnceASecond() {
        let next = freshTimers().nextTick(.init(path: .closed), now: t0 + .seconds(10))
        #expect(next == t0 + .seconds(10) + .seconds(1))
    }

    @Test func anOverdueKeepaliveStillWaitsOneFastTick() {
        let now = t0 + .seconds(20)
        #expect(freshTimers().nextTick(.init(path: .bound), now: now) == now + .milliseconds(10))
    }

    // MARK: what is due

    @Test func nothingIsDueJustAfterEverythingWasSent() {
        let due = freshTimers().due(.init(path: .bound, delivery: true, gap: true), now: t0 + .milliseconds(200))
        #expect(due == .init())
    }

    @Test func resendsAreCheckedWhileAMessageAwaitsAcceptance() {
        #expect(freshTimers().due(.init(path: .closed, acceptance: true), now: t0).resend)
        #expect(!freshTimers().due(.init(path: .bound), now: t0).resend)
    }

    @Test func theBindIsSentAgainUntilConfirmed() {
        let timers = freshTimers()
        #expect(!timers.due(.init(path: .binding), now: t0 + .milliseconds(249)).bind)
        #expect(timers.due(.init(path: .binding), now: t0 + .milliseconds(250)).bind)
        #expect(!timers.due(.init(path: .bound), now: t0 + .seconds(1)).bind)
    }

    @Test func keepaliveIsDueOnlyOnABoundPath() {
        let timers = freshTimers()
        let late = t0 + .seconds(15)
        #expect(!timers.due(.init(path: .bound), now: late - .milliseconds(1)).keepalive)
        #expect(timers.due(.init(path: .bound), now: late) == .init(keepalive: true))
        #expect(!timers.due(.init(path: .binding), now: late).keepalive)
        #expect(!timers.due(.init(path: .closed), now: late).keepalive)
    }

    @Test func theDeliveryQueryIsRepeatedEveryFiveSecondsWhileBound() {
        var timers = freshTimers()
        let waits = ClientTimers.Waits(path: .bound, delivery: true)
        #expect(!timers.due(waits, now: t0 + .milliseconds(4999)).deliveryQuery)
        #expect(timers.due(waits, now: t0 + .seconds(5)).deliveryQuery)
        #expect(!timers.due(.init(path: .bound), now: t0 + .seconds(5)).deliveryQuery)
        #expect(!timers.due(.init(path: .binding, delivery: true), now: t0 + .seconds(5)).deliveryQuery)
        timers.deliveryQuerySent(at: t0 + .seconds(5))
        #expect(!timers.due(waits, now: t0 + .seconds(6)).deliveryQuery)
    }

    @Test func anOpenGapIsReportedAgainEverySecond() {
        let timers = freshTimers()
        let waits = ClientTimers.Waits(path: .bound, gap: true)
        #expect(!timers.due(waits, now: t0 + .milliseconds(999)).gapReport)
        #expect(timers.due(waits, now: t0 + .seconds(1)).gapReport)
        #expect(!timers.due(.init(path: .binding, gap: true), now: t0 + .seconds(1)).gapReport)
    }

    @Test func aGapIsReportedOnceThenAt200MillisecondIntervals() {
        let timers = freshTimers()
        #expect(!timers.mayReportGap(first: 1, now: t0 + .milliseconds(199)))
        #expect(timers.mayReportGap(first: 1, now: t0 + .milliseconds(200)))
        #expect(timers.mayReportGap(first: 2, now: t0 + .milliseconds(1)))
    }

    // MARK: arming

    /// Whether each deadline in turn made the task be scheduled again.
    func arming(_ timers: inout ClientTimers, _ deadlines: [NIODeadline]) -> [Bool] {
        deadlines.map { timers.arm($0) }
    }

    @Test func armingOnlyBringsTheTickCloser() {
        var timers = timers()
        #expect(arming(&timers, [t0]) == [false], "not started")
        timers.start()
        let rearmed = arming(&timers, [t0 + .seconds(15), t0 + .seconds(20), t0 + .seconds(15), t0 + .milliseconds(10)])
        #expect(rearmed == [true, false, false, true])
        #expect(timers.armed == t0 + .milliseconds(10))
        timers.fired()
        #expect(arming(&timers, [t0 + .seconds(15)]) == [true])
    }

    @Test func aStoppedClientArmsNothing() {
        var timers = timers()
        timers.start()
        #expect(arming(&timers, [t0]) == [true])
        timers.stop()
        #expect(timers.armed == nil)
        #expect(arming(&timers, [t0 - .seconds(1)]) == [false])
    }
}
