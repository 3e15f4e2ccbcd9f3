/// Receipts for what the user sent from its other devices: this device shows their copies
/// (`IncomingMessage.fromDevice`), and the server tells every device of a sender when a
/// message is delivered. A copy may arrive after its receipt (the copy is stored after the
/// message, the recipient may confirm at once), so a receipt for a message not shown yet
/// waits, among the latest `capacity`. Each copy is reported delivered once. Pure.
struct CopyReceipts {
    struct Receipt: Equatable {
        var to: String
        var seq: UInt64
    }

    let capacity: Int
    /// Copies shown, not yet delivered: id to recipient.
    private var shown: [String: String] = [:]
    private var shownOrder: [String] = []
    /// Receipts for copies not shown yet.
    private var early: [String: Receipt] = [:]
    private var earlyOrder: [String] = []

    init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    /// A copy was shown: its receipt, if it came first.
    mutating func shown(id: String, to: String) -> Receipt? {
        if let receipt = early.removeValue(forKey: id) { return receipt }
        guard shown.updateValue(to, forKey: id) == nil else { return nil }
        for old in Self.remember(id, in: &shownOrder, capacity: capacity) { shown[old] = nil }
        return nil
    }

    /// A receipt for a message this device did not send: returned when its copy was shown
    /// (once), else kept for the copy.
    mutating func delivered(id: String, to: String, seq: UInt64) -> Receipt? {
        if shown.removeValue(forKey: id) != nil { return Receipt(to: to, seq: seq) }
        guard early.updateValue(Receipt(to: to, seq: seq), forKey: id) == nil else { return nil }
        for old in Self.remember(id, in: &earlyOrder, capacity: capacity) { early[old] = nil }
        return nil
    }

    /// Adds `id` to `order`; once it holds twice `capacity`, drops and returns the oldest
    /// (ids already settled among them are dropped again harmlessly).
    private static func remember(_ id: String, in order: inout [String], capacity: Int) -> ArraySlice<String> {
        order.append(id)
        guard order.count > 2 * capacity else { return [] }
        let dropped = order.prefix(order.count - capacity)
        order.removeFirst(dropped.count)
        return dropped
    }
}
