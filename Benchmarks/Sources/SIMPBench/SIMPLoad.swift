import Foundation
import Histogram
import MQTTLoad
import NIOCore
import NIOPosix
@_spi(NIO) import SIMPClient

/// Latencies in microseconds of the messages sent in the measured window; counts of the whole run.
public struct LoadResult: Sendable {
    public var sent = 0
    public var received = 0
    public var duplicates = 0
    public var lost = 0
    public var failed = 0
    public var failures: [String] = []
    public var measuredSeconds = 0.0
    public var sendToReceive = LoadResult.histogram()
    public var sendToAccepted = LoadResult.histogram()
    public var sendToDelivered = LoadResult.histogram()
    public var usage: [String: ProcessUsage] = [:]

    /// Messages sent in the measured window and received, per second of the window.
    public var receivedInWindow: Int { Int(sendToReceive.totalCount) }
    public var messagesPerSecond: Double { measuredSeconds > 0 ? Double(receivedInWindow) / measuredSeconds : 0 }

    public init() {}

    /// 1 µs to 100 s at three significant digits.
    static func histogram() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: 100_000_000, numberOfSignificantValueDigits: .three)
    }

    mutating func merge(_ other: LoadResult) {
        sent += other.sent
        received += other.received
        duplicates += other.duplicates
        lost += other.lost
        failed += other.failed
        failures += other.failures.prefix(max(0, 5 - failures.count))
        sendToReceive.add(other.sendToReceive)
        sendToAccepted.add(other.sendToAccepted)
        sendToDelivered.add(other.sendToDelivered)
    }
}

/// Runs the pattern through SIMPClient against a SIMP server. Every client shares `group`.
public enum SIMPLoad {
    public static let password = "simp-bench-password"

    /// `processes` are sampled for CPU and memory over the measured window ("bench" is this process).
    public static func run(_ pattern: LoadPattern, placement: Placement, group: any EventLoopGroup,
                           processes: ProcessGroups,
                           progress: @Sendable (String) -> Void = { _ in }) async throws -> LoadResult {
        progress("connecting \(pattern.pairs * 2) clients to \(placement.nodes.map(\.description).joined(separator: ", "))")
        var pairs: [(sender: Sender, receiver: Receiver)] = []
        for i in 0..<pattern.pairs {
            let sender = Sender(to: "bench-r\(i)", counter: UInt64(i) << 40, pattern: pattern)
            let receiver = Receiver()
            sender.client = try await connectedClient("bench-s\(i)", placement.sender(pair: i), group, eventHandler: sender.handle)
            receiver.client = try await connectedClient("bench-r\(i)", placement.receiver(pair: i), group,
                                                         eventHandler: receiver.handle)
            pairs.append((sender, receiver))
        }
        progress("running: \(pattern.warmup) s warm-up, \(pattern.duration) s measured")
        let clock = LoadClock(pattern)
        let window = UsageWindow.measure(processes, after: pattern.warmup, seconds: pattern.duration)
        var result = LoadResult()
        let running = pairs.map { pair in (pair.receiver.start(clock).flatMap { pair.sender.start(clock) }, pair.receiver) }
        for (sending, receiver) in running {
            let sent = try await sending.get()
            result.merge(sent)
            result.merge(try await receiver.result(sent).get())
        }
        progress("done: \(result.sent) sent, \(result.received) received")
        result.measuredSeconds = pattern.duration
        result.usage = await window.value.usage(messages: result.receivedInWindow)
        for (sender, receiver) in pairs {
            await sender.client.close()
            await receiver.client.close()
        }
        return result
    }

    /// Registers the user if it is new (a rerun against the same Redis finds it), then connects.
    static func connectedClient(_ user: String, _ configuration: ClientConfiguration, _ group: any EventLoopGroup,
                                eventHandler: (@Sendable (ClientEvent) -> Void)? = nil) async throws -> SIMPClient {
        let client = SIMPClient(configuration: configuration, eventLoopGroup: group, eventHandler: eventHandler)
        do {
            try await client.register(user: user, password: password)
        } catch where error.code == .userExists {
            // Registered by an earlier run; the password is the bench's own.
        }
        try await client.connect(user: user, password: password)
        return client
    }

    /// One sender: keeps `window` messages in flight until the measured window ends, then waits
    /// for the rest; the drain deadline ends the wait for whatever never settles. It lives on
    /// its client's event loop and gets the client's events there, so neither an event nor a
    /// send crosses a thread (with an AsyncStream consumer each event costs two thread hops,
    /// more than the message itself).
    final class Sender: @unchecked Sendable {
        var client: SIMPClient!
        let to: String
        var counter: UInt64
        let pattern: LoadPattern
        var clock: LoadClock?
        var result = LoadResult()
        var sentAt: [String: UInt64] = [:]
        var done: EventLoopPromise<LoadResult>?

