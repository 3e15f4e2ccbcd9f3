import SIMPClient
/// The REPL's short numbers for the messages it sent (`#1`, `#2`, ... per run) and how far
/// each has got, so a status change prints as one short line and never runs backwards.
/// Pure: the REPL feeds it what it sent and the client's events.
public struct SentMarks: Sendable {
    public enum Stage: Int, Sendable, Comparable {
        case sent, accepted, delivered, read, failed

        public static func < (a: Stage, b: Stage) -> Bool { a.rawValue < b.rawValue }
    }

    /// A change worth a line: message `number` to `to` reached `stage` (at `member`, for a
    /// group member's delivered or read).
    public struct Change: Sendable, Equatable {
        public var number: Int
        public var to: String
        public var stage: Stage
        public var reason: String?
        public var member: String?

        public init(number: Int, to: String, stage: Stage, reason: String? = nil, member: String? = nil) {
            self.number = number
            self.to = to
            self.stage = stage
            self.reason = reason
            self.member = member
        }
    }

    /// A change of a message this run did not send (another device's, or one resent from the
    /// data directory): named by its id, and its recipient when the event said.
    public struct Unregistered: Sendable, Equatable {
        public var id: String
        public var to: String?
        public var stage: Stage
        public var reason: String?
        public var member: String?
    }

    private struct Entry {
        var number: Int
        var to: String
        var stage: Stage
        /// A group message's members who have it, and how far each got.
        var members: [String: Stage] = [:]
    }

    private struct Early {
        var stage: Stage
        var reason: String?
        var to: String?
        var member: String?
    }

    private var entries: [String: Entry] = [:]
    /// Changes that arrived before `register` (the event can overtake the send's return).
    private var early: [String: [Early]] = [:]
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
        let changes = (early.removeValue(forKey: id) ?? []).compactMap { update(id: id, to: $0.stage, reason: $0.reason, member: $0.member) }
        return (lastNumber, changes)
    }

    /// The change to show, or nil: a repeat, a step back (accepted after delivered), or a
    /// message not registered yet (kept until it is). `member`: the group member whose
    /// delivered or read it is; each member's shows once, in its own order.
    public mutating func update(id: String, to stage: Stage, reason: String? = nil, recipient: String? = nil,
                                member: String? = nil) -> Change? {
        guard var entry = entries[id] else {
            early[id, default: []].append(Early(stage: stage, reason: reason, to: recipient, member: member))
            return nil
        }
        if let member, stage == .delivered || stage == .read {
            return memberUpdate(&entry, id: id, stage: stage, member: member)
        }
        // Read only follows delivered; nothing follows read or failed.
        guard stage > entry.stage, entry.stage != .failed, entry.stage != .read, entry.stage != .delivered || stage == .read else { return nil }
        entry.stage = stage
        entries[id] = entry
        return Change(number: entry.number, to: entry.to, stage: stage, reason: reason)
    }

    private mutating func memberUpdate(_ entry: inout Entry, id: String, stage: Stage, member: String) -> Change? {
        guard entry.stage != .failed, stage > entry.members[member] ?? .accepted else { return nil }
        entry.members[member] = stage
        entry.stage = max(entry.stage, .delivered)
        entries[id] = entry
        return Change(number: entry.number, to: entry.to, stage: stage, member: member)
    }

    /// The recipient a registered message went to.
    public func recipient(of id: String) -> String? { entries[id]?.to }

    /// Changes for messages this run never registered (another device's, or resent from the
    /// data directory), so that no fate goes unshown. Called now and then: an id is handed over
    /// at the second call that finds it, which leaves a just-sent message time to be registered.
    public mutating func takeUnregistered() -> [Unregistered] {
        let ready = early.keys.filter(seenEarly.contains).sorted()
        let taken = ready.flatMap { id in
            early.removeValue(forKey: id)!.map { Unregistered(id: id, to: $0.to, stage: $0.stage, reason: $0.reason, member: $0.member) }
        }
        seenEarly = Set(early.keys)
        return taken
    }

    /// Sent this run and neither delivered nor failed yet.
    public var pendingCount: Int { entries.values.filter { $0.stage < .delivered }.count }

    public var sentCount: Int { entries.count }
}
