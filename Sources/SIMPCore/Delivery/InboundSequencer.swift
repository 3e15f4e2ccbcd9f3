/// Receiver-side de-duplication and ordering for one inbox: hands each sequence number
/// to the application exactly once and in order, holding a bounded number of early arrivals.
public struct InboundSequencer<Item: Sendable>: Sendable {
    public enum Outcome: Sendable {
        /// Already handed over: acknowledge again, do not deliver.
        case duplicate
        /// These items are now in order and go to the application, in this order.
        case deliver([Item])
        /// Arrived ahead of a gap; held until the gap fills.
        case buffered
        /// Ahead of a gap and the hold buffer is full: dropped, the sender will retransmit.
        case dropped
    }

    public private(set) var deliveredUpTo: UInt64
    public let maxBuffered: Int
    private var early: [UInt64: Item] = [:]
    /// The highest seq known to exist without having arrived (`expect`).
    public private(set) var expected: UInt64 = 0

    public init(deliveredUpTo: UInt64 = 0, maxBuffered: Int = 1024) {
        self.deliveredUpTo = deliveredUpTo
        self.maxBuffered = maxBuffered
    }

    public var bufferedCount: Int { early.count }

    public mutating func receive(seq: UInt64, item: Item) -> Outcome {
        if seq <= deliveredUpTo || early[seq] != nil { return .duplicate }
        guard seq == deliveredUpTo + 1 else {
            guard early.count < maxBuffered else { return .dropped }
            early[seq] = item
            return .buffered
        }
        var ready = [item]
        deliveredUpTo = seq
        while let next = early.removeValue(forKey: deliveredUpTo + 1) {
            ready.append(next)
            deliveredUpTo += 1
        }
        return .deliver(ready)
    }

    /// Messages up to `seq` exist and have not arrived (handed over, they could not be kept:
    /// a full disk): they are missing, as those below a message held are.
    public mutating func expect(upTo seq: UInt64) {
        expected = max(expected, seq)
    }

    /// Missing messages are known, below one held or up to `expected`.
    public var hasGap: Bool { !early.isEmpty || expected > deliveredUpTo }

    /// Sequence numbers known to be missing: above the delivered mark and below the highest one
    /// held, or up to `expected`.
    public func gaps(limit: Int = 64) -> [UInt64] {
        let highest = max(early.keys.max() ?? 0, expected == 0 ? 0 : expected + 1)
        guard highest > deliveredUpTo + 1 else { return [] }
        var result: [UInt64] = []
        var seq = deliveredUpTo + 1
        while seq < highest && result.count < limit {
            if early[seq] == nil { result.append(seq) }
            seq += 1
        }
        return result
    }

    /// Moves the delivered mark up when the server reports receipts this client gave earlier
    /// (e.g. before a restart). Never moves it down.
    public mutating func advance(to seq: UInt64) {
        guard seq > deliveredUpTo else { return }
        deliveredUpTo = seq
        early = early.filter { $0.key > seq }
    }
}
