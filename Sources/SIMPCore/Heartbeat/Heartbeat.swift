import NIOCore

/// When a control connection pings its peer and when it gives the peer up: a ping after
/// `interval` without writing, and the end after `silenceLimit` without reading. Pure: the
/// caller supplies the times.
public struct Heartbeat: Sendable, Equatable {
    public var interval: TimeAmount
    public var silenceLimit: TimeAmount

    public enum Action: Sendable, Equatable {
        /// Nothing to do before `until`.
        case wait(until: NIODeadline)
        /// Write a ping now; look again at `next`.
        case ping(next: NIODeadline)
        /// The peer has been silent too long: close the connection.
        case close
    }

    public init(interval: TimeAmount, silenceLimit: TimeAmount) {
        precondition(interval.nanoseconds > 0 && silenceLimit.nanoseconds > 0, "heartbeat times must be positive")
        self.interval = interval
        self.silenceLimit = silenceLimit
    }

    /// SIMP's rule for control connections: a ping after `interval`, the end after one and a
    /// half intervals of silence (MQTT's rule: 90 s at the default 60), and never less than
    /// a second more than the interval, so a short test interval survives a stalled loop. A
    /// live peer is heard from at least once an interval, since it pings when it has not written.
    public init(interval: TimeAmount) {
        let limit = max(interval.nanoseconds * 3 / 2, interval.nanoseconds + 1_000_000_000)
        self.init(interval: interval, silenceLimit: .nanoseconds(limit))
    }

    public func check(lastRead: NIODeadline, lastWrite: NIODeadline, now: NIODeadline) -> Action {
        let silentUntil = lastRead + silenceLimit
        if now >= silentUntil { return .close }
        if now >= lastWrite + interval { return .ping(next: min(silentUntil, now + interval)) }
        return .wait(until: min(silentUntil, lastWrite + interval))
    }

    /// How finely a wheel should tick for this heartbeat: a sixteenth of the interval, between
    /// 10 ms and a second, so a ping is late by at most that much.
    public var resolution: TimeAmount {
        .nanoseconds(min(max(interval.nanoseconds / 16, 10_000_000), 1_000_000_000))
    }
}
