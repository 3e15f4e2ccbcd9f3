import Foundation
import Histogram
import MQTTLoad
import NIOCore
import NIOPosix
import SIMPClient

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
    public static func run(_ pattern: LoadPattern, configuration: ClientConfiguration, group: any EventLoopGroup,
                           processes: [(name: String, pid: Int32)],
                           progress: @Sendable (String) -> Void = { _ in }) async throws -> LoadResult {
        progress("connecting \(pattern.pairs * 2) clients to \(configuration.host):\(configuration.port)")
        var pairs: [(sender: SIMPClient, receiver: SIMPClient, to: String)] = []
        for i in 0..<pattern.pairs {
            let sender = try await connectedClient("bench-s\(i)", configuration, group)
            let receiver = try await connectedClient("bench-r\(i)", configuration, group)
            pairs.append((sender, receiver, "bench-r\(i)"))
        }
        progress("running: \(pattern.warmup) s warm-up, \(pattern.duration) s measured")
        let clock = LoadClock(pattern)
        let window = UsageWindow.measure(processes, after: pattern.warmup, seconds: pattern.duration)
        var result = await withTaskGroup(of: LoadResult.self) { tasks in
            for (index, pair) in pairs.enumerated() {
                tasks.addTask { await runPair(index, pair.sender, pair.receiver, to: pair.to, pattern, clock) }
            }
            var total = LoadResult()
            for await part in tasks { total.merge(part) }
            return total
        }
        progress("done: \(result.sent) sent, \(result.received) received")
        result.measuredSeconds = pattern.duration
        result.usage = await window.value.usage(messages: result.receivedInWindow)
        for pair in pairs {
            await pair.sender.close()
            await pair.receiver.close()
        }
        return result
    }

    /// Registers the user if it is new (a rerun against the same Redis finds it), then connects.
    static func connectedClient(_ user: String, _ configuration: ClientConfiguration,
                                _ group: any EventLoopGroup) async throws -> SIMPClient {
        let client = SIMPClient(configuration: configuration, eventLoopGroup: group)
        do {
            try await client.register(user: user, password: password)
        } catch where error.code == .userExists {
            // Registered by an earlier run; the password is the bench's own.
        }
        try await client.connect(user: user, password: password)
        return client
    }

    static func runPair(_ index: Int, _ sender: SIMPClient, _ receiver: SIMPClient, to: String,
                        _ pattern: LoadPattern, _ clock: LoadClock) async -> LoadResult {
        let receiving = Task { await receive(receiver, clock) }
        var result = await send(sender, to: to, index: index, pattern, clock)
        // Everything delivered was received first; whatever else can still arrive has had the drain time.
        receiving.cancel()
        let received = await receiving.value
        result.sendToReceive = received.latencies
        result.received = received.counters.count
        result.duplicates = received.duplicates
        result.lost = max(0, result.sent - result.failed - received.counters.count)
        return result
    }

    /// Keeps `window` messages in flight until the measured window ends, then waits for the
    /// rest; the drain deadline ends the wait for whatever never settles.
    static func send(_ client: SIMPClient, to: String, index: Int, _ pattern: LoadPattern, _ clock: LoadClock) async -> LoadResult {
        let events = Task {
            var sender = Sender(client: client, to: to, counter: UInt64(index) << 40, pattern: pattern, clock: clock)
            return await sender.run()
        }
        let watchdog = Task {
            try? await Task.sleep(nanoseconds: clock.drainUntil - min(clock.drainUntil, LoadClock.now()))
            events.cancel()
        }
        let outcome = await events.value
        watchdog.cancel()
        return outcome
    }

    /// One sender's loop: sends, and reads its own events (accepted, delivered, failed).
    struct Sender {
        let client: SIMPClient
        let to: String
        var counter: UInt64
        let pattern: LoadPattern
        let clock: LoadClock
        var result = LoadResult()
        var sentAt: [String: UInt64] = [:]

        mutating func run() async -> LoadResult {
            for _ in 0..<pattern.window { await sendOne() }
            for await event in client.events {
                let now = LoadClock.now()
                switch event {
                case .accepted(let id, _, _):
                    if let start = sentAt[id], clock.measured(start) { _ = result.sendToAccepted.record((now - start) / 1000) }
                case .delivered(let id, _, _):
                    guard let start = sentAt.removeValue(forKey: id) else { continue }
                    if clock.measured(start) { _ = result.sendToDelivered.record((now - start) / 1000) }
                    if now < clock.measureUntil { await sendOne() }
                case .failed(let id, _, let reason):
                    guard sentAt.removeValue(forKey: id) != nil else { continue }
                    note(failure: reason)
                    if now < clock.measureUntil { await sendOne() }
                default:
                    continue
                }
                if now >= clock.measureUntil, sentAt.isEmpty { break }
            }
            return result
        }

        mutating func sendOne() async {
            counter += 1
            let start = LoadClock.now()
            do {
                let id = try await client.send(to: to, text: SIMPLoad.text(counter, start, size: pattern.payloadBytes))
                sentAt[id] = start
                result.sent += 1
            } catch {
                // Counted as sent and failed, so it is neither lost nor silently left out.
                result.sent += 1
                note(failure: "send: \(error)")
            }
        }

        mutating func note(failure: String) {
            result.failed += 1
            if result.failures.count < 5 { result.failures.append(failure) }
        }
    }

    struct Received: Sendable {
        var counters = Set<UInt64>()
        var duplicates = 0
        var latencies = LoadResult.histogram()
    }

    static func receive(_ client: SIMPClient, _ clock: LoadClock) async -> Received {
        var received = Received()
        for await event in client.events {
            guard case .message(let message) = event, let (counter, sentAt) = parse(message.text) else { continue }
            let now = LoadClock.now()
            guard received.counters.insert(counter).inserted else {
                received.duplicates += 1
                continue
            }
            if clock.measured(sentAt) { _ = received.latencies.record((now - sentAt) / 1000) }
        }
        return received
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
