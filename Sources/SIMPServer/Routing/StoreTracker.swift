import NIOCore

/// The stores this node has under way (queued, in flight, retried or held for replicas) and
/// the latest store made in each conversation. Pure: the router passes the time.
struct StoreTracker {
    /// A message: its sender and id.
    struct Key: Hashable {
        let from: String
        let id: String

        init(_ request: StoreRequest) {
            from = request.from
            id = request.id
        }
    }

    /// One sending device's messages to one recipient: the order a sender's device keeps.
    struct Conversation: Hashable {
        let from: String
        let device: String
        let to: String

        init(_ request: StoreRequest) {
            from = request.from
            device = request.device
            to = request.to
        }
    }

    private var underWay: Set<Key> = []
    /// How many of those are for each recipient: one with none may get a message early.
    private var underWayFor: [String: Int] = [:]
    private var handedOver: UInt64 = 0
    /// With `--redis-min-replicas`: per conversation, the latest store made (its place) and
    /// when. Batches over several shards come back out of order, so a store refused for want
    /// of replicas may learn only now that a later message of its conversation was stored.
    private var latest: [Conversation: (place: UInt64, at: NIODeadline)] = [:]
    private var pruneAt = StoreTracker.pruneFloor
    /// A refusal comes back within a store's round trip; a minute covers any batch.
    static let latestKept = TimeAmount.seconds(60)
    static let pruneFloor = 10_000

    /// A store handed over: its place among this node's stores; nil when one of the same
    /// message is under way already (its outcome answers this one: a second copy could
    /// contradict it).
    mutating func begin(_ request: StoreRequest) -> UInt64? {
        guard underWay.insert(Key(request)).inserted else { return nil }
        handedOver += 1
        return handedOver
    }

    /// Whether a store for this recipient is under way (counted by `queued`).
    func othersBeingStored(for recipient: String) -> Bool { underWayFor[recipient] != nil }

    /// The store began goes to Redis (now or after its shard's replicas).
    mutating func queued(for recipient: String) {
        underWayFor[recipient, default: 0] += 1
    }

    /// Its outcome is final: a resend of it is a new store.
    mutating func settled(_ request: StoreRequest) {
        underWay.remove(Key(request))
        if let left = underWayFor[request.to] { underWayFor[request.to] = left > 1 ? left - 1 : nil }
    }

    /// It was stored: the latest of its conversation unless a later one was already.
    mutating func stored(_ request: StoreRequest, now: NIODeadline) {
        let conversation = Conversation(request)
        if request.place > latest[conversation]?.place ?? 0 { latest[conversation] = (request.place, now) }
        guard latest.count > pruneAt else { return }
        prune(now: now)
        pruneAt = max(Self.pruneFloor, latest.count * 2)
    }

    /// A later message of its conversation was stored.
    func isOvertaken(_ request: StoreRequest) -> Bool {
        latest[Conversation(request)].map { $0.place > request.place } ?? false
    }

    mutating func prune(now: NIODeadline) {
        latest = latest.filter { now - $0.value.at < Self.latestKept }
    }
}
