import Foundation
import NIOCore
import SIMPClient
import SIMPTestSupport
import Testing

/// Redis with `appendfsync everysec` may lose its last second of writes on power loss, and
/// with them the last numbers it gave a recipient's messages. Numbers the recipient has seen
/// must not be given again: its client would take the new messages for ones it has (and
/// confirm them), and their senders would be told "delivered" for messages never shown.
/// These tests cut the AOF back to an earlier point, as that loss does.
@Suite(.serialized) struct NumberingTests {
    @Test func messagesStoredWhileTheRecipientIsAwayArePutPastWhatItHadSeen() async throws {
        let world = try await World.start()
        try await world.loseTheLastFiveMessagesFromRedis(recipientStaysConnected: false)
        let after = try await sendAll(world.alice, to: "bob", prefix: "after", count: 3)
        #expect(await world.aliceLog.wait { Set($0.accepted).isSuperset(of: after) })

        // bob comes back with what he had seen (seq 10, kept in his data directory).
        let bob = SIMPClient(configuration: world.bobConfiguration)
        let bobLog = EventLog(bob)
        try await bob.connect(user: "bob", password: "pw-bob")
        #expect(await bobLog.wait { $0.messages.count >= 3 })
        #expect(bobLog.messages.map(\.id) == after, "the three new messages, once, in order, and nothing he had")
        #expect(bobLog.messages.allSatisfy { $0.seq > 10 })
        #expect(await world.aliceLog.wait { Set($0.delivered).isSuperset(of: after) })
        world.expectNothingDeliveredThatBobDidNotGet(bobLog)
        #expect(world.cluster.metric("simp_messages_renumbered_total") == 3)
        await bob.close()
        await world.cleanUp()
    }

    /// A restart that lost nothing moves nothing: what bob saw stays seen, the new ones follow.
    @Test func aRestartThatLostNothingRenumbersNothing() async throws {
        let world = try await World.start()
        let seen = try await sendAll(world.alice, to: "bob", prefix: "seen", count: 5)
        #expect(await world.bobLog.wait { Set($0.messages.map(\.id)).isSuperset(of: seen) })
        await world.bob.close()
        try world.cluster.redis.restart()
        let after = try await sendAll(world.alice, to: "bob", prefix: "after", count: 3)
        #expect(await world.aliceLog.wait { Set($0.accepted).isSuperset(of: after) })
        let bob = SIMPClient(configuration: world.bobConfiguration)
        let bobLog = EventLog(bob)
        try await bob.connect(user: "bob", password: "pw-bob")
        #expect(await bobLog.wait { $0.messages.count >= 3 })
        #expect(bobLog.messages.map(\.id) == after)
        #expect(bobLog.messages.map(\.seq) == [6, 7, 8])
        #expect(world.cluster.metric("simp_messages_renumbered_total") == 0)
        await bob.close()
        await world.cleanUp()
    }

    @Test func aConnectedRecipientGetsNewNumbersAfterRedisLostWrites() async throws {
        let world = try await World.start()
        try await world.loseTheLastFiveMessagesFromRedis(recipientStaysConnected: true)
        let after = try await sendAll(world.alice, to: "bob", prefix: "after", count: 3)
        #expect(await world.bobLog.wait { $0.messages.count >= 13 })
        #expect(world.bobLog.messages.suffix(3).map(\.id) == after)
        #expect(world.bobLog.messages.suffix(3).allSatisfy { $0.seq > 10 })
        #expect(await world.aliceLog.wait { Set($0.delivered).isSuperset(of: after) })
        world.expectNothingDeliveredThatBobDidNotGet(world.bobLog)
        await world.bob.close()
        await world.cleanUp()
    }
}

/// alice and bob (bob with a data directory) on a server whose Redis can lose writes.
private final class World: @unchecked Sendable {
    let cluster: TestCluster
    let alice: SIMPClient
    let aliceLog: EventLog
    let bob: SIMPClient
    let bobLog: EventLog
    let bobConfiguration: ClientConfiguration
    private let directory: URL

    private init(cluster: TestCluster, alice: (SIMPClient, EventLog), bob: (SIMPClient, EventLog),
                 bobConfiguration: ClientConfiguration, directory: URL) {
        self.cluster = cluster
        (self.alice, self.aliceLog) = alice
        (self.bob, self.bobLog) = bob
        self.bobConfiguration = bobConfiguration
        self.directory = directory
    }

    static func start() async throws -> World {
        let cluster = try await TestCluster.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-bob-\(UUID().uuidString)")
        var configuration = cluster.clientConfiguration()
        configuration.dataDirectory = directory.path
        let bob = SIMPClient(configuration: configuration)
        let bobLog = EventLog(bob)
        try await bob.register(user: "bob", password: "pw-bob")
        try await bob.connect(user: "bob", password: "pw-bob")
        let alice = try await cluster.connectedClient("alice")
        return World(cluster: cluster, alice: alice, bob: (bob, bobLog), bobConfiguration: configuration, directory: directory)
    }

    /// bob gets and confirms 10 messages; Redis then comes back with only the first 5.
    func loseTheLastFiveMessagesFromRedis(recipientStaysConnected: Bool) async throws {
        let kept = try await sendAll(alice, to: "bob", prefix: "kept", count: 5)
        try await confirmed(kept, upTo: 5)
        let cut = try cluster.redis.writeLogSize()
        let lost = try await sendAll(alice, to: "bob", prefix: "lost", count: 5)
        try await confirmed(lost, upTo: 10)
        if !recipientStaysConnected {
            await bob.close()
            // Until the server has closed bob's session, stores pass its numbering floor; the
            // test is about stores made with no session of bob anywhere.
            let deadline = ContinuousClock.now + .seconds(10)
            while cluster.metric("simp_sessions") != 1, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(cluster.metric("simp_sessions") == 1, "only alice's session is left")
        }
        cluster.redis.kill9()
        try cluster.redis.dropWrites(after: cut)
        try cluster.redis.start()
        #expect(try redisInteger(["GET", "simp:{bob}:seq"]) == 5, "Redis lost the numbers 6 to 10")
    }

    private func confirmed(_ ids: [String], upTo mark: Int) async throws {
        #expect(await bobLog.wait { Set($0.messages.map(\.id)).isSuperset(of: ids) })
        #expect(await aliceLog.wait { Set($0.delivered).isSuperset(of: ids) })
        // The mark is written on the router's next tick; the cut must come after it.
        let deadline = ContinuousClock.now + .seconds(10)
        while try redisInteger(["GET", "simp:{bob}:acked"]) != mark, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try redisInteger(["GET", "simp:{bob}:acked"]) == mark)
    }

    func expectNothingDeliveredThatBobDidNotGet(_ later: EventLog, sourceLocation: SourceLocation = #_sourceLocation) {
        let received = Set(bobLog.messages.map(\.id) + later.messages.map(\.id))
        let unseen = Set(aliceLog.delivered).subtracting(received)
        #expect(unseen.isEmpty, "delivered but never shown to bob: \(unseen)", sourceLocation: sourceLocation)
    }

    private func redisInteger(_ command: [String]) throws -> Int? {
        // "$1\r\n5\r\n": the value is the second line.
        let lines = try cluster.redis.command(command).split(separator: "\r\n")
        return lines.count >= 2 ? Int(lines[1]) : nil
    }

    func cleanUp() async {
        await alice.close()
        await cluster.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
