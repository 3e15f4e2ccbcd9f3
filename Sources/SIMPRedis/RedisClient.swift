import NIOCore
import NIOPosix

/// What the server needs of Redis, whether one instance (`RedisPool`) or a cluster
/// (`RedisClusterPool`): pipelines run on the caller's event loop, in the order they were made.
public protocol RedisClient: Sendable {
    /// Runs the commands as one pipeline; completes on `loop`, with one reply per command in
    /// the order of `commands`.
    func run(_ commands: [RedisCommand], on loop: any EventLoop) -> EventLoopFuture<[RedisValue]>
    /// The same, and with `wait` set, only once enough replicas have the writes (see
    /// `RedisReplicaWait`); nil is `run(_:on:)`.
    func run(_ commands: [RedisCommand], on loop: any EventLoop, waitingFor wait: RedisReplicaWait?) -> EventLoopFuture<[RedisValue]>
    /// Closes every connection; later calls fail with `.closed`.
    func shutdown() async
}

extension RedisClient {
    public func run(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisValue] {
        do {
            return try await run(commands, on: MultiThreadedEventLoopGroup.singleton.next()).get()
        } catch let error as RedisError {
            throw error
        } catch {
            throw RedisError(.closed, "redis pool is shut down")
        }
    }

    /// One command; an error reply is thrown as `RedisError`.
    public func run(_ command: RedisCommand) async throws(RedisError) -> RedisValue {
        try await run([command])[0].checked()
    }
}

extension RedisPool: RedisClient {}

/// Asks that a pipeline's writes reach replicas before it counts as done: `WAIT replicas
/// timeout` is sent on the same connection right after it, and too few acknowledgements fail
/// the pipeline (its writes did run on the master: `mayHaveRun`).
public struct RedisReplicaWait: Sendable, Equatable {
    public var replicas: Int
    public var timeout: TimeAmount

    public init(replicas: Int, timeout: TimeAmount) {
        self.replicas = replicas
        self.timeout = timeout
    }

    var command: RedisCommand {
        RedisCommand("WAIT", [replicas, Int(timeout.nanoseconds / 1_000_000)])
    }

    /// The commands' own replies, once WAIT's (the last) says enough replicas have them.
    func check(_ replies: [RedisValue]) throws(RedisError) -> [RedisValue] {
        let acknowledged = try replies.last?.checked().int ?? 0
        guard acknowledged >= replicas else {
            throw RedisError(.notReady, "written, but only \(acknowledged) of \(replicas) replicas confirmed within \(timeout.nanoseconds / 1_000_000) ms (WAIT)",
                             mayHaveRun: true)
        }
        return Array(replies.dropLast())
    }
}

extension RedisPool {
    /// Runs the commands, then WAIT on the same connection when `wait` is set.
    public func run(_ commands: [RedisCommand], on loop: any EventLoop, waitingFor wait: RedisReplicaWait?) -> EventLoopFuture<[RedisValue]> {
        guard let wait else { return run(commands, on: loop) }
        return run(commands + [wait.command], on: loop).flatMapThrowing { replies in try wait.check(replies) }
    }
}
