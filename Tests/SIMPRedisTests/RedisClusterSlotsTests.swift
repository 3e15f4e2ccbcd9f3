@testable import SIMPRedis
import Testing

@Suite struct RedisClusterSlotsTests {
    @Test func crc16IsXModem() {
        // The XMODEM check value, and the one Redis' cluster spec gives.
        #expect(RedisCluster.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(RedisCluster.crc16([UInt8]()) == 0)
    }

    @Test func slotsOfKnownKeys() {
        #expect(RedisCluster.hashSlot("foo") == 12182)
        #expect(RedisCluster.hashSlot("bar") == 5061)
        #expect(RedisCluster.hashSlot("hello") == 866)
        #expect(RedisCluster.hashSlot("123456789") == 12739)
    }

    @Test func aHashTagIsHashedInsteadOfTheKey() {
        let following = RedisCluster.hashSlot("{user1000}.following")
        #expect(following == RedisCluster.hashSlot("{user1000}.followers"))
        #expect(following == RedisCluster.hashSlot("user1000"))
        #expect(RedisCluster.hashSlot("simp:{bob}:inbox") == RedisCluster.hashSlot("bob"))
    }

    /// The first `{` and the next `}`; an empty tag hashes the whole key.
    @Test func hashTagEdgeCases() {
        #expect(RedisCluster.hashSlot("foo{}{bar}") == Int(RedisCluster.crc16(Array("foo{}{bar}".utf8)) & 0x3FFF))
        #expect(RedisCluster.hashSlot("foo{{bar}}zap") == RedisCluster.hashSlot("{bar"))
        #expect(RedisCluster.hashSlot("foo{bar}{zap}") == RedisCluster.hashSlot("bar"))
        #expect(RedisCluster.hashSlot("{unclosed") == Int(RedisCluster.crc16(Array("{unclosed".utf8)) & 0x3FFF))
        #expect(RedisCluster.hashSlot("") == 0)
    }

    @Test func nodeAddresses() {
        #expect(RedisNodeAddress("127.0.0.1:7000") == RedisNodeAddress(host: "127.0.0.1", port: 7000))
        #expect(RedisNodeAddress("10.0.0.1:7000@17000") == RedisNodeAddress(host: "10.0.0.1", port: 7000))
        #expect(RedisNodeAddress("::1:7000") == RedisNodeAddress(host: "::1", port: 7000))
        #expect(RedisNodeAddress(":7000") == nil)
        #expect(RedisNodeAddress("host:0") == nil)
        #expect(RedisNodeAddress("host") == nil)
    }

    @Test func redirects() {
        let node = RedisNodeAddress(host: "127.0.0.1", port: 6381)
        #expect(RedisRedirect(errorMessage: "MOVED 3999 127.0.0.1:6381") == .moved(slot: 3999, node: node))
        #expect(RedisRedirect(errorMessage: "ASK 3999 127.0.0.1:6381") == .ask(slot: 3999, node: node))
        #expect(RedisRedirect(.error("MOVED 16384 127.0.0.1:6381")) == nil)
        #expect(RedisRedirect(.error("ERR unknown command")) == nil)
        #expect(RedisRedirect(.bulk(Array("MOVED 1 h:1".utf8))) == nil)
    }

    @Test func clusterSlotsReply() throws {
        func node(_ host: String, _ port: Int) -> RedisValue {
            .array([.bulk(Array(host.utf8)), .integer(Int64(port)), .bulk(Array("id".utf8))])
        }
        let reply = RedisValue.array([
            .array([.integer(0), .integer(5460), node("127.0.0.1", 7000), node("127.0.0.1", 7003)]),
            .array([.integer(5461), .integer(10922), node("", 7001)]),
            .array([.integer(10923), .integer(16383), node("127.0.0.1", 7002), node("127.0.0.1", 7004)]),
        ])
        let asked = RedisNodeAddress(host: "10.1.1.1", port: 7001)
        let map = try RedisSlotMap(clusterSlots: reply, asked: asked)
        #expect(map.shards.count == 3)
        #expect(map.master(forSlot: 0) == RedisNodeAddress(host: "127.0.0.1", port: 7000))
        #expect(map.shard(forSlot: 5460)?.replicas == [RedisNodeAddress(host: "127.0.0.1", port: 7003)])
        #expect(map.master(forSlot: 5461) == asked)
        #expect(map.master(forSlot: 16383)?.port == 7002)
        #expect(map.nodes.count == 5)
        #expect(throws: RedisError.self) { try RedisSlotMap(clusterSlots: .array([.array([.integer(5)])]), asked: asked) }
    }

    @Test func clusterShardsReply() throws {
        func node(_ port: Int, _ role: String, _ health: String = "online") -> RedisValue {
            .array(["id", "x", "port", "\(port)", "ip", "127.0.0.1", "endpoint", "127.0.0.1", "role", role,
                    "replication-offset", "0", "health", health].map { RedisValue.bulk(Array($0.utf8)) })
        }
        func shard(_ slots: [Int], _ nodes: [RedisValue]) -> RedisValue {
            .array([.bulk(Array("slots".utf8)), .array(slots.map { .integer(Int64($0)) }), .bulk(Array("nodes".utf8)), .array(nodes)])
        }
        let reply = RedisValue.array([
            shard([0, 100, 200, 5460], [node(7003, "replica"), node(7000, "master")]),
            shard([101, 199, 5461, 16383], [node(7001, "master"), node(7004, "replica", "failed")]),
            shard([], [node(7005, "master")]),
        ])
        let map = try RedisSlotMap(clusterShards: reply, asked: RedisNodeAddress(host: "127.0.0.1", port: 7000))
        #expect(map.master(forSlot: 50)?.port == 7000)
        #expect(map.master(forSlot: 150)?.port == 7001)
        #expect(map.master(forSlot: 300)?.port == 7000)
        #expect(map.master(forSlot: 9000)?.port == 7001)
        #expect(map.shard(forSlot: 0)?.replicas.map(\.port) == [7003])
        #expect(map.shard(forSlot: 9000)?.replicas == [])
    }

