import Foundation
import NIOCore
import NIOPosix
import SIMPRedis
import SIMPTestSupport
import Testing

/// Which requests failed, in the order their failures were reported; touched on one loop only.
private final class FailureOrder: @unchecked Sendable {
    var names: [String] = []
}

@Suite(.serialized) struct RedisConnectionBreakTests {
    /// Redis dies (reset) with a request unread, and the loop, busy meanwhile, writes the next
    /// request before it notices: the write fails, and NIO fails the write still in its buffer
    /// before it closes the channel, whose handler then fails the requests already sent. The
    /// connection must still report its requests' failures in the order they were made: the
    /// store pipeline sends unknown outcomes again in the order they are reported.
    @Test func aBrokenConnectionFailsItsRequestsInTheOrderTheyWereMade() async throws {
        let redis = try RedisServerProcess()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port, commandTimeout: .seconds(10)))
        _ = try await pool.run([RedisCommand("PING")], on: loop).get()
        let pid = try Self.processID(redis)
        let order = FailureOrder()

        kill(pid, SIGSTOP)
        let first = try await loop.submit { () -> EventLoopFuture<[RedisValue]> in
            let first = pool.run([RedisCommand("INCR", ["first"])], on: loop)
            first.whenFailure { _ in order.names.append("first") }
            return first
        }.get()
        try await Task.sleep(for: .milliseconds(200))
        let second = try await loop.submit { () -> EventLoopFuture<[RedisValue]> in
            // Killed while stopped, Redis closes with "first" unread: the kernel resets the
            // connection. The loop does not look at its sockets until this task ends.
            kill(pid, SIGKILL)
            usleep(300_000)
            let second = pool.run([RedisCommand("INCR", ["second"])], on: loop)
            second.whenFailure { _ in order.names.append("second") }
            return second
        }.get()

        for request in [first, second] {
            let error = await #expect(throws: RedisError.self) { try await request.get() }
            #expect(error?.mayHaveRun == true, "sent, or half sent: it may have run")
        }
        let reported = try await loop.submit { order.names }.get()
        #expect(reported == ["first", "second"])
        redis.kill9()
        await pool.shutdown()
        try await group.shutdownGracefully()
    }

    /// Redis' pid, from INFO (the test support keeps its process private).
    static func processID(_ redis: RedisServerProcess) throws -> pid_t {
        let info = try redis.command(["INFO", "server"])
        for line in info.split(whereSeparator: \.isNewline) where line.hasPrefix("process_id:") {
            if let pid = pid_t(line.dropFirst("process_id:".count)) { return pid }
        }
        throw TestSupportError("no process_id in INFO: \(info)")
    }
}
