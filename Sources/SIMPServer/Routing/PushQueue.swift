import NIOCore
import SIMPCore

/// A message pushed to a recipient's session: its stored bytes (each resend is sealed again
/// under a new packet number) and who to tell once it is confirmed.
struct Push: Sendable {
    var bytes: [UInt8]
    var from: String
    var id: String
    /// The copy of a message its sender sent from another device, a group's membership
    /// change, or a notice of the server's: confirming it tells nobody.
    var isCopy = false
    /// A group message: the group and its place in the group's order (its sender hears which
    /// member confirmed it, by that place).
    var group: GroupPlace?
}

struct GroupPlace: Equatable, Sendable {
    var name: String
    var seq: UInt64
}

extension Push {
    /// The push of an inbox entry read back or copied from a group: what it says of itself.
    init(stored message: Simp_Message, bytes: [UInt8], recipient: String) {
        self.init(bytes: bytes, from: message.fromUser, id: message.messageID)
        guard let group = GroupName.addressed(by: message.toUser) else {
            isCopy = message.toUser != recipient || message.isNotice
            return
        }
        self.group = GroupPlace(name: group, seq: message.groupSeq)
        isCopy = message.fromUser == recipient || message.isGroupChange
    }
}

/// A push the recipient confirmed: the sender is told it was delivered.
struct ConfirmedPush: Equatable, Sendable {
    var seq: UInt64
    var from: String
    var id: String
    var isCopy = false
    var group: GroupPlace?
}

/// One session's pushes not yet confirmed by a receipt, when each is due again, and the ones
/// given up on while the path looked dead (parked: pushed again, in order, once a keepalive
/// shows the path works, instead of waiting for a reconnect). Pure: the caller supplies the time.
struct PushQueue {
    private var unconfirmed: RetransmitQueue<UInt64, Push>
    private var parked: [UInt64: Push] = [:]

    init(policy: RetransmitPolicy) {
        unconfirmed = RetransmitQueue(policy: policy)
    }

    var isEmpty: Bool { unconfirmed.isEmpty }
    var hasParked: Bool { !parked.isEmpty }
    func contains(_ seq: UInt64) -> Bool { unconfirmed.contains(seq) }

    /// Tracks a first push; false when the seq is already waiting (nothing to send).
    mutating func push(_ seq: UInt64, _ push: Push, now: NIODeadline) -> Bool {
        guard !unconfirmed.contains(seq) else { return false }
        unconfirmed.track(seq, payload: push, now: now)
        return true
    }

    struct Due {
        var resend: [[UInt8]] = []
        var parked = 0
    }

    /// What to send again now, in push order; what gave up is parked.
    mutating func due(now: NIODeadline) -> Due {
        let due = unconfirmed.due(now: now)
        for expired in due.expired { parked[expired.key] = expired.payload }
        return Due(resend: due.resend.map(\.payload.bytes), parked: due.expired.count)
    }

    /// The parked pushes, oldest first, to be pushed again; the park is emptied.
    mutating func unpark() -> [(seq: UInt64, push: Push)] {
        defer { parked.removeAll() }
        return parked.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// A cumulative receipt: everything up to `upTo` is confirmed. Returns the pushes it
    /// confirmed (parked ones too), in seq order.
    mutating func confirm(upTo: UInt64, now: NIODeadline) -> [ConfirmedPush] {
        var confirmed: [ConfirmedPush] = []
        for seq in unconfirmed.pendingKeys where seq <= upTo {
            if let push = unconfirmed.acknowledge(seq, now: now) { confirmed.append(ConfirmedPush(seq: seq, from: push.from, id: push.id, isCopy: push.isCopy, group: push.group)) }
        }
        if !parked.isEmpty {
            for (seq, push) in parked where seq <= upTo {
                parked[seq] = nil
                confirmed.append(ConfirmedPush(seq: seq, from: push.from, id: push.id, isCopy: push.isCopy, group: push.group))
            }
        }
        return confirmed.sorted { $0.seq < $1.seq }
    }

    /// The bytes to resend for the seqs a receiver reports missing, and the seqs this session
    /// never pushed (to be fetched from the inbox).
    func missing(_ seqs: some Sequence<UInt64>) -> (resend: [[UInt8]], unknown: [UInt64]) {
        var resend: [[UInt8]] = []
        var unknown: [UInt64] = []
        for seq in seqs {
            if let push = unconfirmed.peek(seq) { resend.append(push.bytes) } else { unknown.append(seq) }
        }
        return (resend, unknown)
    }

    /// Every waiting push becomes due at once: the path changed.
    mutating func expediteAll(now: NIODeadline) {
        unconfirmed.expediteAll(now: now)
    }
}