    @Test func aMoveChangesOneSlot() {
        var map = RedisSlotMap()
        #expect(map.isEmpty && map.master(forSlot: 3) == nil)
        let a = RedisNodeAddress(host: "a", port: 1), b = RedisNodeAddress(host: "b", port: 1)
        map.assign(0...16383, to: RedisShard(master: a))
        map.move(slot: 3, to: b)
        #expect(map.master(forSlot: 2) == a && map.master(forSlot: 3) == b && map.master(forSlot: 4) == a)
    }
}

@Suite struct RedisRoutingTests {
    private func slot(_ key: String) -> RedisRoute { .slot(RedisCluster.hashSlot(key)) }

    @Test func theFirstKeyRoutes() {
        #expect(RedisCommand("SET", ["foo", "1"]).route == slot("foo"))
        #expect(RedisCommand("get", ["{bob}:x"]).route == slot("bob"))
        #expect(RedisCommand("MGET", ["a", "b"]).route == slot("a"))
        #expect(RedisCommand("XREADGROUP", ["GROUP", "g", "c", "COUNT", 1, "STREAMS", "s1", ">"]).route == slot("s1"))
        #expect(RedisCommand("OBJECT", ["ENCODING", "k"]).route == slot("k"))
        #expect(RedisCommand("SPUBLISH", ["chan", "m"]).route == slot("chan"))
    }

    @Test func scriptsRouteByTheirFirstKey() {
        let script = RedisScript("return 1")
        #expect(RedisCommand.script(script, keys: ["{bob}:seq", "{bob}:inbox"], args: [1]).route == slot("bob"))
        #expect(RedisCommand.script(script, keys: [], args: ["x"]).route == .anyNode)
        #expect(RedisCommand("EVAL", ["return 1", 1, "k", "arg"]).route == slot("k"))
        #expect(RedisCommand("EVALSHA", ["abc", 0, "arg"]).route == .anyNode)
        #expect(RedisCommand("ZUNION", [2, "z1", "z2"]).route == slot("z1"))
    }

    @Test func commandsWithoutKeysGoAnywhere() {
        for name in ["PING", "INFO", "PUBLISH", "script", "CLUSTER", "WAIT"] {
            #expect(RedisCommand(name, ["x"]).route == .anyNode, "\(name)")
        }
        #expect(RedisCommand("DEL").route == .anyNode)
    }
}

@Suite struct RedisClusterSplitTests {
    let a = RedisNodeAddress(host: "a", port: 1), b = RedisNodeAddress(host: "b", port: 1)

    private func map() -> RedisSlotMap {
        var map = RedisSlotMap()
        map.assign(0...8191, to: RedisShard(master: a))
        map.assign(8192...16383, to: RedisShard(master: b))
        return map
    }

    private func key(on node: RedisNodeAddress, _ n: Int) -> String {
        var i = n
        while true {
            let key = "k\(i)"
            if (RedisCluster.hashSlot(key) < 8192) == (node == a) { return key }
            i += 1
        }
    }

    /// Each master's commands keep their order; a keyless command rides with the keyed one
    /// before it (else after it).
    @Test func aPipelineSplitsByMasterInOrder() throws {
        let commands = [
            RedisCommand("PING"),
            RedisCommand("SET", [key(on: b, 0), "1"]),
            RedisCommand("SET", [key(on: a, 0), "2"]),
            RedisCommand("PUBLISH", ["chan", "x"]),
            RedisCommand("GET", [key(on: b, 100)]),
        ]
        let groups = try ClusterSplit.split(commands, by: map())
        #expect(groups.map(\.node) == [b, a])
        #expect(groups.map(\.indices) == [[0, 1, 4], [2, 3]])
    }

    @Test func keylessAloneGoesToTheFirstMasterAndNoMapIsAnError() throws {
        #expect(try ClusterSplit.split([RedisCommand("PING")], by: map()).map(\.node) == [a])
        #expect(throws: RedisError.self) { try ClusterSplit.split([RedisCommand("GET", ["k"])], by: RedisSlotMap()) }
        var partial = RedisSlotMap()
        partial.assign(0...10, to: RedisShard(master: a))
        do {
            _ = try ClusterSplit.split([RedisCommand("GET", [key(on: b, 0)])], by: partial)
            Issue.record("a slot without a master was routed")
        } catch {
            #expect(error.kind == .notReady && error.message.contains("no master serves slot"))
        }
    }

    @Test func repliesAreReassembledAndAFailedShardFailsThePipeline() throws {
        let groups: [(node: RedisNodeAddress, indices: [Int])] = [(a, [0, 2]), (b, [1])]
        let replies = try ClusterSplit.assemble([.success([.integer(0), .integer(2)]), .success([.integer(1)])], groups, count: 3)
        #expect(replies == [.integer(0), .integer(1), .integer(2)])
        do {
            _ = try ClusterSplit.assemble([.success([.integer(0), .integer(2)]), .failure(RedisError(.connectionFailed, "b: refused"))], groups, count: 3)
            Issue.record("no failure")
        } catch {
            #expect(error.kind == .connectionFailed && error.mayHaveRun)
        }
    }
}
