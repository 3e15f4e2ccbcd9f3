/// Server-side ordering of one session's sends: datagrams may arrive out of order or twice,
/// but messages are stored in the order the client numbered them (`clientSeq` 1, 2, 3 ...).
/// Early arrivals wait (bounded); a number the client withdrew is skipped.
public struct SendOrderGate<Item: Sendable>: Sendable {
    public enum Outcome: Sendable {
        /// Store these now, in this order.
        case release([Item])
        /// Already processed: store again (idempotent by message id) so the sender is answered again.
        case late(Item)
        /// The client withdrew this number before it arrived: refuse it.
        case withdrawn
        /// Waiting for an earlier number (or already waiting).
        case held
        /// Too many waiting: dropped, the client retransmits.
        case dropped
    }

    public private(set) var next: UInt64 = 1
    public let maxHeld: Int
    public let maxRemembered: Int
    private var held: [UInt64: Item] = [:]
    private var withdrawnAhead: Set<UInt64> = []
    private var withdrawnBehind: Set<UInt64> = []

    public init(maxHeld: Int = 1024, maxRemembered: Int = 1024) {
        self.maxHeld = maxHeld
        self.maxRemembered = maxRemembered
    }

    public var heldCount: Int { held.count }

    public mutating func receive(_ number: UInt64, _ item: Item) -> Outcome {
        if number < next { return withdrawnBehind.contains(number) ? .withdrawn : .late(item) }
        if withdrawnAhead.contains(number) { return .withdrawn }
        guard number == next else {
            if held[number] != nil { return .held }
            guard held.count < maxHeld else { return .dropped }
            held[number] = item
            return .held
        }
        next += 1
        return .release([item] + drain())
    }

    /// The client gave up on `number`. Returns true when it had not been processed (so the
    /// sender must be told it failed), and the held items this unblocks.
    public mutating func withdraw(_ number: UInt64) -> (wasPending: Bool, released: [Item]) {
        guard number >= next else { return (withdrawnBehind.contains(number), []) }
        held[number] = nil
        withdrawnAhead.insert(number)
        return (true, drain())
    }

    private mutating func drain() -> [Item] {
        var ready: [Item] = []
        while true {
            if let item = held.removeValue(forKey: next) {
                ready.append(item)
            } else if withdrawnAhead.remove(next) != nil {
                remember(next)
            } else {
                return ready
            }
            next += 1
        }
    }

    private mutating func remember(_ number: UInt64) {
        withdrawnBehind.insert(number)
        if withdrawnBehind.count > maxRemembered, let oldest = withdrawnBehind.min() {
            withdrawnBehind.remove(oldest)
        }
    }
}
