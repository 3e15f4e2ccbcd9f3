import Histogram
import NIOCore

/// The group fan-out, offered to SIMP and to the broker alike: one sender, `members` receivers
/// that each get everything it sends, W messages in flight (a slot is freed once the server or
/// broker has taken the message for every receiver: SIMP's group accepted, MQTT's PUBACK),
/// texts of a fixed size, a warm-up, a measured window, and at most `drain` seconds of waiting
/// for what is still on its way.
public struct FanOutPattern: Sendable, Codable {
    public var members: Int
    public var window: Int
    public var payloadBytes: Int
    public var duration: Double
    public var warmup: Double
    public var drain: Double

    public init(members: Int, window: Int, payloadBytes: Int = 64, duration: Double = 10, warmup: Double = 1, drain: Double = 10) {
        self.members = members
        self.window = window
        self.payloadBytes = payloadBytes
        self.duration = duration
        self.warmup = warmup
        self.drain = drain
    }
}

/// One fan-out run's figures: the sender's part and the receivers' parts, summed. Rates count
/// events that happened in the measured window; latencies are of the messages sent in it.
public struct FanOutResult: Sendable {
    public var sent = 0
    /// Messages the server or broker took for every receiver, over the whole run.
    public var accepted = 0
    /// Acceptances that arrived in the measured window.
    public var acceptedInWindow = 0
    /// Distinct messages received, summed over the receivers, over the whole run.
    public var deliveries = 0
    /// Distinct messages received in the measured window, summed over the receivers.
    public var deliveriesInWindow = 0
    public var duplicates = 0
    /// Per receiver, messages sent (and not failed) that it had not received by the end of the
    /// drain, summed over the receivers.
    public var lost = 0
    public var failed = 0
    /// At most five.
    public var failures: [String] = []
    public var measuredSeconds = 0.0
    /// Microseconds: send to receipt at a receiver (one sample per receiver and message).
    public var sendToReceive = FanOutResult.histogram()
    /// Microseconds: send to SIMP's group accepted, or to MQTT's PUBACK.
    public var sendToAccepted = FanOutResult.histogram()
    /// Microseconds: send to the last member's confirmation (SIMP only).
    public var sendToAllDelivered = FanOutResult.histogram()

    public init() {}

    public var deliveriesPerSecond: Double { measuredSeconds > 0 ? Double(deliveriesInWindow) / measuredSeconds : 0 }
    public var acceptedPerSecond: Double { measuredSeconds > 0 ? Double(acceptedInWindow) / measuredSeconds : 0 }

    /// 1 µs to 100 s at three significant digits.
    public static func histogram() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: 100_000_000, numberOfSignificantValueDigits: .three)
    }

    public mutating func note(failure: String) {
        failed += 1
        if failures.count < 5 { failures.append(failure) }
    }

    public mutating func merge(_ part: FanOutResult) {
        sent += part.sent
        accepted += part.accepted
        acceptedInWindow += part.acceptedInWindow
        deliveries += part.deliveries
        deliveriesInWindow += part.deliveriesInWindow
        duplicates += part.duplicates
        lost += part.lost
        failed += part.failed
        failures += part.failures.prefix(max(0, 5 - failures.count))
        sendToReceive.add(part.sendToReceive)
        sendToAccepted.add(part.sendToAccepted)
        sendToAllDelivered.add(part.sendToAllDelivered)
    }

    /// Microseconds from `start` to `end` (0 if the clock reads backwards, which a forged
    /// timestamp could make it).
    public static func micros(from start: UInt64, to end: UInt64) -> UInt64 { end > start ? (end - start) / 1000 : 0 }
}

/// One receiver's count of a fan-out: distinct messages, duplicates, latencies. Confined to
/// `loop` (the receiver's connection's): every method must run there, except `start` and
/// `settled`, which hop to it.
public final class FanOutCount: @unchecked Sendable {
    public let loop: any EventLoop
    private var clock: LoadClock?
    private var seen = Set<UInt64>()
    private var part = FanOutResult()
    private var waiting: (expected: Int, promise: EventLoopPromise<FanOutResult>, deadline: Scheduled<Void>)?
    /// The connection failed: nothing more will come.
    private var ended = false

    public init(loop: any EventLoop) {
        self.loop = loop
    }

    /// Counts from now on, against `clock`'s window.
    public func start(_ clock: LoadClock) -> EventLoopFuture<Void> {
        loop.submit { [self] in self.clock = clock }
    }

    /// A message of the run, numbered `counter` and sent at `sentAt` (monotonic nanoseconds).
    public func receive(counter: UInt64, sentAt: UInt64) {
        guard let clock else { return }
        guard seen.insert(counter).inserted else {
            part.duplicates += 1
            return
        }
        let now = LoadClock.now()
        part.deliveries += 1
        if clock.measured(now) { part.deliveriesInWindow += 1 }
        if clock.measured(sentAt) { _ = part.sendToReceive.record(FanOutResult.micros(from: sentAt, to: now)) }
        if let waiting, part.deliveries >= waiting.expected { settle() }
    }

    /// The receiver cannot go on (its connection is gone).
    public func fail(_ reason: String) {
        guard !ended else { return }
        ended = true
        part.note(failure: reason)
        if waiting != nil { settle() }
    }

    /// This receiver's part, once it has `expected` distinct messages, or failed, or the clock
    /// reads `deadline`: what it still lacks then is lost.
    public func settled(expecting expected: Int, until deadline: UInt64) -> EventLoopFuture<FanOutResult> {
        loop.flatSubmit { [self] in
            let promise = loop.makePromise(of: FanOutResult.self)
            let now = LoadClock.now()
            guard !ended, part.deliveries < expected, now < deadline else {
                promise.succeed(final(expected))
                return promise.futureResult
            }
            let timer = loop.scheduleTask(in: .nanoseconds(Int64(clamping: deadline - now))) { [self] in settle() }
            waiting = (expected, promise, timer)
            return promise.futureResult
        }
    }

    private func settle() {
        guard let waiting else { return }
        self.waiting = nil
        waiting.deadline.cancel()
        waiting.promise.succeed(final(waiting.expected))
    }

    /// Later messages no longer count.
    private func final(_ expected: Int) -> FanOutResult {
        clock = nil
        var part = self.part
        part.lost = max(0, expected - part.deliveries)
        return part
    }
}
