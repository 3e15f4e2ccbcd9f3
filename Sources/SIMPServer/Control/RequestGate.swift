import NIOCore
import SIMPCore

/// Decides whether a control connection's next request may run now, so that no connection
/// can make the node do unbounded work for it (docs/SECURITY.md, "Limits"):
/// - at most `rate` requests a second (bursts of `burst`),
/// - at most `maxOutstanding` requests whose answers are still being worked out (Redis,
///   scrypt), so one connection holds a bounded share of the Redis connection it shares
///   with everyone on its loop,
/// - none while the peer leaves the replies already written unread.
/// A request that may not run is held, and the connection's framing stops decoding (and the
/// socket stops being read) until it may: the backlog stays in the peer's socket, not here.
/// Pure: time is passed in.
struct RequestGate {
    struct Settings: Sendable {
        var rate = 2_000
        var burst = 4_000
        var maxOutstanding = 2
    }

    private let maxOutstanding: Int
    /// Holds the rate and burst too: a gate is kept for every connection, so they are not copied.
    private var bucket: TokenBucket
    private(set) var outstanding = 0
    /// False while the peer does not read what was written to it.
    var writable = true

    init(_ settings: Settings, now: NIODeadline) {
        self.maxOutstanding = settings.maxOutstanding
        self.bucket = TokenBucket(rate: settings.rate, burst: settings.burst, now: now)
    }

    /// Takes the right to run one request now, if there is one.
    mutating func admit(now: NIODeadline) -> Bool {
        writable && outstanding < maxOutstanding && bucket.take(now: now)
    }

    /// Marks a request as started whose answer comes later; `finished` ends it.
    mutating func started() {
        outstanding += 1
    }

    mutating func finished() {
        outstanding = max(0, outstanding - 1)
    }

    /// How long a held request waits for the rate: nil when it waits for something else (an
    /// answer, or the peer reading), which will release it when it happens.
    var rateWait: TimeAmount? {
        guard writable, outstanding < maxOutstanding else { return nil }
        return .nanoseconds(max(1, 1_000_000_000 / Int64(bucket.rate)))
    }
}
