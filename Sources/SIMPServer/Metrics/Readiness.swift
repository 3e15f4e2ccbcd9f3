import NIOCore
import SIMPRedis

/// Whether this node can serve: its listeners are bound and Redis answers. `/ready` asks it.
struct Readiness: Sendable {
    let redis: any RedisClient
    /// The control (TCP) and datagram (UDP) sockets, by the name a reason gives them.
    let listeners: [(name: String, channel: any Channel)]
    /// How long Redis may take to answer PING before the node counts as not ready.
    var redisDeadline: TimeAmount = .seconds(1)
    /// Redis shards whose stores wait for replicas (`--redis-min-replicas`), with the replicas
    /// they have online.
    var shardsShort: @Sendable () -> [(shard: RedisNodeAddress, online: Int)] = { [] }
    var minReplicas = 0

    /// Ready, yet not all well: one line per Redis shard short of replicas. The node still
    /// serves (every node sees the same shards), so this does not make it unready.
    func degraded() -> [String] {
        shardsShort().map { shard, online in
            "degraded: Redis shard \(shard.host):\(shard.port) has \(online) of the \(minReplicas) replicas --redis-min-replicas asks for; "
                + "messages to its users wait, then fail REPLICAS_UNAVAILABLE"
        }
    }

    /// nil when ready, otherwise one line saying why not. Completes on `loop` without blocking it.
    func problem(on loop: any EventLoop) -> EventLoopFuture<String?> {
        if let closed = listeners.first(where: { !$0.channel.isActive }) {
            return loop.makeSucceededFuture("\(closed.name) listener is closed")
        }
        return pingRedis(on: loop)
    }

    /// The pool's own command timeout is longer (it covers slow scripts); a readiness probe
    /// wants a quick answer, so the PING races a shorter deadline of its own.
    private func pingRedis(on loop: any EventLoop) -> EventLoopFuture<String?> {
        let answer = loop.makePromise(of: String?.self)
        let deadline = redisDeadline
        let timer = loop.scheduleTask(in: deadline) {
            answer.succeed("redis: no answer to PING within \(deadline.nanoseconds / 1_000_000) ms")
        }
        redis.run([RedisCommand("PING")], on: loop).whenComplete { result in
            timer.cancel()
            answer.succeed(Self.problem(in: result))
        }
        return answer.futureResult
    }

    private static func problem(in result: Result<[RedisValue], any Error>) -> String? {
        do {
            _ = try result.get()[0].checked()
            return nil
        } catch let error as RedisError {
            return "redis: \(error.message)"
        } catch {
            return "redis: \(error)"
        }
    }
}
