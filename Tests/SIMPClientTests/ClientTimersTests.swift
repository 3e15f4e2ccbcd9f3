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
        ClientTimers.Waits(path: .bound, gap: true),
        ClientTimers.Waits(path: .bound, queued: true),
        ClientTimers.Waits(path: .binding),
    ])
    func whileSomethingWaitsOnAShortTimerTheTickIsFast(waits: ClientTimers.Waits) {
        #expect(freshTimers().nextTick(waits, now: t0 + .seconds(1), resendsFrom: .distantFuture) == t0 + .seconds(1) + .milliseconds(10))
    }

    /// A message waiting for acceptance is looked at when its resend can fall due, not every
    /// 10 ms: the 5,000 clients of a starved bench spent their process rescheduling ticks.
    @Test(arguments: [ClientTimers.Path.bound, .closed])
    func whileAMessageWaitsForAcceptanceTheTickIsItsResend(path: ClientTimers.Path) {
        let waits = ClientTimers.Waits(path: path, acceptance: true)
        let now = t0 + .seconds(1)
        #expect(freshTimers().nextTick(waits, now: now, resendsFrom: now + .milliseconds(400)) == now + .milliseconds(400))
        // Never sooner than a fast tick, nor later than what is due at rest.
        #expect(freshTimers().nextTick(waits, now: now, resendsFrom: .distantPast) == now + .milliseconds(10))
        #expect(freshTimers().nextTick(waits, now: now, resendsFrom: .distantFuture) == freshTimers().nextTick(.init(path: path), now: now, resendsFrom: .distantFuture))
    }

    @Test func aTickLaterThanItsDeadlineByMoreThanTheAllowanceIsAStall() {
        var timers = freshTimers()
        timers.start()
        let armed = timers.arm(t0 + .seconds(1))
        #expect(armed)
        #expect(timers.stall(firedAt: t0 + .seconds(1) + .milliseconds(30)) == .zero)
        #expect(timers.stall(firedAt: t0 + .seconds(1) + .milliseconds(530)) == .milliseconds(500))
        timers.fired()
        #expect(timers.stall(firedAt: t0 + .seconds(5)) == .zero, "no tick armed, no stall")
    }

    @Test func atRestBoundTheNextTickIsTheKeepalive() {
        let next = freshTimers().nextTick(.init(path: .bound), now: t0 + .seconds(1), resendsFrom: .distantFuture)
        #expect(next == t0 + .seconds(15))
    }

    @Test func atRestADeliveryQueryCanComeFirst() {
        let next = freshTimers().nextTick(.init(path: .bound, delivery: true), now: t0 + .seconds(1), resendsFrom: .distantFuture)
        #expect(next == t0 + .seconds(5))
    }

    @Test func withNoSessionTheClientLooksOnceASecond() {
        let next = freshTimers().nextTick(.init(path: .closed), now: t0 + .seconds(10), resendsFrom: .distantFuture)
        #expect(next == t0 + .seconds(10) + .seconds(1))
    }

    @Test func anOverdueKeepaliveStillWaitsOneFastTick() {
        let now = t0 + .seconds(20)
        #expect(freshTimers().nextTick(.init(path: .bound), now: now, resendsFrom: .distantFuture) == now + .milliseconds(10))
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

    /// Messages that could not be kept are asked for again after a second, bound, with no fast
    /// tick between (a disk that stays full must not wake the client 100 times a second), then
    /// ever less often while they fail again, up to 30 s; once a write succeeds, after a second.
    @Test func unsavedMessagesAreAskedForAfterASecondThenLessOftenWithoutAFastTick() {
        var timers = freshTimers()
        let waits = ClientTimers.Waits(path: .bound, unsaved: true)
        #expect(!timers.due(waits, now: t0 + .milliseconds(999)).gapReport)
        #expect(timers.due(waits, now: t0 + .seconds(1)).gapReport)
        #expect(!timers.due(.init(path: .binding, unsaved: true), now: t0 + .seconds(1)).gapReport)
        #expect(timers.nextTick(waits, now: t0 + .milliseconds(100), resendsFrom: .distantFuture) == t0 + .seconds(1))
        #expect(timers.nextTick(waits, now: t0 + .seconds(2), resendsFrom: .distantFuture) == t0 + .seconds(2) + .milliseconds(10),
                "overdue: at the next fast tick")
        for _ in 0..<2 { timers.unsavedAskedFor() }
        #expect(timers.unsavedRetry == .seconds(4))
        #expect(!timers.due(waits, now: t0 + .milliseconds(3999)).gapReport)
        #expect(timers.due(waits, now: t0 + .seconds(4)).gapReport)
        #expect(timers.due(.init(path: .bound, gap: true), now: t0 + .seconds(1)).gapReport, "a gap behind a held message is not slowed")
        for _ in 0..<10 { timers.unsavedAskedFor() }
        #expect(timers.unsavedRetry == .seconds(30))
        timers.unsavedKept()
        #expect(timers.unsavedRetry == .seconds(1))
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
