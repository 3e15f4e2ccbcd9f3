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

    // Inlinable, so that the server's use of it is specialised for its item type: generic
    // code called across modules looked up type metadata on every call (4% of the server).
    public var next: UInt64 { nextNumber }
    @usableFromInline var nextNumber: UInt64 = 1
    public let maxHeld: Int
    public let maxRemembered: Int
    @usableFromInline var held: [UInt64: Item] = [:]
    /// The highest number held (0: none), so a gap scan need not search the held ones.
    @usableFromInline var highest: UInt64 = 0
    @usableFromInline var withdrawnAhead: Set<UInt64> = []
    @usableFromInline var withdrawnBehind: Set<UInt64> = []

    @inlinable
    public init(maxHeld: Int = 1024, maxRemembered: Int = 1024) {
        self.maxHeld = maxHeld
        self.maxRemembered = maxRemembered
    }

    @inlinable
    public var heldCount: Int { held.count }

    @inlinable
    public mutating func receive(_ number: UInt64, _ item: Item) -> Outcome {
        if number < nextNumber { return withdrawnBehind.contains(number) ? .withdrawn : .late(item) }
        if withdrawnAhead.contains(number) { return .withdrawn }
        guard number == nextNumber else {
            if held[number] != nil { return .held }
            guard held.count < maxHeld else { return .dropped }
            held[number] = item
            highest = max(highest, number)
            return .held
        }
        nextNumber += 1
        var released = [item]
        released += drain()
        return .release(released)
    }

    /// The highest number held, 0 when none is.
    public var highestHeld: UInt64 { highest }

    /// The numbers waited for below the highest one held, from `start` on (never below the
    /// next number), lowest first, at most `limit`: what the sender should resend (a burst
    /// loses several at once).
    @inlinable
    public func gaps(from start: UInt64 = 0, limit: Int = 64) -> [UInt64] {
        var gaps: [UInt64] = []
        var number = max(start, nextNumber)
        while number < highest, gaps.count < limit {
            if held[number] == nil, !withdrawnAhead.contains(number) { gaps.append(number) }
            number += 1
        }
        return gaps
    }

    /// The client gave up on `number`. Returns true when it had not been processed (so the
    /// sender must be told it failed), and the held items this unblocks.
    @inlinable
    public mutating func withdraw(_ number: UInt64) -> (wasWaiting: Bool, released: [Item]) {
        guard number >= nextNumber else { return (withdrawnBehind.contains(number), []) }
        held[number] = nil
        withdrawnAhead.insert(number)
        // A withdrawn highest stays the scan's end: the numbers below it are still waited for.
        return (true, drain())
    }

    @inlinable
    mutating func drain() -> [Item] {
        var ready: [Item] = []
        while true {
            if let item = held.removeValue(forKey: nextNumber) {
                ready.append(item)
            } else if withdrawnAhead.remove(nextNumber) != nil {
                remember(nextNumber)
            } else {
                if held.isEmpty { highest = 0 }
                return ready
            }
            nextNumber += 1
        }
    }

    @inlinable
    mutating func remember(_ number: UInt64) {
        withdrawnBehind.insert(number)
        if withdrawnBehind.count > maxRemembered, let oldest = withdrawnBehind.min() {
            withdrawnBehind.remove(oldest)
        }
    }
}
