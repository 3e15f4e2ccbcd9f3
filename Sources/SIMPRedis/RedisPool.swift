import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Redis for a whole process: one pipelined connection per event loop that asks, opened on
/// first use and replaced after it breaks (which is how service resumes after Redis restarts).
/// A request from an event loop runs on that loop's own connection: no thread hop, no
/// blocking call, and the requests of one loop run in Redis in the order they were made.
public final class RedisPool: Sendable {
    public let configuration: RedisConfiguration
    private let connections = NIOLockedValueBox<[ObjectIdentifier: RedisLoopConnection]>([:])
    private let isShutDown = NIOLockedValueBox(false)
    private let logger: Logger
    private let observeRoundTrip: RoundTripObserver?

    /// Told how long each pipelined batch took from being written to its last reply, on the
    /// connection's loop; it must return quickly (a metrics histogram, say).
    public typealias RoundTripObserver = @Sendable (Duration) -> Void

    public init(configuration: RedisConfiguration, logger: Logger = Logger(label: "simp.redis"),
                observeRoundTrip: RoundTripObserver? = nil) {
        self.configuration = configuration
        self.logger = logger
        self.observeRoundTrip = observeRoundTrip
    }

    /// Runs the commands as one pipeline on `loop`'s connection; completes on `loop`.
    /// The whole pipeline fails with the connection's error if the connection breaks.
    public func run(_ commands: [RedisCommand], on loop: any EventLoop) -> EventLoopFuture<[RedisValue]> {
        guard let connection = connection(for: loop) else {
            return loop.makeFailedFuture(RedisError(.closed, "redis pool is shut down"))
        }
        guard loop.inEventLoop else { return loop.flatSubmit { connection.run(commands) } }
        return connection.run(commands)
    }

    /// Closes every connection; later calls fail with `.closed`.
    public func shutdown() async {
        let open = connections.withLockedValue { boxes -> [RedisLoopConnection] in
            isShutDown.withLockedValue { $0 = true }
            defer { boxes.removeAll() }
            return Array(boxes.values)
        }
        for connection in open {
            try? await connection.loop.flatSubmit { connection.close() }.get()
        }
    }

    private func connection(for loop: any EventLoop) -> RedisLoopConnection? {
        connections.withLockedValue { boxes in
            guard !isShutDown.withLockedValue({ $0 }) else { return nil }
            let key = ObjectIdentifier(loop)
            // A loop of a group shut down since may share an address with a new one.
            if let known = boxes[key], known.loop === loop { return known }
            let connection = RedisLoopConnection(loop: loop, configuration: configuration, observeRoundTrip: observeRoundTrip)
            boxes[key] = connection
            return connection
        }
    }
}