        init(to: String, counter: UInt64, pattern: LoadPattern) {
            self.to = to
            self.counter = counter
            self.pattern = pattern
        }

        /// Starts sending on the client's loop; succeeds once every message settled or the drain ended.
        func start(_ clock: LoadClock) -> EventLoopFuture<LoadResult> {
            let loop = client.eventLoop
            return loop.flatSubmit { [self] in
                self.clock = clock
                let promise = loop.makePromise(of: LoadResult.self)
                done = promise
                let drain = TimeAmount.nanoseconds(Int64(clock.drainUntil - min(clock.drainUntil, LoadClock.now())))
                loop.scheduleTask(in: drain) { [self] in finish() }
                for _ in 0..<pattern.window { sendOne() }
                return promise.futureResult
            }
        }

        func handle(_ event: ClientEvent) {
            guard let clock else { return }
            let now = LoadClock.now()
            switch event {
            case .accepted(let id, _, _):
                if let start = sentAt[id], clock.measured(start) { _ = result.sendToAccepted.record((now - start) / 1000) }
            case .delivered(let id, _, _):
                guard let start = sentAt.removeValue(forKey: id) else { return }
                if clock.measured(start) { _ = result.sendToDelivered.record((now - start) / 1000) }
                if now < clock.measureUntil { sendOne() }
            case .failed(let id, _, let reason, _):
                guard sentAt.removeValue(forKey: id) != nil else { return }
                note(failure: reason)
                if now < clock.measureUntil { sendOne() }
            default:
                return
            }
            if now >= clock.measureUntil, sentAt.isEmpty { finish() }
        }

        private func sendOne() {
            counter += 1
            let start = LoadClock.now()
            // Counted as sent either way: a refused post is a failure, neither lost nor left out.
            result.sent += 1
            do {
                sentAt[try client.post(to: to, text: SIMPLoad.text(counter, start, size: pattern.payloadBytes))] = start
            } catch {
                note(failure: "send: \(error)")
            }
        }

        private func note(failure: String) {
            result.failed += 1
            if result.failures.count < 5 { result.failures.append(failure) }
        }

        /// Later events (a late accepted, say) no longer count.
        private func finish() {
            clock = nil
            done?.succeed(result)
            done = nil
        }
    }

    /// One receiver, on its client's loop like `Sender`.
    final class Receiver: @unchecked Sendable {
        var client: SIMPClient!
        var counters = Set<UInt64>()
        var duplicates = 0
        /// Early messages whose store failed: their senders count them failed, so they are
        /// taken out of what was received.
        var retracted = 0
        var latencies = LoadResult.histogram()
        var clock: LoadClock?

        func start(_ clock: LoadClock) -> EventLoopFuture<Void> {
            client.eventLoop.submit { [self] in self.clock = clock }
        }

        func handle(_ event: ClientEvent) {
            if case .retracted = event { retracted += 1 }
            guard case .message(let message) = event, let (counter, sentAt) = SIMPLoad.parse(message.text) else { return }
            let now = LoadClock.now()
            guard counters.insert(counter).inserted else {
                duplicates += 1
                return
            }
            if let clock, clock.measured(sentAt) { _ = latencies.record((now - sentAt) / 1000) }
        }

        /// The pair's figures, once its sender is done: everything delivered was received first,
        /// and whatever else could still arrive had the drain time.
        func result(_ sent: LoadResult) -> EventLoopFuture<LoadResult> {
            client.eventLoop.submit { [self] in
                var pair = LoadResult()
                pair.sendToReceive = latencies
                pair.received = counters.count - retracted
                pair.duplicates = duplicates
                pair.lost = max(0, sent.sent - sent.failed - pair.received)
                return pair
            }
        }
    }

    /// "COUNTER SENT-NANOS " padded to `size` bytes: the receiver learns both without a shared map.
    static func text(_ counter: UInt64, _ sentAt: UInt64, size: Int) -> String {
        let head = "\(counter) \(sentAt) "
        return head + String(repeating: "x", count: max(0, size - head.utf8.count))
    }

    static func parse(_ text: String) -> (counter: UInt64, sentAt: UInt64)? {
        let parts = text.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let counter = UInt64(parts[0]), let sentAt = UInt64(parts[1]) else { return nil }
        return (counter, sentAt)
    }
}

extension LoadResult {
    /// Mosquitto's figures in the same shape (its PUBACK stands where SIMP's accepted does).
    public init(_ mqtt: MQTTLoadResult) {
        self.init()
        sent = mqtt.sent
        received = mqtt.received
        duplicates = mqtt.duplicates
        lost = mqtt.lost
        failed = mqtt.errors.count
        failures = Array(mqtt.errors.prefix(5))
        measuredSeconds = mqtt.measuredSeconds
        sendToReceive = mqtt.sendToReceive
        sendToAccepted = mqtt.sendToAck
    }
}

