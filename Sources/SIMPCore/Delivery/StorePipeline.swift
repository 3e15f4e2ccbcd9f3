/// Pure state of the server's store pipeline: messages wait in arrival order, leave in batches,
/// and up to `maxInFlight` batches are in Redis at once. All batches travel on one pipelined
/// connection, so Redis runs them in the order they left and sequence numbers follow arrival.
///
/// When a batch comes back with messages whose outcome is unknown (the connection broke after
/// they were sent), nothing more leaves until every batch in flight is back; then the pipeline
/// pauses (the caller waits, Redis may be restarting) and those messages go first, in the
/// order their batches left, ahead of everything that arrived since. The order they left in,
/// not the order they came back in: a broken connection may report a later batch first (NIO
/// fails a write still waiting in its buffer before the requests already sent).
public struct StorePipeline<Item>: Sendable where Item: Sendable {
    /// A batch on its way to Redis; `ticket` says when it left, for `completed`.
    public struct Batch: Sendable {
        public let ticket: UInt64
        public let items: [Item]
    }

    public let maxBatch: Int
    public let maxInFlight: Int
    private var queued: [Item] = []
    /// Unknown outcomes by the ticket of the batch they left in.
    private var recovering: [UInt64: [Item]] = [:]
    private var nextTicket: UInt64 = 0
    public private(set) var inFlight = 0
    /// Set from the first unknown outcome until `resume()`.
    public private(set) var isPaused = false

    public init(maxBatch: Int, maxInFlight: Int) {
        precondition(maxBatch > 0 && maxInFlight > 0, "a store pipeline needs room for one batch")
        self.maxBatch = maxBatch
        self.maxInFlight = maxInFlight
    }

    public var queuedCount: Int { queued.count }
    public var isIdle: Bool { queued.isEmpty && recovering.isEmpty && inFlight == 0 }

    public mutating func enqueue(_ item: Item) {
        queued.append(item)
    }

    /// The next batch to send, or nil when none may leave now.
    public mutating func nextBatch() -> Batch? {
        guard !isPaused, inFlight < maxInFlight, !queued.isEmpty else { return nil }
        let items = Array(queued.prefix(maxBatch))
        queued.removeFirst(items.count)
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

    /// After the pause: the messages of unknown outcome leave first, in the order their
    /// batches left, then the rest.
    public mutating func resume() {
        let again = recovering.keys.sorted().flatMap { recovering[$0]! }
        queued.insert(contentsOf: again, at: 0)
        recovering.removeAll()
        isPaused = false
    }
}
