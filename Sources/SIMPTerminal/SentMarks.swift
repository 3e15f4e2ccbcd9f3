import SIMPClient
/// The REPL's short numbers for the messages it sent (`#1`, `#2`, ... per run) and how far
/// each has got, so a status change prints as one short line and never runs backwards.
/// Pure: the REPL feeds it what it sent and the client's events.
public struct SentMarks: Sendable {
    public enum Stage: Int, Sendable, Comparable {
        case sent, accepted, delivered, read, failed

        public static func < (a: Stage, b: Stage) -> Bool { a.rawValue < b.rawValue }
    }

    /// A change worth a line: message `number` to `to` reached `stage`.
    public struct Change: Sendable, Equatable {
        public var number: Int
        public var to: String
        public var stage: Stage
        public var reason: String?

        public init(number: Int, to: String, stage: Stage, reason: String? = nil) {
            self.number = number
            self.to = to
            self.stage = stage
            self.reason = reason
        }
    }

    private struct Entry {
        var number: Int
        var to: String
        var stage: Stage
    }

    private var entries: [String: Entry] = [:]
    /// Changes that arrived before `register` (the event can overtake the send's return).
    private var early: [String: [(Stage, String?)]] = [:]
    /// Early ids a `takeUnregistered` has already seen once.
    private var seenEarly: Set<String> = []
    private var lastNumber = 0

    public init() {}

    /// Numbers a message just sent; returns its number and any changes that came first.
    public mutating func register(id: String, to: String) -> (number: Int, changes: [Change]) {
        if let known = entries[id] { return (known.number, []) }
        lastNumber += 1
        entries[id] = Entry(number: lastNumber, to: to, stage: .sent)
        seenEarly.remove(id)
        let changes = (early.removeValue(forKey: id) ?? []).compactMap { update(id: id, to: $0.0, reason: $0.1) }
        return (lastNumber, changes)
    }

    /// The change to show, or nil: a repeat, a step back (accepted after delivered), or a
    /// message not registered yet (kept until it is).
    public mutating func update(id: String, to stage: Stage, reason: String? = nil) -> Change? {
        guard var entry = entries[id] else {
            early[id, default: []].append((stage, reason))
            return nil
        }
        // Read only follows delivered; nothing follows read or failed.
        guard stage > entry.stage, entry.stage != .failed, entry.stage != .read, entry.stage != .delivered || stage == .read else { return nil }
        entry.stage = stage
        entries[id] = entry
        return Change(number: entry.number, to: entry.to, stage: stage, reason: reason)
    }

    /// Changes for messages this run never registered (resent from the data directory), so
    /// that no fate goes unshown. Called now and then: an id is handed over at the second call
    /// that finds it, which leaves a just-sent message time to be registered.
    public mutating func takeUnregistered() -> [(id: String, stage: Stage, reason: String?)] {
        let ready = early.keys.filter(seenEarly.contains).sorted()
        let taken = ready.flatMap { id in early.removeValue(forKey: id)!.map { (id: id, stage: $0.0, reason: $0.1) } }
        seenEarly = Set(early.keys)
        return taken
    }

    /// Sent this run and neither delivered nor failed yet.
    public var pendingCount: Int { entries.values.filter { $0.stage < .delivered }.count }

    public var sentCount: Int { entries.count }
}
