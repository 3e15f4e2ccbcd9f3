import Logging
import NIOCore
import SIMPRedis

/// What one look at a node id's record in Redis showed: who holds it and how long it has left.
struct NodeRecordReading: Equatable, Sendable {
    /// The holder's instance token; nil when no node holds the id.
    var holder: String?
    var millisLeft: Int64
}

/// Whether a node id is free to take, from two consecutive readings of its record a moment
/// apart: a live holder renews its record (every `NodeRecord.renewEvery`), so its time left
/// goes up between two readings; a dead one's only runs down.
enum NodeIDCheck {
    enum Verdict: Equatable { case free, wait, inUse }

    static func verdict(previous: NodeRecordReading, now: NodeRecordReading) -> Verdict {
        guard let holder = now.holder else { return .free }
        if holder != previous.holder || now.millisLeft > previous.millisLeft { return .inUse }
        return .wait
    }
}

/// This node's claim on its id (`simp:node:ID`, holding a random token, expiring unless
/// renewed): a second node started with the same id refuses to start, and a node that stops
/// renewing (killed) frees the id within `ttl`. Other nodes and `simp-admin` read it to tell
/// a live node from a gone one.
final class NodeRecord: Sendable {
    static let ttl: TimeAmount = .seconds(3)
    static let renewEvery: TimeAmount = .seconds(1)

    private let redis: any RedisClient
    private let key: String
    private let nodeID: String
    private let token = randomBytes(16).map { String($0, radix: 16) }.joined()
    private let logger: Logger
    /// Touched only on `loop` (the box checks that in every build), where the timer runs.
    private let renewal: NIOLoopBoundBox<Renewal>

    private struct Renewal: Sendable {
        var timer: RepeatedTask?
        /// The renewal Redis has not answered yet. `release` waits for it: the renew script
        /// writes a missing record back, so one landing after the release's DEL would hold
        /// the id for another `ttl`.
        var pending: EventLoopFuture<Void>?
        var released = false
    }

    /// `loop` renews the record.
    init(redis: any RedisClient, keys: Keys, nodeID: String, loop: any EventLoop, logger: Logger) {
        self.redis = redis
        self.key = keys.node(nodeID)
        self.nodeID = nodeID
        self.logger = logger
        self.renewal = .makeBoxSendingValue(Renewal(), eventLoop: loop)
    }

    /// Takes the id, waiting out the record of a holder that stopped without letting go;
    /// throws when a live node holds it.
    func claim() async throws {
        var previous: NodeRecordReading?
        while true {
            if try await take() { return }
            let reading = try await read()
            defer { previous = reading }
            guard let previous else {
                logger.notice("node id \(nodeID) is held in Redis; waiting up to \(Self.ttl.nanoseconds / 1_000_000) ms to see whether its holder is alive")
                try await Task.sleep(for: .milliseconds(200))
                continue
            }
            switch NodeIDCheck.verdict(previous: previous, now: reading) {
            case .free:
                continue
            case .inUse:
                throw StartupError(description: "node id \(nodeID) is in use by a running simp-server on this Redis (it renews \(key)); give each node its own --node-id")
            case .wait:
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// Renews the record every `renewEvery` until `release`.
    func keepRenewing() {
        let loop = renewal.eventLoop
        loop.execute { [self] in
            guard !renewal.value.released, renewal.value.timer == nil else { return }
            renewal.value.timer = loop.scheduleRepeatedAsyncTask(initialDelay: Self.renewEvery, delay: Self.renewEvery) { [self] _ in
                let renew = renewOnce(on: loop)
                renewal.value.pending = renew
                return renew
            }
        }
    }

    private func renewOnce(on loop: any EventLoop) -> EventLoopFuture<Void> {
        let renew = RedisCommand.script(Self.renewScript, keys: [key], args: [token, Self.ttl.nanoseconds / 1_000_000])
        return redis.run([renew], on: loop).map { [self] replies in
            if replies[0].int == 0 { logger.error("node id \(nodeID): another node took \(key) (this one did not renew it in time)") }
        }.recover { [self] error in
            logger.warning("node record not renewed: \(error)")
        }
    }

    /// Lets go of the id at a graceful stop, so the next start need not wait.
    func release() async {
        let pending = renewal.eventLoop.flatSubmit { [renewal] in
            renewal.value.released = true
            renewal.value.timer?.cancel()
            return renewal.value.pending ?? renewal.eventLoop.makeSucceededVoidFuture()
        }
        try? await pending.get()
        _ = try? await redis.run([RedisCommand.script(Self.releaseScript, keys: [key], args: [token])])
    }

    private func take() async throws(RedisError) -> Bool {
        let reply = try await redis.run(RedisCommand("SET", [key, token, "NX", "PX", Self.ttl.nanoseconds / 1_000_000]))
        return reply == .status("OK")
    }

    private func read() async throws(RedisError) -> NodeRecordReading {
        let replies = try await redis.run([RedisCommand("GET", [key]), RedisCommand("PTTL", [key])])
        return NodeRecordReading(holder: try replies[0].checked().string, millisLeft: try replies[1].checked().int ?? -2)
    }

    /// Extends the record only while it is still this node's.
    static let renewScript = RedisScript("""
    if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
    if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
    return 0
    """)

    static let releaseScript = RedisScript("""
    if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
    return 0
    """)
}
