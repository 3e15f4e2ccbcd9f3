import NIOCore
import NIOEmbedded
@testable import SIMPRedis
import Testing

/// The command timeout on an embedded loop, whose clock moves only when told: each request
/// fails at its own deadline, never at an earlier request's, and an answer in time wins.
/// (The tests against a real, paused Redis check only what kind of error comes back.)
@Suite struct RedisDeadlineTests {
    static let timeout = TimeAmount.milliseconds(400)

    final class Exchange {
        let loop = EmbeddedEventLoop()
        let channel: EmbeddedChannel

        init() throws {
            channel = EmbeddedChannel(handler: RedisChannelHandler(timeout: RedisDeadlineTests.timeout), loop: loop)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
        }

        /// Sends one PING; its future holds the reply or the error.
        func ping() throws -> EventLoopFuture<[RedisValue]> {
            var bytes = channel.allocator.buffer(capacity: 16)
            RedisWire.encode([Array("PING".utf8)], into: &bytes)
            let promise = loop.makePromise(of: [RedisValue].self)
            try channel.writeOutbound(RedisRequest(bytes: bytes, replies: 1, skip: 0, promise: promise))
            _ = try channel.readOutbound(as: ByteBuffer.self)
            return promise.futureResult
        }

        func answerPONG() throws {
            try channel.writeInbound(channel.allocator.buffer(string: "+PONG\r\n"))
        }

        func advance(_ amount: TimeAmount) {
            loop.advanceTime(by: amount)
        }
    }

    /// What became of a request so far. The embedded loop runs callbacks on the test's own
    /// thread, at once, so the box is never shared between threads.
    static func outcome(_ future: EventLoopFuture<[RedisValue]>) -> Result<[RedisValue], RedisError>? {
        final class Seen: @unchecked Sendable {
            var result: Result<[RedisValue], RedisError>?
        }
        let seen = Seen()
        future.whenComplete { result in seen.result = result.mapError { $0 as? RedisError ?? RedisError(.io, "\($0)") } }
        return seen.result
    }

    @Test func anAnswerBeforeTheDeadlineSucceeds() throws {
        let exchange = try Exchange()
        let ping = try exchange.ping()
        exchange.advance(.milliseconds(399))
        try exchange.answerPONG()
        exchange.advance(.seconds(5))
        #expect(try Self.outcome(ping)?.get() == [.status("PONG")])
        #expect(exchange.channel.isActive, "an answered request leaves no timer behind")
    }

    @Test func aRequestUnansweredAtItsDeadlineFailsAsATimeoutAndClosesTheConnection() throws {
        let exchange = try Exchange()
        let ping = try exchange.ping()
        exchange.advance(.milliseconds(399))
        #expect(Self.outcome(ping) == nil, "not failed a millisecond early")
        exchange.advance(.milliseconds(1))
        guard case .failure(let error) = Self.outcome(ping) else {
            Issue.record("no timeout at the deadline")
            return
        }
        #expect(error.kind == .timeout && error.mayHaveRun)
        #expect(!exchange.channel.isActive)
    }

    /// The first request was answered at 0 ms; the second, sent at 200 ms, fails at 600 ms:
    /// not at 400 ms (the first's deadline), and not never.
    @Test func aLaterRequestFailsAtItsOwnDeadline() throws {
        let exchange = try Exchange()
        let first = try exchange.ping()
        try exchange.answerPONG()
        #expect(try Self.outcome(first)?.get() == [.status("PONG")])
        exchange.advance(.milliseconds(200))
        let second = try exchange.ping()
        exchange.advance(.milliseconds(399))
        #expect(Self.outcome(second) == nil, "failed at the first request's deadline")
        exchange.advance(.milliseconds(1))
        guard case .failure(let error) = Self.outcome(second) else {
            Issue.record("no timeout at its own deadline")
            return
        }
        #expect(error.kind == .timeout)
    }

    /// Requests pipelined behind an unanswered one fail with it when it times out: the
    /// connection is gone, and each may have run.
    @Test func requestsBehindATimedOutOneFailWithIt() throws {
        let exchange = try Exchange()
        let first = try exchange.ping()
        exchange.advance(.milliseconds(100))
        let second = try exchange.ping()
        exchange.advance(.milliseconds(300))
        for ping in [first, second] {
            guard case .failure(let error) = Self.outcome(ping) else {
                Issue.record("still waiting after the oldest timed out")
                continue
            }
            #expect(error.kind == .timeout && error.mayHaveRun)
        }
    }
}
