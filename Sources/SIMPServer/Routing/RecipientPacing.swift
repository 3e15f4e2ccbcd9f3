import NIOCore

/// How many new recipients a user may write to (issue 46, finding 8): each answer to a
/// message to a user says whether that name exists (`accepted`, `NOT_A_CONTACT` and
/// `UNKNOWN_USER` alike), so writing to names one after another would list the users at
/// message rate. A user may write to at most `limit` recipients it has not written to before
/// (on this node, as far as it remembers) per `window`, whether they exist or not; a message
/// past that is refused `RATE_LIMITED` before anything is stored or looked up. Recipients
/// written to before cost nothing. Pure: the time is passed in.
struct RecipientPacing {
    let limit: Int
    let window: TimeAmount
    /// Recipients remembered per user (past it the oldest half is forgotten, and costs again).
    static let remembered = 128
    /// Users tracked; past it, those whose window is over are dropped.
    static let users = 20_000

    private struct Record {
        var windowStart: NIODeadline
        var count = 0
        var known: Set<String> = []
        /// The same, in the order first written to (the oldest are forgotten first).
        var order: [String] = []
    }

    private var records: [String: Record] = [:]

    init(limit: Int, window: TimeAmount = .hours(1)) {
        self.limit = limit
        self.window = window
    }

    /// Whether `user` may write to `recipient` now; counts it when it is new.
    mutating func admits(_ user: String, writingTo recipient: String, now: NIODeadline) -> Bool {
        var record = records[user] ?? Record(windowStart: now)
        if record.known.contains(recipient) { return true }
        if now - record.windowStart >= window {
            record.windowStart = now
            record.count = 0
        }
        guard record.count < limit else {
            records[user] = record
            return false
        }
        record.count += 1
        record.known.insert(recipient)
        record.order.append(recipient)
        if record.order.count > Self.remembered {
            record.known.subtract(record.order.prefix(Self.remembered / 2))
            record.order.removeFirst(Self.remembered / 2)
        }
        if records[user] == nil, records.count >= Self.users { prune(now: now) }
        records[user] = record
        return true
    }

    /// Drops the users whose window is over: what they are owed is a full window anyway.
    private mutating func prune(now: NIODeadline) {
        records = records.filter { now - $0.value.windowStart < window }
    }

    /// What a refused sender is told.
    func reason() -> String {
        "you wrote to \(limit) people you had not written to within the hour; wait before writing to someone new"
    }
}
