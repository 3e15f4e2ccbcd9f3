import NIOCore
import SIMPCore
import SIMPRedis

/// One entry of a group's order as it is copied into a member's inbox.
struct GroupEntry: Equatable, Sendable {
    enum Kind: String, Sendable {
        /// It adds the member: their copies may start here after a gap (while they were out).
        case added = "a"
        /// It removes the member (removed, or left): nothing after it is theirs.
        case removed = "r"
        /// A message, or someone else's change.
        case other = "m"
    }

    var seq: UInt64
    var kind: Kind
    /// For an add: the place of the member's latest removal before it (0: none). While they
    /// are out, it may follow a gap only once their copies reached that place: else an entry
    /// from their earlier membership would be passed over.
    var after: UInt64 = 0
    /// The log no longer holds what came before it for this member (trimmed): it may follow a gap.
    var afterTrim = false
    /// A message's sender ('' for a membership change): a member who blocked it is not given
    /// the message (`Scripts.groupDeliver`).
    var sender = ""
    var bytes: [UInt8]

    /// The kind as `Scripts.groupDeliver` takes it.
    var scriptKind: String { kind.rawValue + (kind == .added ? " \(after)" : "") + (afterTrim ? "j" : "") }
}

/// The decisions of a group's delivery, pure: who gets which entries, and what a sender hears.
enum GroupFanout {
    /// A stored batch's entries go to every member after it (the sender too: the copy its
    /// other devices show, which the sending device confirms without showing).
    static func messageEntries(_ stored: [(seq: UInt64, bytes: [UInt8])], members: [String]) -> [String: [GroupEntry]] {
        let entries = stored.sorted { $0.seq < $1.seq }.map {
            GroupEntry(seq: $0.seq, kind: .other, sender: sender(of: $0.bytes), bytes: $0.bytes)
        }
        guard !entries.isEmpty else { return [:] }
        return Dictionary(uniqueKeysWithValues: members.map { ($0, entries) })
    }

    /// Who sent a message entry ('' for a membership change, or bytes that are no message).
    static func sender(of bytes: [UInt8]) -> String {
        guard let message = try? Simp_Message(serializedBytes: bytes), !message.isGroupChange else { return "" }
        return message.fromUser
    }

    /// A change's entries go to the members after it and to those it removed (who learn so).
    /// One call's changes all add or all remove: someone it adds gets the entries from their
    /// own on, someone it removes those up to their own.
    static func changeEntries(_ changes: [GroupChangeMade], members: [String]) -> [String: [GroupEntry]] {
        let ordered = changes.sorted { $0.seq < $1.seq }
        let subjects = Dictionary(ordered.map { ($0.user, $0) }, uniquingKeysWith: { first, _ in first })
        var plan: [String: [GroupEntry]] = [:]
        for member in Set(members).union(subjects.keys) {
            let own = subjects[member]
            for change in ordered {
                let kind: GroupEntry.Kind = change.user == member ? (change.removes ? .removed : .added) : .other
                if let own, kind == .other, own.removes ? change.seq > own.seq : change.seq < own.seq { continue }
                plan[member, default: []].append(GroupEntry(seq: change.seq, kind: kind, after: kind == .added ? change.after : 0,
                                                            bytes: change.bytes))
            }
        }
        return plan
    }

    /// What a member's copy lacks after `mark`, from the log (oldest first): walking the order
    /// from whether they were a member at the mark, the entries that were theirs. The first
    /// one follows a gap when the log no longer starts right after the mark.
    static func missing(for member: String, after mark: UInt64, isMember: Bool, log: [(seq: UInt64, bytes: [UInt8])]) -> [GroupEntry] {
        var inside = isMember
        var out: [GroupEntry] = []
        // An add in the walk may follow the gap of their time out: the walk has everything before it.
        var lastOut = mark
        for (seq, bytes) in log.sorted(by: { $0.seq < $1.seq }) where seq > mark {
            let message = try? Simp_Message(serializedBytes: bytes)
            var kind = GroupEntry.Kind.other
            if let message, message.isGroupChange, message.content == member {
                kind = message.type == .groupAdded ? .added : .removed
            }
            guard inside || kind == .added else { continue }
            out.append(GroupEntry(seq: seq, kind: kind, after: kind == .added ? lastOut : 0,
                                  afterTrim: out.isEmpty && seq != mark + 1 && kind != .added,
                                  sender: message.map { $0.isGroupChange ? "" : $0.fromUser } ?? "", bytes: bytes))
            if kind == .added { inside = true } else if kind == .removed { inside = false; lastOut = seq }
        }
        return out
    }

    /// Redis could not be asked (a restart, a failover): a group's store or copy is tried again
    /// every `retryDelay` for up to `retryFor` after its first failure.
    static let retryDelay = TimeAmount.milliseconds(200)
    static let retryFor = TimeAmount.seconds(30)

    static func retries(since first: NIODeadline?, now: NIODeadline) -> Bool {
        guard let first else { return true }
        return now - first < retryFor
    }

    /// The sender's answers once a message is in every member's inbox.
    static func answers(id: String, group: String, outcome: GroupStoreOutcome, recipients: Int) -> [Simp_Envelope] {
        let to = GroupName.address(group)
        switch outcome {
        case .stored(let seq, _), .duplicate(let seq, _):
            var accepted = Simp_Accepted()
            accepted.messageID = id
            accepted.toUser = to
            accepted.seq = seq
            accepted.recipients = UInt32(max(0, recipients))
            return [Simp_Envelope(.accepted(accepted))]
        case .noSuchGroup:
            return [failed(id, to, .noSuchGroup, "no such group: \(to)")]
        case .notAMember:
            return [failed(id, to, .notAMember, "you are not a member of \(to)")]
        case .notStored:
            return [failed(id, to, .storeUnavailable, "this message was never stored; send it again as a new message")]
        case .unavailable(let error):
            return [failed(id, to, .storeUnavailable, "the message store is unavailable (\(error)); send it again")]
        }
    }

    private static func failed(_ id: String, _ to: String, _ code: Simp_ErrorCode, _ reason: String) -> Simp_Envelope {
        Simp_Envelope(.failed(Simp_Failed(messageID: id, to: to, code: code, reason: reason)))
    }
}

/// A membership change the group's script made: its place in the order, whom it concerns,
/// whether it removes them, and its entry's bytes (with `groupSeq`).
struct GroupChangeMade: Equatable, Sendable {
    var seq: UInt64
    var user: String
    var removes: Bool
    /// For an add: the place of the user's latest removal (0: none).
    var after: UInt64 = 0
    var bytes: [UInt8]
}

extension GroupStoreOutcome {
    /// It has a place in the group's order (its answer waits for its copies).
    var isNumbered: Bool {
        switch self {
        case .stored, .duplicate: true
        default: false
        }
    }
}

enum GroupStoreOutcome: Sendable {
    /// Numbered now: its place and its entry (with `groupSeq`).
    case stored(seq: UInt64, entry: [UInt8])
    /// Stored before (its first answer lost): delivered again from its entry.
    case duplicate(seq: UInt64, entry: [UInt8])
    case noSuchGroup
    case notAMember
    case notStored
    case unavailable(RedisError)
}
