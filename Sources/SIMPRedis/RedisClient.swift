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
    /// Runs the commands, with `WAIT` right after the share of them each node got; every reply
    /// comes with the acknowledgements of its own node's WAIT. A shard short of replicas marks
    /// only its own commands, never the others'.
    func run(_ commands: [RedisCommand], on loop: any EventLoop, countingReplicas wait: RedisReplicaWait) -> EventLoopFuture<[RedisReplicated]>
    /// The node that holds `key` as last known, without a round trip: the one instance, or its
    /// slot's master in the cluster's map (nil before the map was read).
    func node(forKey key: String) -> RedisNodeAddress?
    /// Whether one script may write keys of different slots: true for one instance, false for
    /// a cluster (Redis refuses such a script there with CROSSSLOT).
    var scriptsCrossSlots: Bool { get }
    /// The nodes that hold keys: the one instance, or every master of a cluster. Completes on `loop`.
    func masters(on loop: any EventLoop) -> EventLoopFuture<[RedisNodeAddress]>
    /// The node that serves `key`'s slot: the one instance, or that slot's master as the
    /// cluster says now (its map read again). For sharded pub/sub. Completes on `loop`.
    func master(forKey key: String, on loop: any EventLoop) -> EventLoopFuture<RedisNodeAddress>
    /// Runs the commands on that node itself, whatever their keys (SCAN walks one node).
    func run(_ commands: [RedisCommand], at node: RedisNodeAddress, on loop: any EventLoop) -> EventLoopFuture<[RedisValue]>
    /// Closes every connection; later calls fail with `.closed`.
    func shutdown() async
}

extension RedisClient {
    public func run(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisValue] {
        try await Self.value(of: run(commands, on: MultiThreadedEventLoopGroup.singleton.next()))
    }

    /// One command; an error reply is thrown as `RedisError`.
    public func run(_ command: RedisCommand) async throws(RedisError) -> RedisValue {
        try await run([command])[0].checked()
    }

    /// Every key matching `pattern`, from every node that holds keys (SCAN: Redis keeps
    /// serving others while it walks).
    public func scan(matching pattern: String) async throws(RedisError) -> [String] {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        var found: [String] = []
        for node in try await Self.value(of: masters(on: loop)) {
            var cursor = "0"
            repeat {
                let command = RedisCommand("SCAN", [cursor, "MATCH", pattern, "COUNT", 1000])
                let reply = try await Self.value(of: run([command], at: node, on: loop))[0].checked()
                guard let parts = reply.array, parts.count == 2, let next = parts[0].string, let keys = parts[1].array else {
                    throw RedisError(.protocolViolation, "SCAN on \(node) returned \(reply)")
                }
                cursor = next
                found += keys.compactMap(\.string)
            } while cursor != "0"
        }
        return found
    }

    private static func value<T: Sendable>(of future: EventLoopFuture<T>) async throws(RedisError) -> T {
        do {
            return try await future.get()
        } catch let error as RedisError {
            throw error
        } catch {
            throw RedisError(.closed, "redis pool is shut down")
        }
    }
}

extension RedisPool {
    public var scriptsCrossSlots: Bool { true }

    public func masters(on loop: any EventLoop) -> EventLoopFuture<[RedisNodeAddress]> {
        loop.makeSucceededFuture([RedisNodeAddress(host: configuration.host, port: configuration.port)])
    }

    public func master(forKey key: String, on loop: any EventLoop) -> EventLoopFuture<RedisNodeAddress> {
        loop.makeSucceededFuture(RedisNodeAddress(host: configuration.host, port: configuration.port))
    }

    public func node(forKey key: String) -> RedisNodeAddress? {
        RedisNodeAddress(host: configuration.host, port: configuration.port)
    }

    /// The pool has one node: `node` is where it is.
    public func run(_ commands: [RedisCommand], at node: RedisNodeAddress, on loop: any EventLoop) -> EventLoopFuture<[RedisValue]> {
        run(commands, on: loop)
    }
}

extension RedisPool: RedisClient {}

/// A command's reply, and how many replicas of the node that ran it acknowledged the writes
/// made up to its WAIT.
public struct RedisReplicated: Sendable {
    public var reply: RedisValue
    public var replicas: Int64

    public init(reply: RedisValue, replicas: Int64) {
        self.reply = reply
        self.replicas = replicas
    }
}

/// Asks that a pipeline's writes reach replicas before it counts as done: `WAIT replicas
/// timeout` is sent on the same connection right after it, and too few acknowledgements fail
/// the pipeline (its writes did run on the master: `mayHaveRun`).
public struct RedisReplicaWait: Sendable, Equatable {
    public var replicas: Int
    public var timeout: TimeAmount
    /// Set by `run(_:on:countingReplicas:)`: WAIT's reply is kept (as the last) rather than checked.
    var counting = false

    public init(replicas: Int, timeout: TimeAmount) {
        self.replicas = replicas
        self.timeout = timeout
    }

    /// The replies, checked, or (counting) left with WAIT's reply as the last.
    func apply(_ replies: [RedisValue]) throws(RedisError) -> [RedisValue] {
        counting ? replies : try check(replies)
    }

    /// A WAIT reply as a count; an error reply (a node that refuses WAIT) counts none.
    static func acknowledged(_ reply: RedisValue?) -> Int64 {
        (try? reply?.checked().int).flatMap { $0 } ?? 0
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

    /// One node: every command counts the one WAIT after them all.
    public func run(_ commands: [RedisCommand], on loop: any EventLoop, countingReplicas wait: RedisReplicaWait) -> EventLoopFuture<[RedisReplicated]> {
        run(commands + [wait.command], on: loop).map { replies in
            let acknowledged = RedisReplicaWait.acknowledged(replies.last)
            return replies.dropLast().map { RedisReplicated(reply: $0, replicas: acknowledged) }
        }
    }
}
