import NIOCore
import SIMPRedis
import Testing
@testable import SIMPServer

/// What a failed attempt to reach Redis at startup comes to, with the time handed in.
struct RedisWaitTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func anOutageIsWaitedOutLoggingEachNewErrorOnceUntilTheWaitIsOver() {
        var wait = RedisWait(from: Self.start, wait: .seconds(30))
        let refused = RedisError(.connectionFailed, "refused")
        #expect(wait.failed(refused, deployment: "r:6379", nodes: "r:6379", now: Self.start)
            == .again(log: "waiting for Redis at r:6379: \(refused)", after: .milliseconds(500)))
        #expect(wait.failed(refused, deployment: "r:6379", nodes: "r:6379", now: Self.start + .seconds(1))
            == .again(log: nil, after: .milliseconds(500)), "the same error is logged once")
        let loading = RedisError(.notReady, "LOADING")
        #expect(wait.failed(loading, deployment: "r:6379", nodes: "r:6379", now: Self.start + .seconds(2))
            == .again(log: "waiting for Redis at r:6379: \(loading)", after: .milliseconds(500)))
        #expect(wait.failed(loading, deployment: "r:6379", nodes: "r:6379", now: Self.start + .seconds(30))
            == .giveUp("Redis at r:6379 unreachable for 30s: \(loading)"))
    }

    @Test func whatWaitingWillNotMendEndsTheWaitAtOnce() {
        var wait = RedisWait(from: Self.start, wait: .seconds(30))
        #expect(wait.failed(RedisError(.protocolViolation, "SELECT on a cluster node"), deployment: "r:6379", nodes: "r:6379", now: Self.start)
            == .giveUp("Redis at r:6379: SELECT on a cluster node"))
        #expect(wait.failed(RedisError(.server, "ERR This instance has cluster support disabled"), deployment: "cluster r:7000",
                            nodes: "r:7000", now: Self.start)
            == .giveUp("--redis-cluster given, but Redis at r:7000 is not a cluster node (its cluster-enabled is no): ERR This instance has cluster support disabled"))
    }
}
