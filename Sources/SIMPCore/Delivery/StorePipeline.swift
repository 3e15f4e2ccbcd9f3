import NIOCore

/// Pure state of the server's store pipeline: messages wait in lanes (one per sender), leave
/// in batches, and up to `maxInFlight` batches are in Redis at once. A batch takes one message
/// from each waiting lane in turn, so a sender with thousands queued delays another's message
/// by at most the batches already in flight, not by its whole queue. Within a lane messages
/// leave in arrival order; all batches travel on one pipelined connection, so Redis runs them
/// in the order they left and a sender's sequence numbers follow its arrival order.
///
/// When a batch comes back with messages whose outcome is unknown (the connection broke after
/// they were sent), nothing more leaves until every batch in flight is back; then the pipeline
/// pauses (the caller waits, Redis may be restarting) and those messages go first, ahead of
/// everything that arrived since. Messages that come back from a wait elsewhere (held for their
/// shard's replicas) go first too. Whatever goes first leaves in `place` order (the order the
/// caller handed the messages over), not the order they came back in: a broken connection may
/// report a later batch first (NIO fails a write still waiting in its buffer before the
/// requests already sent), and a held message may come back after a later one's retry.
public struct StorePipeline<Item, Lane>: Sendable where Item: Sendable, Lane: Hashable & Sendable {
    /// A batch on its way to Redis; `ticket` says when it left, for `completed`.
    public struct Batch: Sendable {
        public let ticket: UInt64
        public let items: [Item]
    }

    public let maxBatch: Int
    public let maxInFlight: Int
    /// Where an item stands in the order it was handed over (lower: earlier).
    private let place: @Sendable (Item) -> UInt64
    private let lane: @Sendable (Item) -> Lane
    /// Back from an unknown outcome or a hold: they leave before the lanes, by place.
    private var returned: [Item] = []
    private var lanes: [Lane: CircularBuffer<Item>] = [:]
    /// The lanes with messages, in the order they take their next turn.
    private var turns = CircularBuffer<Lane>()
    private var waitingInLanes = 0
    /// Unknown outcomes by the ticket of the batch they left in.
    private var recovering: [UInt64: [Item]] = [:]
    private var nextTicket: UInt64 = 0
    public private(set) var inFlight = 0
    /// Set from the first unknown outcome until `resume()`.
    public private(set) var isPaused = false

    public init(maxBatch: Int, maxInFlight: Int, place: @escaping @Sendable (Item) -> UInt64,
                lane: @escaping @Sendable (Item) -> Lane) {
        precondition(maxBatch > 0 && maxInFlight > 0, "a store pipeline needs room for one batch")
        self.maxBatch = maxBatch
        self.maxInFlight = maxInFlight
        self.place = place
        self.lane = lane
    }

    public var queuedCount: Int { returned.count + waitingInLanes }
    public var isIdle: Bool { returned.isEmpty && waitingInLanes == 0 && recovering.isEmpty && inFlight == 0 }

    public mutating func enqueue(_ item: Item) {
        let key = lane(item)
        if lanes[key] == nil {
            lanes[key] = CircularBuffer()
            turns.append(key)
        }
        lanes[key]!.append(item)
        waitingInLanes += 1
    }

    /// Items that waited outside the pipeline (held for their shard's replicas) go ahead of
    /// every lane, by place: a later message of the same conversation may have been
    /// queued, or sent and be waiting to go again, while they were away.
    public mutating func enqueueFirst(_ items: [Item]) {
        guard !items.isEmpty else { return }
        returned += items
        returned.sort { place($0) < place($1) }
    }

    /// The next batch to send, or nil when none may leave now.
    public mutating func nextBatch() -> Batch? {
        guard !isPaused, inFlight < maxInFlight, !returned.isEmpty || waitingInLanes > 0 else { return nil }
        var items = Array(returned.prefix(maxBatch))
        returned.removeFirst(items.count)
        while items.count < maxBatch, let key = turns.popFirst() {
            items.append(lanes[key]!.removeFirst())
            waitingInLanes -= 1
            if lanes[key]!.isEmpty { lanes[key] = nil } else { turns.append(key) }
        }
        inFlight += 1
        nextTicket += 1
        return Batch(ticket: nextTicket, items: items)
    }

    public enum Next: Equatable, Sendable {
        /// Carry on: ask for the next batch.
        case proceed
        /// Batches are still in flight after an unknown outcome: wait for them.
        case waitForInFlight
        /// Every batch is back after an unknown outcome: wait a moment, then `resume()`.
        case pause
    }

    /// The batch that left with `ticket` came back, in any order relative to the others;
    /// `retry` are its messages whose outcome is unknown, in batch order.
    public mutating func completed(_ ticket: UInt64, retry: [Item]) -> Next {
        precondition(inFlight > 0, "a batch completed that was never sent")
        inFlight -= 1
        if !retry.isEmpty {
            isPaused = true
            recovering[ticket] = retry
        }
        guard isPaused else { return .proceed }
        return inFlight == 0 ? .pause : .waitForInFlight
    }

    /// After the pause: the messages of unknown outcome leave first, by place, then the rest.
    public mutating func resume() {
        enqueueFirst(recovering.values.flatMap { $0 })
        recovering.removeAll()
        isPaused = false
    }
}
