import SIMPCore

/// The recipient's side of long messages (docs/PROTOCOL.md, Long messages), pure: parts are
/// held until the last of a message is in, then handed over as one message. A message some
/// of whose parts never come (its sender's send of a later part failed) is never shown; the
/// oldest of more than `capacity` incomplete ones is dropped, so a sender cannot make a
/// client hold more than `capacity` times 64 KiB.
struct Reassembly {
    private struct Key: Hashable {
        var from: String
        var to: String
        var base: String
    }

    private struct Held {
        var count: Int
        var texts: [Int: String] = [:]
    }

    /// History pages (of up to 1,000 entries) searched for the earlier parts of a message
    /// whose first parts this client did not see (`SIMPClient.recoverParts`).
    static let recoveryPages = 3

    let capacity: Int
    private var held: [Key: Held] = [:]
    private var order: [Key] = []

    init(capacity: Int = 16) {
        self.capacity = capacity
    }

    /// Incomplete messages held.
    var count: Int { held.count }

    /// Whether the parts before this one must be read back: it is not the first, and nothing
    /// of its message is held (this client started after confirming them).
    func needsEarlierParts(_ message: IncomingMessage, as part: LongText.PartID) -> Bool {
        part.index > 1 && held[Key(from: message.from, to: message.to, base: part.base)] == nil
    }

    /// Takes a part; returns the whole message when this was its last missing part. The
    /// whole takes the place (seq, group order, store time) of the part that completed it.
    mutating func add(_ message: IncomingMessage, as part: LongText.PartID) -> IncomingMessage? {
        let key = Key(from: message.from, to: message.to, base: part.base)
        if held[key]?.count != part.count { start(key, count: part.count) }
        held[key]!.texts[part.index] = message.text
        guard let texts = held[key]?.texts, texts.count == part.count else { return nil }
        held[key] = nil
        order.removeAll { $0 == key }
        var whole = message
        whole.id = part.base
        whole.text = (1...part.count).map { texts[$0] ?? "" }.joined()
        whole.parts = part.count
        whole.part = nil
        return whole
    }

    private mutating func start(_ key: Key, count: Int) {
        if held.updateValue(Held(count: count), forKey: key) != nil { return }
        order.append(key)
        guard order.count > capacity else { return }
        held[order.removeFirst()] = nil
    }

    /// A page of stored messages (oldest first) with each long message whose parts are all in
    /// the page put together; parts of a message cut by the page's edge are left out.
    static func joined(_ page: [IncomingMessage]) -> [IncomingMessage] {
        var reassembly = Reassembly(capacity: .max)
        return page.compactMap { message in
            guard let part = message.part else { return message }
            return reassembly.add(message, as: part)
        }
    }
}

/// The sender's side of long messages, pure: the events of a message's parts become the
/// events of the message. Parts are stored in order (the session's order, or `OUT_OF_ORDER`
/// for one overtaken), and receipts are cumulative, so the last part accepted or confirmed
/// means the whole was; the failure of any part fails the whole, once, and silences the rest.
struct LongSends {
    let capacity: Int
    private var failed: Set<String> = []
    private var failedOrder: [String] = []

    init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    /// The event the application sees for `event`: itself when it is not about a part, nil
    /// while the whole has no news.
    mutating func fold(_ event: ClientEvent) -> ClientEvent? {
        switch event {
        case .accepted(let id, let to, let seq):
            return whole(id).map { .accepted(id: $0, to: to, seq: seq) }
        case .delivered(let id, let to, let seq):
            return whole(id).map { .delivered(id: $0, to: to, seq: seq) }
        case .groupAccepted(let id, let to, let seq, let recipients):
            return whole(id).map { .groupAccepted(id: $0, to: to, seq: seq, recipients: recipients) }
        case .memberDelivered(let id, let to, let member, let seq):
            return whole(id).map { .memberDelivered(id: $0, to: to, member: member, seq: seq) }
        case .read(let id, let from, let by):
            return whole(id).map { .read(id: $0, from: from, by: by) }
        case .failed(let id, let to, let reason):
            guard let part = LongText.PartID(id) else { return event }
            guard remember(part.base) else { return nil }
            return .failed(id: part.base, to: to, reason: "part \(part.index) of \(part.count): \(reason)")
        default:
            return event
        }
    }

    /// The id the application knows for an event about `id`: its own, or for the last part
    /// of a message that did not fail, the message's; nil for any other part.
    private func whole(_ id: String) -> String? {
        guard let shown = LongText.shownID(of: id), shown == id || !failed.contains(shown) else { return nil }
        return shown
    }

    /// Whether `base` failed for the first time.
    private mutating func remember(_ base: String) -> Bool {
        guard failed.insert(base).inserted else { return false }
        failedOrder.append(base)
        if failedOrder.count > capacity { failed.remove(failedOrder.removeFirst()) }
        return true
    }
}
