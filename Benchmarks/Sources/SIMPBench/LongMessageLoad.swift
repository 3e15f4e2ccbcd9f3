import Foundation
import Histogram
import MQTTLoad
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient

/// Issue 27's long-message pattern: one sender posts 1,000 small texts to one user, one every
/// 5 ms, and (in the second run) 20 texts of 60 KiB to another user among them, one every 50
/// small ones. Each long text travels as about 64 parts. The small ones' send-to-receive
/// latency with the long ones beside them, against a run without: a long message should not
/// hold up small ones in another conversation.
public enum LongMessageLoad {
    public struct Result: Sendable {
        public var withLong: LoadResult
        public var smallOnly: LoadResult
        /// The long messages: sent, arrived whole, and their send-to-receive latency.
        public var longSent: Int
        public var longWhole: Int
        public var longSendToReceive: Histogram<UInt64>
    }

    public static let small = 1_000
    public static let long = 20
    public static let longBytes = 60 * 1024
    static let smallBytes = 100
    static let gap = Duration.milliseconds(5)

    public static func run(placement: Placement, group: any EventLoopGroup, processes: ProcessGroups,
                           progress: @escaping @Sendable (String) -> Void) async throws -> Result {
        progress("small only: \(small) texts of \(smallBytes) bytes, one every 5 ms")
        let smallOnly = try await once(withLong: false, placement: placement, group: group, processes: processes).small
        progress("with long: the same, and \(long) texts of \(longBytes / 1024) KiB to another user among them")
        let (withLong, tally) = try await once(withLong: true, placement: placement, group: group, processes: processes)
        return Result(withLong: withLong, smallOnly: smallOnly, longSent: long, longWhole: tally.whole,
                      longSendToReceive: tally.latencies)
    }

    /// What one receiver saw: counters once each, duplicates, latencies of the messages whose
    /// text is whole.
    struct Tally: Sendable {
        var counters = Set<UInt64>()
        var duplicates = 0
        var whole = 0
        var latencies = LoadResult.histogram()

        mutating func take(_ text: String, bytes: Int) {
            guard let (counter, sentAt) = SIMPLoad.parse(text) else { return }
            guard counters.insert(counter).inserted else {
                duplicates += 1
                return
            }
            guard text.utf8.count == bytes else { return }
            whole += 1
            _ = latencies.record((LoadClock.now() - sentAt) / 1000)
        }
    }

    private static func once(withLong: Bool, placement: Placement, group: any EventLoopGroup,
                             processes: ProcessGroups) async throws -> (small: LoadResult, long: Tally) {
        let configuration = placement.configuration(startingAt: 0)
        let smallTally = NIOLockedValueBox(Tally()), longTally = NIOLockedValueBox(Tally())
        let bob = try await SIMPLoad.connectedClient("bench-long-bob", configuration, group) { event in
            if case .message(let message) = event { smallTally.withLockedValue { $0.take(message.text, bytes: smallBytes) } }
        }
        let carol = try await SIMPLoad.connectedClient("bench-long-carol", configuration, group) { event in
            if case .message(let message) = event { longTally.withLockedValue { $0.take(message.text, bytes: longBytes) } }
        }
        let alice = try await SIMPLoad.connectedClient("bench-long-alice", configuration, group)
        // The sending takes at least 5 s (1,000 gaps of 5 ms); CPU is sampled over those.
        let window = UsageWindow.measure(processes, after: 0, seconds: 5)
        let start = ContinuousClock.now
        var failed = 0
        // Counters go on from run to run, so a late copy of an earlier run's message is not counted.
        let base = LoadClock.now()
        for n in 0..<small {
            let now = LoadClock.now()
            do { _ = try alice.post(to: "bench-long-bob", text: SIMPLoad.text(base + UInt64(n), now, size: smallBytes)) } catch { failed += 1 }
            if withLong, n % (small / long) == small / long / 2 {
                do { _ = try alice.post(to: "bench-long-carol", text: SIMPLoad.text(base + UInt64(n), now, size: longBytes)) } catch { failed += 1 }
            }
            try await Task.sleep(for: gap)
        }
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline,
              smallTally.withLockedValue({ $0.counters.count }) < small || (withLong && longTally.withLockedValue({ $0.counters.count }) < long) {
            try await Task.sleep(for: .milliseconds(20))
        }
        var result = LoadResult()
        result.usage = await window.value.usage(messages: small + (withLong ? long : 0))
        for client in [alice, bob, carol] { await client.close() }
        let tally = smallTally.withLockedValue { $0 }
        result.sent = small
        result.failed = failed
        result.received = tally.counters.count
        result.duplicates = tally.duplicates
        result.lost = small - tally.counters.count
        result.measuredSeconds = seconds
        result.sendToReceive = tally.latencies
        return (result, longTally.withLockedValue { $0 })
    }
}
