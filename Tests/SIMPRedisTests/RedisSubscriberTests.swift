import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
@testable import SIMPRedis
import SIMPTestSupport
import Testing

@Suite(.serialized) struct RedisSubscriberTests {
    /// Collects what the subscriber hands over, so the test can wait for a message by content.
    final class Inbox: Sendable {
        private let received = NIOLockedValueBox<[String]>([])
        func add(_ channel: String, _ payload: [UInt8]) {
            received.withLockedValue { $0.append("\(channel) \(String(decoding: payload, as: UTF8.self))") }
        }
        var all: [String] { received.withLockedValue { $0 } }

        func waitFor(_ entry: String, within seconds: Double = 10) async throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(seconds)
            while ContinuousClock.now < deadline {
                if all.contains(entry) { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
    }

    @Test func messagesOnSubscribedChannelsArriveAndOthersDoNot() async throws {
        let server = try RedisServerProcess()
        let configuration = RedisConfiguration(port: server.port)
        let pool = RedisPool(configuration: configuration)
        let inbox = Inbox()
        let subscriber = RedisSubscriber(configuration: configuration, channels: ["a", "b"],
                                         loop: MultiThreadedEventLoopGroup.singleton.next(), onMessage: inbox.add)
        subscriber.start()
        try await subscriber.subscribed.get()
        #expect(try await pool.run(RedisCommand("PUBLISH", ["c", "not for us"])).int == 0)
        #expect(try await pool.run(RedisCommand("PUBLISH", ["a", "one"])).int == 1)
        #expect(try await pool.run(RedisCommand("PUBLISH", ["b", [0x68, 0x69]])).int == 1)
        #expect(try await inbox.waitFor("b hi"))
        // A connection answers in order, so "b hi" arriving means "a one" arrived before it.
        #expect(inbox.all == ["a one", "b hi"])
        try await subscriber.stop().get()
        await pool.shutdown()
    }

    /// After Redis restarts, the subscriber is back on its channels by itself.
    @Test func itSubscribesAgainAfterRedisRestarts() async throws {
        let server = try RedisServerProcess()
        let configuration = RedisConfiguration(port: server.port)
        let pool = RedisPool(configuration: configuration)
        let inbox = Inbox()
        let subscriber = RedisSubscriber(configuration: configuration, channels: ["node"],
                                         loop: MultiThreadedEventLoopGroup.singleton.next(), onMessage: inbox.add)
        subscriber.start()
        try await subscriber.subscribed.get()
        try server.restart()
        let deadline = ContinuousClock.now + .seconds(15)
        var receivers: Int64 = 0
        while receivers == 0, ContinuousClock.now < deadline {
            receivers = (try? await pool.run(RedisCommand("PUBLISH", ["node", "again"])).int) ?? 0
            if receivers == 0 { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(receivers == 1)
        #expect(try await inbox.waitFor("node again"))
        try await subscriber.stop().get()
        await pool.shutdown()
    }

    @Test func repliesOfASubscribedConnectionAreRead() throws {
        #expect(try PubSubReply(.array([.bulk(Array("subscribe".utf8)), .bulk(Array("x".utf8)), .integer(1)]))
                == .subscribed(channel: "x"))
        #expect(try PubSubReply(.array([.bulk(Array("message".utf8)), .bulk(Array("x".utf8)), .bulk([1, 2])]))
                == .message(channel: "x", payload: [1, 2]))
        #expect(throws: RedisError.self) { try PubSubReply(.error("ERR wrong")) }
        #expect(throws: RedisError.self) { try PubSubReply(.array([.bulk(Array("pong".utf8)), .null, .null])) }
    }
}
