import NIOCore
import SIMPRedis

/// Stores held back per Redis shard while it has fewer replicas online than
/// `--redis-min-replicas`: the store script refuses them there (nothing written), so they wait
/// here, in order, until a probe finds the replicas back or they have waited `limit`. Shards
/// with their replicas are never held, so their recipients are not slowed. Pure: the router
/// feeds it refusals, probe answers and `now`, and carries out what it returns.
struct ShardHold<Item> {
    /// Where an item stood: the batch it came back in (`UInt64.max` for one held before it was
    /// sent) and its place there. Batches of several shards may come back out of order.
    struct Place: Comparable {
        var ticket: UInt64
        var index: Int

        static func < (a: Place, b: Place) -> Bool { (a.ticket, a.index) < (b.ticket, b.index) }
    }

    private struct Parked {
        var item: Item
        var place: Place
        var since: NIODeadline
    }

    private struct Held {
        var online: Int
        var items: [Parked] = []
    }

    /// How long a store may wait for its shard's replicas before it fails.
    let limit: TimeAmount
    private var shards: [RedisNodeAddress: Held] = [:]
    private var arrivals = 0

    init(limit: TimeAmount) {
        self.limit = limit
    }

    var isEmpty: Bool { shards.isEmpty }
    /// The shards held, with the replicas they had online when last asked.
    var held: [(shard: RedisNodeAddress, online: Int)] { shards.map { ($0.key, $0.value.online) } }

    func holds(_ shard: RedisNodeAddress) -> Bool { shards[shard] != nil }

    /// The shard holding an item `matching` picks, wherever it was held: after a failover the
    /// same recipient's new stores map to another address than its held ones.
    func shard(holding matching: (Item) -> Bool) -> RedisNodeAddress? {
        shards.first { $0.value.items.contains { matching($0.item) } }?.key
    }

    /// A shard that could not be asked (its master gone, say): its items come back to be
    /// stored, in order, and are held again wherever their shard is now, if it is short too.
    mutating func letGo(_ shard: RedisNodeAddress) -> [Item] {
        guard let held = shards.removeValue(forKey: shard) else { return [] }
        return held.items.sorted { $0.place < $1.place }.map(\.item)
    }

    /// A store its shard refused for want of replicas (from batch `ticket`, at `index`).
    mutating func refused(_ item: Item, shard: RedisNodeAddress, online: Int, ticket: UInt64, index: Int, now: NIODeadline) {
        shards[shard, default: Held(online: online)].online = online
        shards[shard]!.items.append(Parked(item: item, place: Place(ticket: ticket, index: index), since: now))
    }

    /// A new store for a shard already held: it waits behind the refused ones.
    mutating func hold(_ item: Item, shard: RedisNodeAddress, now: NIODeadline) {
        arrivals += 1
        shards[shard]?.items.append(Parked(item: item, place: Place(ticket: .max, index: arrivals), since: now))
    }

    /// A probe's answer: with `needed` replicas online the shard is let go, and its items come
    /// back to be stored, in the order they were made.
    mutating func probed(_ shard: RedisNodeAddress, online: Int, needed: Int) -> [Item] {
        guard shards[shard] != nil else { return [] }
        guard online >= needed else {
            shards[shard]!.online = online
            return []
        }
        let items = shards.removeValue(forKey: shard)!.items
        return items.sorted { $0.place < $1.place }.map(\.item)
    }

    /// Items that have waited `limit`, to fail, in order; their shards stay held.
    mutating func expired(now: NIODeadline) -> [(item: Item, online: Int)] {
        var due: [(place: Place, item: Item, online: Int)] = []
        for (shard, held) in shards {
            let (late, waiting) = held.items.split { now - $0.since >= limit }
            due += late.map { ($0.place, $0.item, held.online) }
            shards[shard]!.items = waiting
        }
        return due.sorted { $0.place < $1.place }.map { ($0.item, $0.online) }
    }

    /// Changes the held items that `matching` picks, on every shard.
    mutating func update(matching: (Item) -> Bool, _ change: (inout Item) -> Void) {
        for shard in shards.keys {
            for index in shards[shard]!.items.indices where matching(shards[shard]!.items[index].item) {
                change(&shards[shard]!.items[index].item)
            }
        }
    }
}

private extension Array {
    /// The elements that match, and those that do not, each in order.
    func split(_ matches: (Element) -> Bool) -> (matching: [Element], rest: [Element]) {
        var matching: [Element] = []
        var rest: [Element] = []
        for element in self {
            if matches(element) { matching.append(element) } else { rest.append(element) }
        }
        return (matching, rest)
    }
}
