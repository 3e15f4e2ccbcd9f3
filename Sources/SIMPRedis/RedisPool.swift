import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A pool of hiredis connections whose blocking calls run on the pool's own threads,
/// so no event loop ever waits on Redis. A broken connection is dropped and a new one is
/// made on next use, which is how service resumes after Redis restarts.
public final class RedisPool: Sendable {
    public let configuration: RedisConfiguration
    private let threads: NIOThreadPool
    private let idle: NIOLockedValueBox<[ConnectionBox]>
    private let logger: Logger

    public init(configuration: RedisConfiguration, logger: Logger = Logger(label: "simp.redis")) {
        self.configuration = configuration
        self.threads = NIOThreadPool(numberOfThreads: max(1, configuration.poolSize))
        self.idle = NIOLockedValueBox([])
        self.logger = logger
        threads.start()
    }

    /// Runs the commands as one pipeline on one connection; completes on `loop`.
    /// The whole pipeline fails with the connection's error if the connection breaks.
    public func run(_ commands: [RedisCommand], on loop: any EventLoop) -> EventLoopFuture<[RedisValue]> {
        threads.runIfActive(eventLoop: loop) { () throws -> [RedisValue] in
            try self.runBlocking(commands)
        }.flatMapErrorThrowing { error in
            if error is RedisError { throw error }
            throw RedisError(.closed, "redis pool is shut down")
        }
    }

    public func run(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisValue] {
        // Completions go through an event loop future, whose callbacks always run.
        do {
            return try await run(commands, on: NIOSingletons.posixEventLoopGroup.next()).get()
        } catch let error as RedisError {
            throw error
        } catch {
            throw RedisError(.closed, "redis pool is shut down")
        }
    }

    /// One command; an error reply is thrown as `RedisError` of kind `.server`.
    public func run(_ command: RedisCommand) async throws(RedisError) -> RedisValue {
        try await run([command])[0].checked()
    }

    /// Waits for running work to finish, then closes every connection.
    public func shutdown() async {
        try? await threads.shutdownGracefully()
        idle.withLockedValue { $0.removeAll() }
    }

    private func runBlocking(_ commands: [RedisCommand]) throws(RedisError) -> [RedisValue] {
        let connection = try checkOut()
        defer { checkIn(connection) }
        do {
            return try connection.connection.run(commands)
        } catch {
            logger.debug("redis pipeline failed", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// An idle connection that Redis has not closed, or a new one.
    private func checkOut() throws(RedisError) -> ConnectionBox {
        while let box = idle.withLockedValue({ $0.popLast() }) {
            if !box.connection.peerClosed { return box }
        }
        return ConnectionBox(try RedisConnection(configuration))
    }

    private func checkIn(_ box: ConnectionBox) {
        guard box.connection.isHealthy else { return }
        idle.withLockedValue { $0.append(box) }
    }
}

/// A connection moves between threads only through the pool's lock, one holder at a time.
private final class ConnectionBox: @unchecked Sendable {
    let connection: RedisConnection
    init(_ connection: RedisConnection) { self.connection = connection }
}
