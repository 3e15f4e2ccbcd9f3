import MQTTLoad
import NIOCore
import NIOPosix

/// The bench's pattern through NATS JetStream, durably: per pair one file-stored work-queue
/// stream; the sender publishes with a reply inbox and counts JetStream's PubAck as the ack,
/// the receiver is a push consumer with explicit acks (max 2 W unacked). A slot is freed once
/// the PubAck and the message are both in; the PubAck is `sendToAck`.
public enum JetStreamLoad {
    /// Starts a private nats-server with JetStream, runs the pattern through it, and stops it,
    /// also when the run fails. `started` hears of the broker before the run begins (its `pid`).
    public static func run(_ pattern: LoadPattern, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                           progress: @Sendable (String) -> Void = { _ in },
                           started: @Sendable (NATSBroker) -> Void = { _ in }) async throws -> MQTTLoadResult {
        try DurablePattern.validate(pattern)
        progress("starting nats-server")
        let broker = try await NATSBroker.start()
        started(broker)
        progress("running \(pattern.pairs) pairs x \(pattern.window) through NATS JetStream on port \(broker.port)")
        let result: MQTTLoadResult
        do {
            result = try await run(pattern, host: "127.0.0.1", port: broker.port, group: group)
        } catch {
            await broker.stop()
            throw error
        }
        progress("done: \(result.sent) sent, \(result.received) received; stopping nats-server")
        await broker.stop()
        return result
    }

    /// The pattern through a running server with JetStream. Each stream is deleted at the end.
    public static func run(_ pattern: LoadPattern, host: String, port: Int, group: any EventLoopGroup) async throws -> MQTTLoadResult {
        try DurablePattern.validate(pattern)
        let runID = DurablePattern.runID()
        let pairs = (0..<pattern.pairs).map {
            JetStreamPair(names: JetStreamNames(runID: runID, index: $0), pattern: pattern, loop: group.next())
        }
        try await LoadPairs.open(pairs, host: host, port: port)
        let clock = LoadClock(pattern)
        for pair in pairs { pair.start(clock) }
        var result = MQTTLoadResult()
        for pair in pairs { result.merge(try await pair.finished.futureResult.get()) }
        await LoadPairs.close(pairs)
        result.measuredSeconds = pattern.duration
        return result
    }
}
