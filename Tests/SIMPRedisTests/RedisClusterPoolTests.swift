import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
@testable import SIMPRedis
import SIMPTestSupport
import Testing

/// Against a real Redis Cluster of 6 processes (3 masters, 3 replicas), one per test.
@Suite(.serialized) struct RedisClusterPoolTests {
    let cluster: RedisClusterProcess
    let pool: RedisClusterPool

    init() throws {
        cluster = try RedisClusterProcess()
        pool = RedisClusterPool(seeds: [RedisConfiguration(port: cluster.ports[0], connectTimeout: .milliseconds(500), commandTimeout: .seconds(2))])
    }

    /// Keys whose slots cover all three masters.
    private func keysOnEveryShard(_ count: Int) throws -> [String] {
        let keys = (0..<count).map { "key:\($0)" }
        let masters = Set(keys.compactMap { cluster.masterPort(forSlot: RedisCluster.hashSlot($0)) })
        #expect(masters.count == 3)
        return keys
    }

    /// (Replicas are listed by CLUSTER SLOTS only once every node has heard of them: not checked.)
    @Test func theSlotMapHasTheClustersThreeMasters() async throws {
        _ = try await pool.run(RedisCommand("PING"))
        let map = pool.slotMap
        #expect(map.shards.count == 3)
        for slot in [0, 5000, 5461, 12182, 16383] {
            #expect(map.master(forSlot: slot)?.port == cluster.masterPort(forSlot: slot))
        }
        await pool.shutdown()
    }

    /// Our hash slots are the cluster's own.
    @Test func slotsAgreeWithClusterKeyslot() throws {
        for key in ["foo", "{user1000}.following", "foo{}{bar}", "simp:{bob}:inbox", "a{b}c{d}"] {
            let reply = try cluster.command(port: cluster.ports[0], ["CLUSTER", "KEYSLOT", key])
            #expect(reply == ":\(RedisCluster.hashSlot(key))\r\n", "\(key)")
        }
    }

    @Test func onePipelineOverAllShardsAnswersInOrder() async throws {
        let keys = try keysOnEveryShard(60)
        let sets = keys.enumerated().map { RedisCommand("SET", [$0.element, "v\($0.offset)"]) }
        let gets = keys.map { RedisCommand("GET", [$0]) }
        let replies = try await pool.run(sets + [RedisCommand("PING")] + gets)
        #expect(replies.prefix(keys.count).allSatisfy { $0 == .status("OK") })
        #expect(replies[keys.count] == .status("PONG"))
        #expect(replies.suffix(keys.count).map(\.string) == keys.indices.map { "v\($0)" })
        // Each key is on its own slot's master.
        for key in keys.prefix(6) {
            let port = try #require(cluster.masterPort(forSlot: RedisCluster.hashSlot(key)))
            #expect(try cluster.command(port: port, ["GET", key]).contains("v"))
        }
        await pool.shutdown()
    }

    @Test func aScriptOnKeysOfOneHashTag() async throws {
        let script = RedisScript("redis.call('RPUSH', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])")
        var replies: [RedisValue] = []
        for user in ["alice", "bob", "carol", "dave"] {
            replies += try await pool.run([.script(script, keys: ["simp:{\(user)}:inbox", "simp:{\(user)}:seq"], args: ["m"]),
                                           .script(script, keys: ["simp:{\(user)}:inbox", "simp:{\(user)}:seq"], args: ["n"])])
        }
        #expect(replies.map(\.int) == Array(repeating: [Int64(1), 2], count: 4).flatMap { $0 })
        let inbox = try await pool.run(RedisCommand("LRANGE", ["simp:{bob}:inbox", 0, -1]))
        #expect(inbox.array?.compactMap(\.string) == ["m", "n"])
        await pool.shutdown()
    }

