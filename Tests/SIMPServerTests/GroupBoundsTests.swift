import Foundation
import NIOPosix
import SIMPClient
import SIMPCore
import SIMPRedis
import Testing

/// Bounded group fan-out (issue 46, finding 2): a member's unconfirmed group copies are bounded
/// apart from its one-to-one inbox (by `--inbox-limit`, counted apart);
/// past that, its copies are held and go on from the group's log once it confirms. Against a
/// real server and Redis.
@Suite(.serialized) struct GroupBoundsTests {
    /// The reviewer's attack, at `--inbox-limit 200 --inbox-share 50`: mallory floods a group
    /// with an offline victim in it. All 300 are accepted; the victim's inbox holds 200 of them,
    /// carol's one-to-one messages are still stored, and once the victim reads, the rest come,
    /// in the group's order, each once.
    @Test func aGroupFloodNeitherFillsTheInboxNorLosesTheGroupsOrder() async throws {
        let cluster = try await TestCluster.start {
            $0.inboxLimit = 200
            $0.inboxShare = 50
        }
        for user in ["victim", "mallory", "carol"] { try await cluster.register(user) }
        try cluster.letAnyoneAdd(["victim"])
        let (mallory, malloryLog) = try await cluster.connectedDevice("mallory", "main")
        let (carol, carolLog) = try await cluster.connectedDevice("carol", "main")
        try await mallory.createGroup("flood", members: ["victim"])
        var sent: [String] = []
        for index in 0..<300 { sent.append(try mallory.post(to: "#flood", text: "flood \(index)")) }
        #expect(await malloryLog.wait { Set($0.groupAccepted.map(\.id)).isSuperset(of: sent) })

        let redis = RedisPool(configuration: RedisConfiguration(port: cluster.redis.port))
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        func count(_ command: String, _ key: String) async throws -> Int64 {
            try await redis.run([RedisCommand(command, [key])], on: loop).get()[0].int ?? -1
        }
        #expect(try await count("ZCARD", "simp:{victim}:inbox") == 200, "the bound: the group's add and 199 messages")
        // Copies are recorded once the inbox is deep (25 entries at this bound, or a batch
        // would pass it): the records and the entries below where recording started make the bound.
        let since = try await redis.run([RedisCommand("GET", ["simp:{victim}:gsince"])], on: loop).get()[0].string.flatMap { Int64($0) }
        #expect(since.map { (1...25).contains($0) } == true)
        #expect(try await count("ZCARD", "simp:{victim}:gcopies") + (since ?? 0) == 200)
        #expect(try await redis.run([RedisCommand("GET", ["simp:{victim}:holds"])], on: loop).get()[0].string == "flood ")
        #expect(cluster.metric("simp_group_copies_held_total") >= 1)

        var direct: [String] = []
        for index in 0..<40 { direct.append(try carol.post(to: "victim", text: "direct \(index)")) }
        #expect(await carolLog.wait { Set($0.accepted).isSuperset(of: direct) })
        #expect(carolLog.failed.isEmpty, "the group's copies fill no part of the one-to-one inbox: \(carolLog.failed)")

        let (victim, victimLog) = try await cluster.connectedDevice("victim", "main")
        #expect(await victimLog.wait(timeout: .seconds(60)) { Set($0.groupMessages("flood").map(\.id)).isSuperset(of: sent) })
        let seen = victimLog.groupMessages("flood")
        #expect(seen.map(\.id) == sent, "every one, once, in the group's order")
        #expect(await victimLog.wait { Set($0.messages.map(\.id)).isSuperset(of: direct) })
        #expect(try await count("EXISTS", "simp:{victim}:holds") == 0, "nothing held once it read them all")
        #expect(cluster.metric("simp_group_copies_resumed_total") >= 1)
        await redis.shutdown()
        for client in [mallory, carol, victim] { await client.close() }
        await cluster.stop()
    }
}
