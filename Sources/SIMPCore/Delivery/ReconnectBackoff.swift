import NIOCore

/// Jittered exponential backoff for reconnects: attempt n waits base * 2^n capped at `cap`,
/// scaled by a random factor in [0.5, 1.0] so that clients cut off together do not return together.
public struct ReconnectBackoff: Sendable, Equatable {
    public var base: TimeAmount
    public var cap: TimeAmount
    public private(set) var attempt = 0

    public init(base: TimeAmount = .seconds(2), cap: TimeAmount = .seconds(64)) {
        self.base = base
        self.cap = cap
    }

    /// The delay before the next attempt; `jitter` is a number in [0, 1].
    public mutating func nextDelay(jitter: Double) -> TimeAmount {
        let ceiling = min(base.nanoseconds << min(attempt, 30), cap.nanoseconds)
        attempt += 1
        let factor = 0.5 + 0.5 * min(max(jitter, 0), 1)
        return .nanoseconds(Int64(Double(ceiling) * factor))
    }

    /// After a successful connection the next loss starts from `base` again.
    public mutating func reset() { attempt = 0 }
}