    /// A map that puts every slot on one master: the others answer MOVED, the commands are
    /// sent again to the right master, the map is corrected, and replies stay in order.
    @Test func movedRepliesAreFollowedAndCorrectTheMap() async throws {
        _ = try await pool.run(RedisCommand("PING"))
        let right = pool.slotMap
        var wrong = RedisSlotMap()
        wrong.assign(0...16383, to: right.shards[0])
        pool.replaceSlotMap(wrong)
        let keys = try keysOnEveryShard(30)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let replies = try await pool.run(keys.map { RedisCommand("INCR", [$0]) } + keys.map { RedisCommand("INCR", [$0]) }, on: loop).get()
        #expect(replies.map(\.int) == Array(repeating: Int64(1), count: keys.count) + Array(repeating: Int64(2), count: keys.count))
        for key in keys {
            let slot = RedisCluster.hashSlot(key)
            #expect(pool.slotMap.master(forSlot: slot) == right.master(forSlot: slot))
        }
        await pool.shutdown()
    }

    /// Futures complete on the caller's loop, also after redirects; many tasks on many loops
    /// share the pool.
    @Test func callersLoopsAndManyConcurrentCallers() async throws {
        _ = try await pool.run(RedisCommand("PING"))
        pool.replaceSlotMap(Self.everySlot(on: pool.slotMap.shards[0]))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loop = group.next()
        let keys = try keysOnEveryShard(9)
        let inLoop = try await pool.run(keys.map { RedisCommand("SET", [$0, "1"]) }, on: loop).map { _ in loop.inEventLoop }.get()
        #expect(inLoop)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for i in 0..<60 {
                tasks.addTask {
                    _ = try await pool.run([RedisCommand("SADD", ["{set}", i]), RedisCommand("INCR", [keys[i % keys.count]])],
                                           on: group.next()).get()
                }
            }
            try await tasks.waitForAll()
        }
        #expect(try await pool.run(RedisCommand("SCARD", ["{set}"])).int == 60)
        let total = try await pool.run(keys.map { RedisCommand("GET", [$0]) }).compactMap(\.int).reduce(0, +)
        #expect(total == Int64(keys.count + 60))
        await pool.shutdown()
        try await group.shutdownGracefully()
    }

    /// Requests made on one loop, over several shards, run in the order they were made, also
    /// while MOVED redirects are being followed.
    @Test func ordered200IncrsFromOneLoopAcrossShards() async throws {
        _ = try await pool.run(RedisCommand("PING"))
        // Every slot on a master that does not hold "ordered": its INCRs all meet MOVED first.
        let right = pool.slotMap.master(forSlot: RedisCluster.hashSlot("ordered"))
        var wrong = RedisSlotMap()
        wrong.assign(0...16383, to: try #require(pool.slotMap.shards.first { $0.master != right }))
        pool.replaceSlotMap(wrong)
        let keys = try keysOnEveryShard(12)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let futures = try await loop.submit {
            (0..<200).map { i in
                pool.run([RedisCommand("INCR", ["ordered"]), RedisCommand("INCR", [keys[i % keys.count]])], on: loop)
            }
        }.get()
        var values: [Int64] = []
        for future in futures { values.append(try await future.get()[0].int ?? -1) }
        #expect(values == (1...200).map { Int64($0) })
        #expect(pool.slotMap.master(forSlot: RedisCluster.hashSlot("ordered")) == right)
        await pool.shutdown()
    }

    /// A request made after the first MOVED came back, while an earlier request for the same
    /// slot still waits for its own MOVED, must not overtake it. (The earlier one went to a
    /// second wrong master, busy with a slow script.)
    @Test func aRequestMadeDuringRedirectsWaitsForEarlierOnes() async throws {
        _ = try await pool.run(RedisCommand("PING"))
        let right = pool.slotMap.master(forSlot: RedisCluster.hashSlot("ordered"))
        let others = pool.slotMap.shards.filter { $0.master != right }
        let wrong = Self.everySlot(on: others[0]), alsoWrong = Self.everySlot(on: others[1])
        let busy = "local t = redis.call('TIME') repeat local n = redis.call('TIME') until (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 200000"
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let (first, slow, second) = try await loop.submit {
            pool.replaceSlotMap(wrong)
            let first = pool.run([RedisCommand("INCR", ["ordered"])], on: loop)
            pool.replaceSlotMap(alsoWrong)
            return (first, pool.run([RedisCommand("EVAL", [busy, 0])], on: loop), pool.run([RedisCommand("INCR", ["ordered"])], on: loop))
        }.get()
        #expect(try await first.get()[0] == .integer(1))
        // The map is right by now; the second INCR is still behind the script on a wrong master.
        #expect(pool.slotMap.master(forSlot: RedisCluster.hashSlot("ordered")) == right)
        let third = pool.run([RedisCommand("INCR", ["ordered"])], on: loop)
        _ = try await slow.get()
        #expect(try await second.get()[0] == .integer(2))
        #expect(try await third.get()[0] == .integer(3))
        await pool.shutdown()
    }

    /// A slot being migrated: the source answers ASK for a key it does not hold; the command
    /// goes to the target after ASKING, and the map is left as it was.
    @Test func askRedirectsAreFollowedOnceWithoutChangingTheMap() async throws {
        _ = try await pool.run(RedisCommand("PING"))
        let key = "{migrating}:x"
        let slot = RedisCluster.hashSlot(key)
        let source = try #require(cluster.masterPort(forSlot: slot))
        let target = try #require(cluster.ports.first { $0 != source && cluster.masterPort(forSlot: slot) != $0 && isMaster($0) })
        let sourceID = try nodeID(source), targetID = try nodeID(target)
        #expect(try cluster.command(port: target, ["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID]).hasPrefix("+OK"))
        #expect(try cluster.command(port: source, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID]).hasPrefix("+OK"))
        let replies = try await pool.run([RedisCommand("SET", [key, "moved-in"]), RedisCommand("GET", [key])])
        #expect(replies == [.status("OK"), .bulk(Array("moved-in".utf8))])
        #expect(pool.slotMap.master(forSlot: slot)?.port == source)
        // The source never held it (it still sends it on): it went to the target.
        #expect(try cluster.command(port: source, ["EXISTS", key]).hasPrefix("-ASK"))
        await pool.shutdown()
    }

    /// A slot really moved to another master (as `redis-cli --cluster reshard` does it): the
    /// old master answers MOVED, the pool follows and keeps the new master in its map.
    @Test func aSlotMigratedWhileInUseIsFollowed() async throws {
        let key = "{migrated}:n"
        let slot = RedisCluster.hashSlot(key)
        #expect(try await pool.run(RedisCommand("INCR", [key])) == .integer(1))
        let source = try #require(cluster.masterPort(forSlot: slot))
        let target = try #require(cluster.ports.first { $0 != source && isMaster($0) })
        let sourceID = try nodeID(source), targetID = try nodeID(target)
        _ = try cluster.command(port: target, ["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID])
        _ = try cluster.command(port: source, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID])
        // Mid-migration the key is still on the source: served there.
        #expect(try await pool.run(RedisCommand("INCR", [key])) == .integer(2))
        #expect(try cluster.command(port: source, ["MIGRATE", "127.0.0.1", "\(target)", "", "0", "5000", "KEYS", key]).hasPrefix("+OK"))
        for port in [target, source] {
            #expect(try cluster.command(port: port, ["CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID]).hasPrefix("+OK"))
        }
        #expect(try await pool.run([RedisCommand("INCR", [key]), RedisCommand("INCR", [key])]) == [.integer(3), .integer(4)])
        #expect(pool.slotMap.master(forSlot: slot)?.port == target)
        await pool.shutdown()
    }

    /// SIGKILL a master: while its slots have no master, commands for them fail with a clear
    /// error; once its replica took over, the pool serves them again (the map is read again).
    @Test func aKilledMasterIsReplacedByItsReplica() async throws {
        let key = "{failover}:n"
        let slot = RedisCluster.hashSlot(key)
        #expect(try await pool.run(RedisCommand("SET", [key, "kept"])) == .status("OK"))
        // The replica has it before its master dies.
        #expect(try await pool.run(RedisCommand("WAIT", [1, 2000])) == .integer(1))
        let master = try #require(cluster.masterPort(forSlot: slot))
        // A key of another shard, pipelined with it: that part still runs while the slot has no master.
        let elsewhere = try #require((0..<100).map { "{live\($0)}:n" }.first { cluster.masterPort(forSlot: RedisCluster.hashSlot($0)) != master })
        cluster.kill9(port: master)
        var failures: [RedisError] = []
        let deadline = ContinuousClock.now + .seconds(20)
        var replies: [RedisValue] = []
        var attempts = 0
        while ContinuousClock.now < deadline {
            attempts += 1
            do {
                replies = try await pool.run([RedisCommand("INCR", [elsewhere]), RedisCommand("GET", [key])])
                // The other shard may still answer CLUSTERDOWN for a moment after the slot has a
                // master again: its INCR did not run, so try again.
                guard replies.contains(where: { if case .error = $0 { true } else { false } }) else { break }
            } catch {
                failures.append(error)
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(replies.last == .bulk(Array("kept".utf8)), "cluster: \(cluster.masterPort(forSlot: slot).map(String.init) ?? "no master"), pool: \(pool.slotMap.master(forSlot: slot).map(String.init(describing:)) ?? "none")")
        #expect(!failures.isEmpty)
        #expect(failures.allSatisfy { $0.isUnavailable }, "\(failures)")
        // Each failed pipeline says that some of it may have run: the other shard answered its
        // INCR (or refused it with CLUSTERDOWN while the cluster saw a slot without master).
        #expect(failures.allSatisfy { $0.mayHaveRun }, "\(failures)")
        #expect((1...attempts).contains(Int(replies.first?.int ?? 0)))
        #expect(pool.slotMap.master(forSlot: slot)?.port != master)
        #expect(try await pool.run(RedisCommand("INCR", ["{failover}:m"])) == .integer(1))
        await pool.shutdown()
    }

    /// WAIT follows each master's share of the pipeline: with one replica each, 1 is confirmed
    /// and 2 is not (the writes are done either way).
    @Test func waitingForReplicasOnEveryShard() async throws {
        let keys = try keysOnEveryShard(12)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let one = RedisReplicaWait(replicas: 1, timeout: .seconds(2))
        let replies = try await pool.run(keys.map { RedisCommand("SET", [$0, "w"]) }, on: loop, waitingFor: one).get()
        #expect(replies == Array(repeating: .status("OK"), count: keys.count))
        let two = RedisReplicaWait(replicas: 2, timeout: .milliseconds(100))
        do {
            _ = try await pool.run(keys.map { RedisCommand("SET", [$0, "x"]) }, on: loop, waitingFor: two).get()
            Issue.record("WAIT for 2 replicas succeeded with 1 each")
        } catch let error as RedisError {
            #expect(error.kind == .notReady && error.mayHaveRun, "\(error)")
        }
        #expect(try await pool.run(keys.map { RedisCommand("GET", [$0]) }).map(\.string) == Array(repeating: "x", count: keys.count))
        await pool.shutdown()
    }

    /// The cluster carries a PUBLISH to every node: a subscriber on any node hears it. The
    /// subscriber tries its nodes in turn (the first one here is not there).
    @Test func aPublishReachesASubscriberOnAnotherNode() async throws {
        let received = NIOLockedValueBox<[String]>([])
        let nowhere = RedisConfiguration(port: try freeTCPPort(), connectTimeout: .milliseconds(200))
        let subscriber = RedisSubscriber(configurations: [nowhere, RedisConfiguration(port: cluster.ports[5])], channels: ["node:1"],
                                         loop: MultiThreadedEventLoopGroup.singleton.next()) { channel, payload in
            received.withLockedValue { $0.append("\(channel) \(String(decoding: payload, as: UTF8.self))") }
        }
        subscriber.start()
        try await subscriber.subscribed.get()
        _ = try await pool.run([RedisCommand("SET", ["{bob}:inbox", "x"]), RedisCommand("PUBLISH", ["node:1", "for bob"])])
        let deadline = ContinuousClock.now + .seconds(5)
        while received.withLockedValue({ $0.isEmpty }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(received.withLockedValue { $0 } == ["node:1 for bob"])
        try await subscriber.stop().get()
        await pool.shutdown()
    }

    /// A sharded channel lives on its slot's master: the subscriber finds it through the pool,
    /// an SPUBLISH routed by the channel reaches it without the cluster bus, and when that
    /// master dies the subscriber follows the slot to the promoted replica.
    @Test func aShardedSubscriptionFollowsItsSlotToTheNewMaster() async throws {
        let channel = "simp:to-node:node-7"
        let received = NIOLockedValueBox<[String]>([])
        let pool = pool
        let subscriber = RedisSubscriber(shardedChannels: [channel], locate: { loop in
            pool.master(forKey: channel, on: loop).map { RedisConfiguration(host: $0.host, port: $0.port, connectTimeout: .milliseconds(300)) }
        }, loop: MultiThreadedEventLoopGroup.singleton.next()) { _, payload in
            received.withLockedValue { $0.append(String(decoding: payload, as: UTF8.self)) }
        }
        subscriber.start()
        try await subscriber.subscribed.get()
        #expect(try await pool.run(RedisCommand("SPUBLISH", [channel, "one"])).int == 1, "one subscriber, on the slot's master")

        let master = try #require(cluster.masterPort(forSlot: RedisCluster.hashSlot(channel)))
        cluster.kill9(port: master)
        // Until the replica is promoted and the subscriber has found it, nobody hears.
        let deadline = ContinuousClock.now + .seconds(30)
        var heard: Int64 = 0
        while heard == 0, ContinuousClock.now < deadline {
            heard = (try? await pool.run(RedisCommand("SPUBLISH", [channel, "two"])).int) ?? 0
            if heard == 0 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(heard == 1)
        #expect(cluster.masterPort(forSlot: RedisCluster.hashSlot(channel)) != master)
        while !received.withLockedValue({ $0.contains("two") }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(received.withLockedValue { $0.first } == "one")
        #expect(received.withLockedValue { $0.contains("two") })
        try await subscriber.stop().get()
        await pool.shutdown()
    }

    @Test func afterShutdownCallsFailClearly() async throws {
        _ = try await pool.run(RedisCommand("PING"))
        await pool.shutdown()
        await #expect(throws: RedisError.self) { try await pool.run(RedisCommand("GET", ["k"])) }
    }

    /// No seed answers: a clear error, not a hang.
    @Test func unreachableSeedsAreAnError() async throws {
        let nowhere = RedisClusterPool(seeds: [RedisConfiguration(port: try freeTCPPort(), connectTimeout: .milliseconds(300))])
        do {
            _ = try await nowhere.run(RedisCommand("GET", ["k"]))
            Issue.record("no error without a cluster")
        } catch {
            #expect(error.isUnavailable)
            #expect(error.message.contains("CLUSTER SLOTS"), "\(error)")
        }
        await nowhere.shutdown()
        await pool.shutdown()
    }

    private static func everySlot(on shard: RedisShard) -> RedisSlotMap {
        var map = RedisSlotMap()
        map.assign(0...16383, to: shard)
        return map
    }

    private func nodeID(_ port: Int) throws -> String {
        let reply = try cluster.command(port: port, ["CLUSTER", "MYID"])
        return String(reply.split(separator: "\r\n")[1])
    }

    private func isMaster(_ port: Int) -> Bool {
        (try? cluster.command(port: port, ["ROLE"]))?.contains("master") ?? false
    }
}
