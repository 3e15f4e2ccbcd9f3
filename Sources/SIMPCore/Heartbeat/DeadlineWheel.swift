import NIOCore

/// A hashed timing wheel: entries are filed by the slot their deadline falls in, and a caller
/// that advances it at its resolution gets every entry that fell due. Filing and taking an
/// entry cost the same however many are filed, unlike a heap, whose every push and pop sifts
/// through all of them; 20,000 connections with two deadlines each made NIO's scheduled-task
/// heap a tenth of an idle server's CPU.
///
/// An entry is never removed early: the caller ignores entries it no longer knows, which is
/// why ids should not be reused. Pure: the caller supplies the time.
public struct DeadlineWheel<ID: Hashable & Sendable>: Sendable {
    public let resolution: TimeAmount
    private var slots: [Int64: [ID]] = [:]
    /// The first slot not yet handed out.
    private var nextSlot: Int64

    public init(resolution: TimeAmount, now: NIODeadline) {
        precondition(resolution.nanoseconds > 0, "a wheel needs a positive resolution")
        self.resolution = resolution
        nextSlot = Self.slot(containing: now, resolution: resolution) + 1
    }

    public var isEmpty: Bool { slots.isEmpty }
    public var count: Int { slots.values.reduce(0) { $0 + $1.count } }

    /// Files `id` so that it comes out of the first `advance(to:)` at or after `deadline`,
    /// and no earlier. A deadline already past comes out of the next advance.
    public mutating func schedule(_ id: ID, at deadline: NIODeadline) {
        let nanos = Int64(clamping: deadline.uptimeNanoseconds)
        let ceiling = nanos / resolution.nanoseconds + (nanos % resolution.nanoseconds == 0 ? 0 : 1)
        slots[max(ceiling, nextSlot), default: []].append(id)
    }

    /// Every entry whose deadline is at or before `now`, in slot order.
    public mutating func advance(to now: NIODeadline) -> [ID] {
        let current = Self.slot(containing: now, resolution: resolution)
        guard current >= nextSlot else { return [] }
        var due: [ID] = []
        if current - nextSlot < Int64(slots.count) {
            for slot in nextSlot...current {
                if let ids = slots.removeValue(forKey: slot) { due.append(contentsOf: ids) }
            }
        } else {
            // After a long stall, visiting the filled slots is cheaper than walking every slot.
            for slot in slots.keys.filter({ $0 <= current }).sorted() {
                due.append(contentsOf: slots.removeValue(forKey: slot) ?? [])
            }
        }
        nextSlot = current + 1
        return due
    }

    private static func slot(containing time: NIODeadline, resolution: TimeAmount) -> Int64 {
        Int64(clamping: time.uptimeNanoseconds) / resolution.nanoseconds
    }
}
