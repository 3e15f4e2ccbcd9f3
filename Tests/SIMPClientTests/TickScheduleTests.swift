import NIOCore
import Testing

@testable import SIMPClient

/// The engine's timer without cancels: the tick is fed once, at the first task to fire at or
/// after the deadline last armed, whatever tasks were left behind.
@Suite struct TickScheduleTests {
    let t0 = NIODeadline.uptimeNanoseconds(100_000_000_000)

    @Test func aFirstDeadlineIsScheduledAndTicksWhenItFires() {
        var schedule = TickSchedule()
        #expect(schedule.arm(t0 + .milliseconds(10), now: t0) == t0 + .milliseconds(10))
        #expect(schedule.fired(scheduledFor: t0 + .milliseconds(10), now: t0 + .milliseconds(10)) == .tick)
        // Nothing is wanted any more: a second task of the same deadline does nothing.
        #expect(schedule.fired(scheduledFor: t0 + .milliseconds(10), now: t0 + .milliseconds(11)) == .nothing)
    }

    @Test func aCloserDeadlineGetsATaskOfItsOwnAndTheOldOneFiresForNothing() {
        var schedule = TickSchedule()
        _ = schedule.arm(t0 + .seconds(15), now: t0)
        #expect(schedule.arm(t0 + .milliseconds(10), now: t0) == t0 + .milliseconds(10))
        #expect(schedule.fired(scheduledFor: t0 + .milliseconds(10), now: t0 + .milliseconds(10)) == .tick)
        #expect(schedule.fired(scheduledFor: t0 + .seconds(15), now: t0 + .seconds(15)) == .nothing)
    }

    @Test func aLaterDeadlineWaitsForTheTaskAlreadyScheduledThenGoesOn() {
        var schedule = TickSchedule()
        _ = schedule.arm(t0 + .milliseconds(10), now: t0)
        // The tick came and went; the engine armed a later one while the first task still waits
        // (a stale task of an earlier arming, say): no task for it yet.
        #expect(schedule.fired(scheduledFor: t0 + .milliseconds(10), now: t0 + .milliseconds(10)) == .tick)
        #expect(schedule.arm(t0 + .seconds(1), now: t0 + .milliseconds(10)) == t0 + .seconds(1))
        _ = schedule.arm(t0 + .milliseconds(500), now: t0 + .milliseconds(20))
        // Armed later than the tasks scheduled: they fire first, the last of them schedules
        // the wanted one.
        #expect(schedule.arm(t0 + .seconds(2), now: t0 + .milliseconds(30)) == nil)
        #expect(schedule.fired(scheduledFor: t0 + .milliseconds(500), now: t0 + .milliseconds(500)) == .nothing)
        #expect(schedule.fired(scheduledFor: t0 + .seconds(1), now: t0 + .seconds(1)) == .schedule(t0 + .seconds(2)))
        #expect(schedule.fired(scheduledFor: t0 + .seconds(2), now: t0 + .seconds(2)) == .tick)
        #expect(schedule.scheduled.isEmpty)
    }

    /// Each message brings the tick closer, and after it the engine arms the next keepalive
    /// again: that deadline's task is still scheduled, and no second one is added.
    @Test func aDeadlineArmedAgainUsesItsTask() {
        var schedule = TickSchedule()
        _ = schedule.arm(t0 + .seconds(15), now: t0)
        for second in 1...10 {
            let now = t0 + .seconds(Int64(second))
            #expect(schedule.arm(now + .milliseconds(10), now: now) == now + .milliseconds(10))
            #expect(schedule.fired(scheduledFor: now + .milliseconds(10), now: now + .milliseconds(10)) == .tick)
            #expect(schedule.arm(t0 + .seconds(15), now: now + .milliseconds(10)) == nil)
        }
        #expect(schedule.scheduled == [t0 + .seconds(15)])
        #expect(schedule.fired(scheduledFor: t0 + .seconds(15), now: t0 + .seconds(15)) == .tick)
    }

    @Test func aLateTaskTicksOnce() {
        var schedule = TickSchedule()
        _ = schedule.arm(t0 + .milliseconds(10), now: t0)
        #expect(schedule.fired(scheduledFor: t0 + .milliseconds(10), now: t0 + .milliseconds(90)) == .tick)
        #expect(schedule.fired(scheduledFor: t0 + .milliseconds(10), now: t0 + .milliseconds(91)) == .nothing)
    }

    @Test func aCancelledTickNeverComes() {
        var schedule = TickSchedule()
        _ = schedule.arm(t0 + .milliseconds(10), now: t0)
        schedule.cancel()
        #expect(schedule.fired(scheduledFor: t0 + .milliseconds(10), now: t0 + .milliseconds(10)) == .nothing)
        // Armed again after: scheduled anew, as the old task is gone.
        #expect(schedule.arm(t0 + .seconds(1), now: t0 + .milliseconds(20)) == t0 + .seconds(1))
    }

    /// Nothing due (`distantFuture`) or due far ahead: no task sits further ahead than the
    /// horizon, so one left behind leaves the loop within it.
    @Test func aFarDeadlineIsReachedInStepsOfTheHorizon() {
        var schedule = TickSchedule()
        let horizon = TickSchedule.horizon
        #expect(schedule.arm(.distantFuture, now: t0) == t0 + horizon)
        #expect(schedule.fired(scheduledFor: t0 + horizon, now: t0 + horizon) == .schedule(t0 + horizon + horizon))
        _ = schedule.arm(t0 + horizon + .seconds(40), now: t0 + horizon + .seconds(1))
        #expect(schedule.fired(scheduledFor: t0 + horizon + horizon, now: t0 + horizon + horizon)
            == .schedule(t0 + horizon + .seconds(40)))
        #expect(schedule.fired(scheduledFor: t0 + horizon + .seconds(40), now: t0 + horizon + .seconds(40)) == .tick)
    }
}
