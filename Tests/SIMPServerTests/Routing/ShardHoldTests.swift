import NIOCore
import SIMPRedis
import Testing
@testable import SIMPServer

@Suite struct ShardHoldTests {
    let a = RedisNodeAddress(host: "127.0.0.1", port: 7000)
    let b = RedisNodeAddress(host: "127.0.0.1", port: 7001)
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func onlyTheRefusingShardIsHeld() {
        var hold = ShardHold<String>(limit: .seconds(10))
        #expect(hold.isEmpty)
        hold.refused("m1", shard: a, online: 0, ticket: 1, index: 0, now: start)
        #expect(hold.holds(a) && !hold.holds(b))
        // A store for a shard not held is not taken.
        hold.hold("x", shard: b, now: start)
        #expect(hold.probed(b, online: 0, needed: 1) == [])
        #expect(hold.held.map(\.shard) == [a])
    }

    @Test func releasedInTheOrderTheyWereMadeOnceEnoughReplicasAreBack() {
        var hold = ShardHold<String>(limit: .seconds(10))
        // Batch 2 came back before batch 1 (it waited on another shard too).
        hold.refused("m3", shard: a, online: 0, ticket: 2, index: 0, now: start)
        hold.refused("m1", shard: a, online: 0, ticket: 1, index: 0, now: start)
        hold.refused("m2", shard: a, online: 0, ticket: 1, index: 4, now: start)
        hold.hold("m4", shard: a, now: start)
        hold.hold("m5", shard: a, now: start)
        #expect(hold.probed(a, online: 1, needed: 2) == [], "still short")
        #expect(hold.held.first?.online == 1)
        #expect(hold.probed(a, online: 2, needed: 2) == ["m1", "m2", "m3", "m4", "m5"])
        #expect(hold.isEmpty)
    }

    @Test func thoseThatWaitedTheLimitExpireAndTheShardStaysHeld() {
        var hold = ShardHold<String>(limit: .seconds(10))
        hold.refused("m1", shard: a, online: 0, ticket: 1, index: 0, now: start)
        hold.hold("m2", shard: a, now: start + .seconds(6))
        #expect(hold.expired(now: start + .seconds(9)).isEmpty)
        let due = hold.expired(now: start + .seconds(10))
        #expect(due.map(\.item) == ["m1"] && due.map(\.online) == [0])
        #expect(hold.holds(a))
        #expect(hold.expired(now: start + .seconds(16)).map(\.item) == ["m2"])
        // Held with nothing waiting: a new store still waits behind the shard.
        hold.hold("m3", shard: a, now: start + .seconds(17))
        #expect(hold.probed(a, online: 1, needed: 1) == ["m3"])
    }

    @Test func updateChangesTheMatchingItemsOnEveryShardAndLetGoReturnsAShardsItems() {
        var hold = ShardHold<String>(limit: .seconds(10))
        hold.refused("alice>bob", shard: a, online: 0, ticket: 1, index: 0, now: start)
        hold.refused("carol>bob", shard: a, online: 0, ticket: 1, index: 1, now: start)
        hold.refused("alice>dave", shard: b, online: 0, ticket: 1, index: 2, now: start)
        hold.update(matching: { $0.hasPrefix("alice>bob") }) { $0 += " (answer only)" }
        #expect(hold.probed(a, online: 1, needed: 1) == ["alice>bob (answer only)", "carol>bob"])
        #expect(hold.letGo(b) == ["alice>dave"])
        #expect(hold.isEmpty)
    }

    @Test func aRecipientsStoresAreFoundWhereverTheyWereHeld() {
        var hold = ShardHold<String>(limit: .seconds(10))
        hold.refused("bob", shard: a, online: 0, ticket: 1, index: 0, now: start)
        // The slot map changed: bob's shard is b now, yet his next store waits behind this one.
        #expect(hold.shard(holding: { $0 == "bob" }) == a)
        #expect(hold.shard(holding: { $0 == "carol" }) == nil)
    }
}
