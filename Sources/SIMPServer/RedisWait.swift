import NIOCore
import SIMPRedis

/// What a failed attempt to reach Redis at startup comes to, pure: the server waits up to
/// `--redis-wait` for Redis, trying every 500 ms and logging each new error once, but gives up
/// at once on what waiting will not mend. `SIMPServer.waitForRedis` is its driver: it makes the
/// attempts, reads the clock once per failure and carries out what this says.
struct RedisWait: Sendable {
    enum Next: Equatable, Sendable {
        /// Log this line (nil: the same error as last time), then try again after `after`.
        case again(log: String?, after: TimeAmount)
        /// Stop: the server cannot start.
        case giveUp(String)
    }

    static let pause = TimeAmount.milliseconds(500)

    /// The wait's end.
    let until: NIODeadline
    /// How long it is, for the reason given up with.
    let wait: TimeAmount
    private var lastMessage = ""

    init(from start: NIODeadline, wait: TimeAmount) {
        until = start + wait
        self.wait = wait
    }

    /// The attempt on `deployment` (its description) failed with `error` at `now`.
    mutating func failed(_ error: RedisError, deployment: String, nodes: String, now: NIODeadline) -> Next {
        if error.message.contains("cluster support disabled") {
            return .giveUp("--redis-cluster given, but Redis at \(nodes) is not a cluster node (its cluster-enabled is no): \(error.message)")
        }
        // A misconfiguration (a cluster node given a database number, say) or a reply that
        // makes no sense will not mend by waiting.
        if error.kind == .protocolViolation { return .giveUp("Redis at \(deployment): \(error.message)") }
        let log: String? = error.message == lastMessage ? nil : "waiting for Redis at \(deployment): \(error)"
        lastMessage = error.message
        guard now < until else {
            return .giveUp("Redis at \(deployment) unreachable for \(wait.nanoseconds / 1_000_000_000)s: \(error)")
        }
        return .again(log: log, after: Self.pause)
    }
}
