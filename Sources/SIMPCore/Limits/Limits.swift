import NIOCore

/// Admits `rate` events per second on average and bursts of up to `burst`. Time is passed
/// in, so the bucket is pure and tests drive it with a fake clock.
public struct TokenBucket: Sendable {
    public let rate: Int
    public let burst: Int
    /// Tokens in billionths, so refills of a few nanoseconds add up exactly (no float drift).
    private var credit: Int64
    private var last: NIODeadline
    private static let scale: Int64 = 1_000_000_000

    public init(rate: Int, burst: Int, now: NIODeadline) {
        precondition(rate > 0 && burst > 0, "a token bucket needs a positive rate and burst")
        self.rate = rate
        self.burst = burst
        self.credit = Int64(burst) * Self.scale
        self.last = now
    }

    /// Takes one token if there is one.
    public mutating func take(now: NIODeadline) -> Bool {
        refill(now: now)
        guard credit >= Self.scale else { return false }
        credit -= Self.scale
        return true
    }

    private mutating func refill(now: NIODeadline) {
        guard now > last else { return }
        let full = Int64(burst) * Self.scale
        // Capped at the time a refill from empty takes, so the product cannot overflow.
        let elapsed = min((now - last).nanoseconds, full / Int64(rate) + 1)
        credit = min(full, credit + elapsed * Int64(rate))
        last = now
    }
}

/// Before a UDP address is validated the server sends it at most three times the bytes it
/// received from it (the anti-amplification rule of QUIC, RFC 9000 section 8.1), so a
/// forged source address cannot turn the server into a traffic multiplier.
public struct AmplificationBudget: Sendable, Equatable {
    public static let factor = 3
    public private(set) var received = 0
    public private(set) var sent = 0

    public init() {}

    public mutating func receive(_ bytes: Int) {
        received += bytes
    }

    /// Records and allows the send only if it stays within the budget.
    public mutating func spend(_ bytes: Int) -> Bool {
        guard sent + bytes <= received * Self.factor else { return false }
        sent += bytes
        return true
    }
}

/// Repeated failed logins for one user slow down: after `freeAttempts` failures in a row each
/// further attempt must wait 1 s, 2 s, 4 s ... up to `maxLockout`. A success resets the count.
public enum LoginThrottle {
    /// Failures allowed for one user from one source address before it must wait.
    public static let freeAttempts = 5
    /// Failures allowed for one user from all sources together: high enough that one
    /// attacker cannot lock a victim out, low enough to stop guessing from many addresses.
    public static let freeAttemptsPerUser = 50
    public static let maxLockout: TimeAmount = .seconds(300)

    /// How long to wait after `failures` consecutive failed logins, `free` of them allowed.
    public static func lockout(afterFailures failures: Int, free: Int = freeAttempts) -> TimeAmount {
        guard failures >= free else { return .zero }
        let doublings = min(failures - free, 16)
        return min(.seconds(Int64(1) << doublings), maxLockout)
    }
}

/// Concurrent holders per key (connections per source IP, sessions per user), refusing the
/// one that would go over `limit`.
public struct SlotCounter<Key: Hashable & Sendable>: Sendable {
    public let limit: Int
    private var counts: [Key: Int] = [:]

    public init(limit: Int) {
        self.limit = limit
    }

    public mutating func acquire(_ key: Key) -> Bool {
        let held = counts[key, default: 0]
        guard held < limit else { return false }
        counts[key] = held + 1
        return true
    }

    public mutating func release(_ key: Key) {
        guard let held = counts[key] else { return }
        counts[key] = held > 1 ? held - 1 : nil
    }

    public func count(_ key: Key) -> Int {
        counts[key, default: 0]
    }

    /// Keys with at least one holder; released keys leave no trace.
    public var keyCount: Int { counts.count }
}
