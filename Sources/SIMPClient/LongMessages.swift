import NIOCore
import SIMPCore

/// The recipient's side of long messages (docs/PROTOCOL.md, Long messages), pure: parts are
/// held until the last of a message is in, then handed over as one message. A message some
/// of whose parts never come (its sender's send of a later part failed) is never shown; the
/// oldest of more than `capacity` incomplete ones is dropped, so a sender cannot make a
/// client hold more than `capacity` times 64 KiB. Each sender has a share of `perSender`
/// of them: a sender over its share drops its own oldest, so the parts of messages one sender
/// starts and never finishes cannot push out another sender's.
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

    /// What a part received asks of the client (`take`).
    struct Taken {
        /// The whole message, when this was its last missing part.
        var whole: IncomingMessage?
        /// Read the message's earlier parts back from the history (`SIMPClient.recoverParts`).
        var recoverEarlierParts = false
    }

    /// History pages (of up to 1,000 entries) searched for the earlier parts of a message
    /// whose first parts this client did not see (`SIMPClient.recoverParts`).
    static let recoveryPages = 3
    /// One sender's share of the incomplete messages held. One session sends a long message's
    /// parts in order, so a sender has one incomplete at a time, or a few with several devices
    /// or a failed part: 4 of the 16 leave room for that and for three other senders' at once.
    static let perSenderShare = 4

    let capacity: Int
    let perSender: Int
    private var held: [Key: Held] = [:]
    /// Oldest first.
    private var order: [Key] = []
    /// How many history reads parts of unknown messages may start.
    private(set) var recoveries = PartRecoveryBudget()

    init(capacity: Int = 16, perSender: Int = Reassembly.perSenderShare) {
        self.capacity = capacity
        self.perSender = perSender
    }

    /// Incomplete messages held.
    var count: Int { held.count }

    /// Takes a part received at `now`: `add`, and when it is not the first and nothing of its
    /// message is held (this client started after confirming the earlier parts), whether to
    /// read those back, as far as `recoveries` allows.
    mutating func take(_ message: IncomingMessage, as part: LongText.PartID, now: NIODeadline) -> Taken {
        let unknown = part.index > 1 && held[Key(from: message.from, to: message.to, base: part.base)] == nil
        let recover = unknown && recoveries.admit(message.from, now: now)
        return Taken(whole: add(message, as: part), recoverEarlierParts: recover)
    }

    /// Takes a part; returns the whole message when this was its last missing part. The
    /// whole takes the place (seq, group order, store time) of the part that completed it.
    mutating func add(_ message: IncomingMessage, as part: LongText.PartID) -> IncomingMessage? {
        let key = Key(from: message.from, to: message.to, base: part.base)
        if held[key]?.count != part.count { start(key, count: part.count) }
        held[key]!.texts[part.index] = message.text
        guard let texts = held[key]?.texts, texts.count == part.count else { return nil }
        drop(key)
        var whole = message
        whole.id = part.base
        whole.text = (1...part.count).map { texts[$0] ?? "" }.joined()
        whole.parts = part.count
        whole.part = nil
        return whole
    }

    /// Holds `key` anew; a new one drops its sender's oldest when the sender is over its
    /// share, else the oldest of all when they are over `capacity`.
    private mutating func start(_ key: Key, count: Int) {
        if held.updateValue(Held(count: count), forKey: key) != nil { return }
        order.append(key)
        if order.count > perSender, let oldest = order.first(where: { $0.from == key.from }),
           order.count(where: { $0.from == key.from }) > perSender {
            drop(oldest)
        } else if order.count > capacity {
            drop(order[0])
        }
    }

    private mutating func drop(_ key: Key) {
        held[key] = nil
        order.removeAll { $0 == key }
    }

    /// A page of stored messages (oldest first) with each long message whose parts are all in
    /// the page put together; parts of a message cut by the page's edge are left out.
    static func joined(_ page: [IncomingMessage]) -> [IncomingMessage] {
        var reassembly = Reassembly(capacity: .max, perSender: .max)
        return page.compactMap { message in
            guard let part = message.part else { return message }
            return reassembly.add(message, as: part)
        }
    }
}

/// How many history reads the parts of long messages may start, pure (the caller passes the
/// time). A part of a message the client holds nothing of makes it read up to
/// `Reassembly.recoveryPages` history pages of 1,000 entries, and anyone who may message the
/// user can send such a part in one datagram, to every member of a group at once: without a
/// cap, one datagram from a sender becomes thousands of entries read on each member's
/// connection. Windows are fixed: a minute from the first recovery admitted in it.
struct PartRecoveryBudget {
    /// A client restarted while long messages were coming in needs one recovery per such
    /// message, rarely more than one per sender: 2 a minute leave room for a second, and bound
    /// what one sender can make each recipient read to 2 x 3 pages a minute.
    static let perSender = 2
    /// Over all senders: a restart in the middle of a few conversations' long messages
    /// recovers them all, and many senders together (or one person with many names) cost a
    /// recipient at most 6 x 3 pages a minute.
    static let overall = 6
    static let window = TimeAmount.seconds(60)

    private struct Window {
        var start: NIODeadline
        var count = 0
    }

    private var senders: [String: Window] = [:]
    private var all: Window?
    /// Recoveries refused for being over a cap: their messages are not shown (unless their
    /// earlier parts come again).
    private(set) var skipped = 0
    /// Recoveries admitted.
    private(set) var admitted = 0

    /// Whether a recovery for a part from `sender` may start at `now`; if so, it is counted.
    mutating func admit(_ sender: String, now: NIODeadline) -> Bool {
        var overall = Self.current(all, now: now)
        var own = Self.current(senders[sender], now: now)
        guard own.count < Self.perSender, overall.count < Self.overall else {
            skipped += 1
            return false
        }
        if senders[sender] == nil {
            // Windows that ended hold nothing: at most the senders admitted in the last minute stay.
            senders = senders.filter { now < $0.value.start + Self.window }
        }
        own.count += 1
        overall.count += 1
        senders[sender] = own
        all = overall
        admitted += 1
        return true
    }

    /// Senders with a window open (bounded by the recoveries admitted in it).
    var sendersTracked: Int { senders.count }

    /// `window` while it lasts at `now`, else a new one starting then.
    private static func current(_ window: Window?, now: NIODeadline) -> Window {
        guard let window, now < window.start + Self.window else { return Window(start: now) }
        return window
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
        case .failed(let id, let to, let reason, let code):
            guard let part = LongText.PartID(id) else { return event }
            guard remember(part.base) else { return nil }
            return .failed(id: part.base, to: to, reason: "part \(part.index) of \(part.count): \(reason)", code: code)
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
