import MQTTLoad

/// The bench's pattern through RabbitMQ, durably: per pair one durable queue; the sender
/// publishes persistent messages with publisher confirms, the receiver consumes with manual
/// acks (prefetch 2 W). A slot is freed once the confirm and the message are both in; the
/// confirm is `sendToAck`.
public enum RabbitMQLoad {
    /// Starts a private RabbitMQ, runs the pattern through it, and stops it, also when the run
    /// fails. `started` hears of the broker before the run begins (its `pid`, for CPU samples).
    public static func run(_ pattern: LoadPattern, progress: @Sendable (String) -> Void = { _ in },
                           started: @Sendable (RabbitMQBroker) -> Void = { _ in }) async throws -> MQTTLoadResult {
        try DurablePattern.validate(pattern)
        progress("starting rabbitmq-server")
        let broker = try await RabbitMQBroker.start()
        started(broker)
        progress("running \(pattern.pairs) pairs x \(pattern.window) through RabbitMQ on port \(broker.port)")
        let result: MQTTLoadResult
        do {
            result = try await run(pattern, host: "127.0.0.1", port: broker.port)
        } catch {
            await broker.stop()
            throw error
        }
        progress("done: \(result.sent) sent, \(result.received) received; stopping rabbitmq-server")
        await broker.stop()
        return result
    }

    /// The pattern through a running broker (guest/guest, vhost /). Each queue is deleted at the end.
    public static func run(_ pattern: LoadPattern, host: String, port: Int) async throws -> MQTTLoadResult {
        try DurablePattern.validate(pattern)
        let runID = DurablePattern.runID()
        let pairs = (0..<pattern.pairs).map { RabbitMQPair(queue: "simp-bench.\(runID).\($0)", pattern: pattern) }
        for pair in pairs { pair.launch(host: host, port: port) }
        try await open(pairs)
        let clock = LoadClock(pattern)
        for pair in pairs { pair.start(clock) }
        var result = MQTTLoadResult()
        for pair in pairs { result.merge(await pair.finished.get()) }
        result.measuredSeconds = pattern.duration
        return result
    }

    /// Waits for every pair to open; if any fails, all end and their threads exit before the error is thrown.
    private static func open(_ pairs: [RabbitMQPair]) async throws {
        var firstError: DurableLoadError?
        for pair in pairs {
            if case .failure(let error) = await pair.opened.get() { firstError = firstError ?? error }
        }
        guard let firstError else { return }
        for pair in pairs { pair.abort() }
        for pair in pairs { _ = await pair.finished.get() }
        throw firstError
    }
}
