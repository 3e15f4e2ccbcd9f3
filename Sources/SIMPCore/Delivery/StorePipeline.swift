/// Pure state of the server's store pipeline: messages wait in arrival order, leave in batches,
/// and up to `maxInFlight` batches are in Redis at once. All batches travel on one pipelined
/// connection, so Redis runs them in the order they left and sequence numbers follow arrival.
///
/// When a batch comes back with messages whose outcome is unknown (the connection broke after
/// they were sent), nothing more leaves until every batch in flight is back; then the pipeline
/// pauses (the caller waits, Redis may be restarting) and those messages go first, in their
/// original order, ahead of everything that arrived since.
public struct StorePipeline<Item>: Sendable where Item: Sendable {
    public let maxBatch: Int
    public let maxInFlight: Int
    private var queued: [Item] = []
    private var recovering: [Item] = []
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
    public mutating func nextBatch() -> [Item]? {
        guard !isPaused, inFlight < maxInFlight, !queued.isEmpty else { return nil }
        let batch = Array(queued.prefix(maxBatch))
        queued.removeFirst(batch.count)
        inFlight += 1
        return batch
    }

    public enum Next: Equatable, Sendable {
        /// Carry on: ask for the next batch.
        case proceed
        /// Batches are still in flight after an unknown outcome: wait for them.
        case waitForInFlight
        /// Every batch is back after an unknown outcome: wait a moment, then `resume()`.
        case pause
    }

    /// A batch came back; `retry` are its messages whose outcome is unknown, in batch order.
    public mutating func completed(retry: [Item]) -> Next {
        precondition(inFlight > 0, "a batch completed that was never sent")
        inFlight -= 1
        if !retry.isEmpty {
            isPaused = true
            recovering.append(contentsOf: retry)
        }
        guard isPaused else { return .proceed }
        return inFlight == 0 ? .pause : .waitForInFlight
    }

    /// After the pause: the messages of unknown outcome leave first, then the rest.
    public mutating func resume() {
        queued.insert(contentsOf: recovering, at: 0)
        recovering.removeAll()
        isPaused = false
    }
}
