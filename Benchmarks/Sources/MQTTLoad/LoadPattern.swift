import Dispatch

/// What one run offers, to SIMP and to the broker alike: N sender/receiver pairs, W messages
/// in flight per pair, texts of a fixed size, a warm-up, a measured window, and at most
/// `drain` seconds of waiting for what is still in flight.
public struct LoadPattern: Sendable, Codable {
    public var pairs: Int
    public var window: Int
    public var payloadBytes: Int
    public var duration: Double
    public var warmup: Double
    public var drain: Double

    public init(pairs: Int, window: Int, payloadBytes: Int = 64, duration: Double = 10, warmup: Double = 1, drain: Double = 10) {
        self.pairs = pairs
        self.window = window
        self.payloadBytes = payloadBytes
        self.duration = duration
        self.warmup = warmup
        self.drain = drain
    }
}

/// The run's clock marks, in monotonic nanoseconds.
public struct LoadClock: Sendable {
    public let measureFrom: UInt64
    public let measureUntil: UInt64
    public let drainUntil: UInt64

    public init(_ pattern: LoadPattern, start: UInt64 = now()) {
        self.init(warmup: pattern.warmup, duration: pattern.duration, drain: pattern.drain, start: start)
    }

    public init(_ pattern: FanOutPattern, start: UInt64 = now()) {
        self.init(warmup: pattern.warmup, duration: pattern.duration, drain: pattern.drain, start: start)
    }

    public init(warmup: Double, duration: Double, drain: Double, start: UInt64 = now()) {
        measureFrom = start + UInt64(warmup * 1e9)
        measureUntil = measureFrom + UInt64(duration * 1e9)
        drainUntil = measureUntil + UInt64(drain * 1e9)
    }

    /// Whether a message sent (or an event seen) at this time falls in the measured window.
    public func measured(_ sentAt: UInt64) -> Bool { sentAt >= measureFrom && sentAt < measureUntil }
    public static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
}

