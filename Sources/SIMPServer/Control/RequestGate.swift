import NIOCore
import SIMPCore

/// Decides whether a control connection's next request may run now, so that no connection
/// can make the node do unbounded work for it (docs/SECURITY.md, "Limits"):
/// - at most `rate` request units a second (bursts of `burst`), each request charged what it
///   makes the node do (`RequestCost`),
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

    /// Takes the right to run one request of `cost` (`RequestCost`) now, if there is one.
    mutating func admit(cost: Int, now: NIODeadline) -> Bool {
        writable && outstanding < maxOutstanding && bucket.take(cost, now: now)
    }

    /// Charges work a request turned out to cost beyond what `admit` took (`TokenBucket.charge`).
    mutating func charge(_ extra: Int, now: NIODeadline) {
        bucket.charge(extra, now: now)
    }

    /// Marks a request as started whose answer comes later; `finished` ends it.
    mutating func started() {
        outstanding += 1
    }

    mutating func finished() {
        outstanding = max(0, outstanding - 1)
    }

    /// How long a held request of `cost` waits for the rate: nil when it waits for something
    /// else (an answer, or the peer reading), which will release it when it happens.
    mutating func rateWait(cost: Int, now: NIODeadline) -> TimeAmount? {
        guard writable, outstanding < maxOutstanding else { return nil }
        return bucket.wait(for: cost, now: now)
    }
}
