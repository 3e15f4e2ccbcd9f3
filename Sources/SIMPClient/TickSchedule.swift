import NIOCore

/// The engine's bookkeeping for its one timer's tasks (`ClientEngine.Action.scheduleTick`),
/// armed without cancelling: NIO's `Scheduled.cancel` finds its task by a linear search through every
/// task scheduled on the loop, so with thousands of clients on one loop (each with its timers)
/// every cancel walked tens of thousands of tasks, more than the rest of a message's work
/// (2026-11-30, docs/PERFORMANCE.md). Instead a task once scheduled is left to fire: one that
/// fires before the deadline wanted schedules the next for it (or leaves it to an earlier task
/// already scheduled), one that fires after its deadline was withdrawn does nothing. The tick
/// is fed exactly when it was before: once, at the first task to fire at or after the deadline
/// last armed. Pure: the engine keeps it, the driver schedules the tasks it is told to and feeds
/// each one's firing (`ClientEngine.Input.tickTaskFired`) with the event's one time.
struct TickSchedule: Sendable, Equatable {
    /// The deadline the engine armed and that has not yet been ticked for; nil when none.
    private(set) var wanted: NIODeadline?
    /// The deadlines of the tasks scheduled and not yet fired (a few: one per closer deadline
    /// armed before the last fired, none further ahead than `horizon`). A deadline armed
    /// again, such as the next keepalive after each message's tick, finds its task there.
    private(set) var scheduled: [NIODeadline] = []

    /// What a task that fired leads to.
    enum Fired: Equatable {
        /// Feed the engine its tick.
        case tick
        /// Schedule a task for this deadline (the wanted one is later than this task's).
        case schedule(NIODeadline)
        /// Nothing: no deadline is wanted, or a task scheduled no later than it will fire.
        case nothing
    }

    /// No task is scheduled further ahead than this: one left behind by a closer deadline (or
    /// by a client that stopped) is gone from the loop within it, and a deadline far ahead
    /// (`distantFuture`: nothing due) is reached in steps.
    static let horizon = TimeAmount.seconds(30)

    /// The engine armed its timer for `deadline` at `now`: the deadline to schedule a task for,
    /// or nil when a task scheduled no later than it will fire anyway.
    mutating func arm(_ deadline: NIODeadline, now: NIODeadline) -> NIODeadline? {
        wanted = deadline
        return schedule(for: deadline, now: now)
    }

    /// The engine wants no tick (it stopped): tasks still scheduled will do nothing.
    mutating func cancel() {
        wanted = nil
    }

    /// A task scheduled for `deadline` fired at `now`.
    mutating func fired(scheduledFor deadline: NIODeadline, now: NIODeadline) -> Fired {
        if let index = scheduled.firstIndex(of: deadline) { scheduled.remove(at: index) }
        guard let wanted else { return .nothing }
        if wanted <= now {
            self.wanted = nil
            return .tick
        }
        return schedule(for: wanted, now: now).map { .schedule($0) } ?? .nothing
    }

    private mutating func schedule(for deadline: NIODeadline, now: NIODeadline) -> NIODeadline? {
        let next = min(deadline, now + Self.horizon)
        if scheduled.contains(where: { $0 <= next }) { return nil }
        scheduled.append(next)
        return next
    }
}
