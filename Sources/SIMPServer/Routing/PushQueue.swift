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
        // A notice tells nobody of its delivery (a group's READ notice names the group too).
        guard !message.isNotice, let group = GroupName.addressed(by: message.toUser) else {
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

/// One session's pushes: those waiting for the congestion window or the pacing (unsent, and
/// lost ones to send again, first), those sent and not yet confirmed by a receipt with when
/// each is due again, and the ones given up on while the path looked dead (parked: pushed
/// again, in order, once a keepalive shows the path works, instead of waiting for a
/// reconnect). Everything sent goes through one `CongestionController`: first pushes,
/// catch-up, resends on timeout and on a receipt's `missing` list. Pure: the caller supplies
/// the time.
struct PushQueue {
    private var unconfirmed: RetransmitQueue<UInt64, Push>
    private var parked: [UInt64: Push] = [:]
    private var unsent: [UInt64: Push] = [:]
    private var unsentOrder = CircularBuffer<UInt64>()
    /// Sent, found lost, not yet sent again: out of flight, waiting for the window.
    private var lostSeqs: Set<UInt64> = []
    private var lostOrder = CircularBuffer<UInt64>()
    /// Found lost once (sent again or about to be): no RTT sample comes from their receipts.
    private var resent: Set<UInt64> = []
    private(set) var congestion = CongestionController()

    init(policy: RetransmitPolicy) {
        unconfirmed = RetransmitQueue(policy: policy)
    }

    var isEmpty: Bool { unconfirmed.isEmpty && unsent.isEmpty }
    var hasParked: Bool { !parked.isEmpty }
    /// Something waits for the window or the pacing.
    var hasQueued: Bool { !unsent.isEmpty || !lostSeqs.isEmpty }
    var smoothedRTT: TimeAmount? { unconfirmed.estimator.smoothedRTT }
    func contains(_ seq: UInt64) -> Bool { unconfirmed.contains(seq) || unsent[seq] != nil }

    /// Bytes on the wire for a push that goes alone: header, payload, tag.
    static func wireSize(_ push: Push) -> Int {
        DatagramHeader.size + push.bytes.count + DatagramSeal.tagSize
    }

    /// UDP is policed far below what the stream would carry, and pushes wait for it: the
    /// controller found a bottleneck (a ceiling that stopped the losses) under
    /// `CongestionController.throttledRate`.
    var throttled: Bool { hasQueued && congestion.throttled }

    /// Queues a first push; false when the seq is already queued or waiting (nothing to send).
    mutating func push(_ seq: UInt64, _ push: Push) -> Bool {
        guard !contains(seq) else { return false }
        unsent[seq] = push
        unsentOrder.append(seq)
        return true
    }

    struct Release {
        /// Each group goes in one datagram (a BUNDLE when it holds more than one).
        var datagrams: [[[UInt8]]] = []
        var resent = 0
    }

    /// What the window and the pacing let go now, one datagram at a time: lost ones first,
    /// then first pushes in order. With `bundles` a datagram holds as many as fit in its
    /// payload, but a release of a few is spread over at least `DatagramBundle.spread`
    /// datagrams, so that a lost one is usually followed by one that shows the gap.
    /// `reliable`: they go on the stream path (the control connection), which loses nothing,
    /// so no retransmit timer runs for them: they wait for a receipt, and only give up (parked)
    /// after `giveUpAfter`, as a push held for the window does.
    mutating func release(now: NIODeadline, bundles: Bool = false, reliable: Bool = false) -> Release {
        var release = Release()
        let perDatagram = bundles ? max(1, (lostSeqs.count + unsent.count) / DatagramBundle.spread) : 1
        // A lost push goes past a full window (paced still): the receiver holds what was sent
        // after it, and only it lets the receiver confirm them and the window empty.
        while hasQueued, congestion.canSend(now: now, smoothedRTT: smoothedRTT, pastWindow: !lostSeqs.isEmpty) {
            var group: [[UInt8]] = []
            var size = 0
            var charged = 0
            while group.count < perDatagram, let (seq, push, isResend) = nextQueued() {
                let cost = DatagramBundle.prefixSize + push.bytes.count
                if !group.isEmpty, size + cost > DatagramHeader.maxPayload { break }
                take(seq, push, isResend: isResend, now: now)
                if reliable { unconfirmed.hold(seq) }
                if isResend { release.resent += 1 }
                group.append(push.bytes)
                size += cost
                charged += Self.wireSize(push)
            }
            guard !group.isEmpty else { break }
            congestion.datagramSent(charged: charged)
            release.datagrams.append(group)
        }
        return release
    }

    /// The next push to go, without taking it: a lost one first. Drops stale order entries.
    private mutating func nextQueued() -> (UInt64, Push, isResend: Bool)? {
        while let seq = lostOrder.first {
            if lostSeqs.contains(seq), let push = unconfirmed.peek(seq) { return (seq, push, true) }
            if lostSeqs.contains(seq), let push = unsent[seq] { return (seq, push, false) }
            lostSeqs.remove(seq)
            lostOrder.removeFirst()
        }
        while let seq = unsentOrder.first {
            if let push = unsent[seq] { return (seq, push, false) }
            unsentOrder.removeFirst()
        }
        return nil
    }

    private mutating func take(_ seq: UInt64, _ push: Push, isResend: Bool, now: NIODeadline) {
        if lostSeqs.remove(seq) != nil {
            lostOrder.removeFirst()
        } else {
            unsentOrder.removeFirst()
        }
        if !isResend {
            unsent[seq] = nil
            unconfirmed.track(seq, payload: push, now: now)
        }
        congestion.sent(bytes: Self.wireSize(push), now: now)
    }

    /// When the pacing lets the next one go; nil when nothing waits or the window is full.
    func nextRelease(now: NIODeadline) -> NIODeadline? {
        guard hasQueued else { return nil }
        return congestion.nextSend(now: now, smoothedRTT: smoothedRTT)
    }

    /// Finds what timed out lost (queued to go again) and parks what gave up; returns how many
    /// were parked.
    mutating func due(now: NIODeadline) -> Int {
        let due = unconfirmed.due(now: now)
        for item in due.resend { markLost(item.key, item.payload, sentAt: item.sentAt, now: now, congestion: false) }
        for expired in due.expired {
            parked[expired.key] = expired.payload
            resent.remove(expired.key)
            if lostSeqs.remove(expired.key) == nil { congestion.discarded(bytes: Self.wireSize(expired.payload)) }
        }
        return due.expired.count
    }

    private mutating func markLost(_ seq: UInt64, _ push: Push, sentAt: NIODeadline, now: NIODeadline, congestion shown: Bool) {
        guard lostSeqs.insert(seq).inserted else { return }
        lostOrder.append(seq)
        resent.insert(seq)
        congestion.lost(bytes: Self.wireSize(push), sentAt: sentAt, now: now, congestion: shown)
    }

    /// The parked pushes, oldest first, to be pushed again; the park is emptied.
    mutating func unpark() -> [(seq: UInt64, push: Push)] {
        defer { parked.removeAll() }
        return parked.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// A cumulative receipt: everything up to `upTo` is confirmed. Returns the pushes it
    /// confirmed (parked and unsent ones too), in seq order.
    mutating func confirm(upTo: UInt64, now: NIODeadline) -> [ConfirmedPush] {
        var confirmed: [ConfirmedPush] = []
        var newest: (seq: UInt64, sentAt: NIODeadline)?
        var tainted = false
        for seq in unconfirmed.pendingKeys where seq <= upTo {
            let sentAt = unconfirmed.lastSent(of: seq) ?? now
            guard let push = unconfirmed.remove(seq) else { continue }
            if lostSeqs.remove(seq) == nil { congestion.acked(bytes: Self.wireSize(push), sentAt: sentAt, now: now) }
            if resent.remove(seq) != nil { tainted = true }
            if seq > newest?.seq ?? 0 { newest = (seq, sentAt) }
            confirmed.append(ConfirmedPush(push, seq: seq))
        }
        // One sample per receipt, from the push that made it, and none when the receipt also
        // confirms one that was lost: a push held behind a gap waited for the gap, not the path.
        if newest != nil { unconfirmed.acknowledged(now: now) }
        if let newest, !tainted { unconfirmed.sampleRTT(now - newest.sentAt) }
        if !unsent.isEmpty {
            for (seq, push) in unsent where seq <= upTo {
                unsent[seq] = nil
                confirmed.append(ConfirmedPush(push, seq: seq))
            }
        }
        if !parked.isEmpty {
            for (seq, push) in parked where seq <= upTo {
                parked[seq] = nil
                confirmed.append(ConfirmedPush(push, seq: seq))
            }
        }
        return confirmed.sorted { $0.seq < $1.seq }
    }

    /// The receiver reports these seqs missing: each one sent is lost, queued to go again
    /// (within `budget`, which each costs its bytes); returns how many were queued, whether the
    /// budget ran out, and the seqs this session never pushed (to be fetched from the inbox).
    mutating func missing(_ seqs: some Sequence<UInt64>, budget: inout TokenBucket,
                          now: NIODeadline) -> (queued: Int, overBudget: Bool, unknown: [UInt64]) {
        var queued = 0
        var unknown: [UInt64] = []
        for seq in seqs {
            guard let push = unconfirmed.peek(seq) else {
                if unsent[seq] == nil {
                    unknown.append(seq)
                } else if lostSeqs.insert(seq).inserted {
                    // Queued behind what the receiver holds: it goes first.
                    lostOrder.append(seq)
                }
                continue
            }
            let sentAt = unconfirmed.lastSent(of: seq) ?? now
            guard !lostSeqs.contains(seq) else { continue }
            guard budget.take(push.bytes.count, now: now) else { return (queued, true, unknown) }
            markLost(seq, push, sentAt: sentAt, now: now, congestion: true)
            queued += 1
        }
        return (queued, false, unknown)
    }

    /// Every waiting push goes again, in push order, as the window of the new path lets it
    /// (RFC 9002, 9.4: a new path starts with a new controller; what went the old way is no
    /// loss of this one). Returns how many gave up instead (parked).
    mutating func expediteAll(now: NIODeadline) -> Int {
        congestion = CongestionController()
        unconfirmed.expediteAll(now: now)
        let due = unconfirmed.due(now: now)
        for item in due.resend where lostSeqs.insert(item.key).inserted {
            lostOrder.append(item.key)
            resent.insert(item.key)
        }
        for expired in due.expired {
            parked[expired.key] = expired.payload
            lostSeqs.remove(expired.key)
            resent.remove(expired.key)
        }
        return due.expired.count
    }
}

extension ConfirmedPush {
    init(_ push: Push, seq: UInt64) {
        self.init(seq: seq, from: push.from, id: push.id, isCopy: push.isCopy, group: push.group)
    }
}
