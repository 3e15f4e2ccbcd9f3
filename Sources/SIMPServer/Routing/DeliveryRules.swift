import NIOCore
import SIMPCore

/// The rules the delivery engine decides by, each a pure function: what a sender is told
/// about a store, what a device's receipt confirms and who hears of it, when a message may go
/// early, how often a session hears of a limit.
extension DeliveryEngine {
    /// The limits an answer names.
    struct Limits: Equatable, Sendable {
        var inboxShare: Int
        var minReplicas: Int
        var replicaHoldSeconds: Int64
    }

    /// What the sender is told about its message's store, in order.
    static func answers(_ request: StoreRequest, _ outcome: StoreOutcome, limits: Limits) -> [Simp_Envelope] {
        switch outcome {
        case .stored(let seq, _):
            return [accepted(request, seq: seq)]
        case .duplicate(let seq, let delivered):
            let accepted = accepted(request, seq: seq)
            return delivered ? [accepted, self.delivered(id: request.id, to: request.to, seq: seq)] : [accepted]
        case .unknownRecipient:
            return [failed(request, .unknownUser, "no such user: \(request.to)")]
        case .inboxFull:
            return [failed(request, .inboxFull, "\(request.to)'s inbox is full")]
        case .notStored where request.overtaken:
            return [failed(request, .outOfOrder, "not stored: a later message of yours to \(request.to) was stored first, "
                           + "and this one would now follow it; send it again as a new message")]
        case .notStored:
            return [failed(request, .storeUnavailable, "not stored: an earlier attempt of this message failed")]
        case .shareFull:
            return [failed(request, .inboxShareFull,
                           "you have \(limits.inboxShare) messages \(request.to) has not confirmed yet; wait for them to be read")]
        case .unavailable(let error):
            let doubt = request.ambiguousSince == nil ? "" : "; it may still be delivered"
            return [failed(request, .storeUnavailable, "message store unavailable: \(error.message)\(doubt)")]
        case .notAContact:
            // The same words whether the recipient blocked the sender or takes messages from
            // contacts only: the sender is not told which (docs/SECURITY.md).
            return [failed(request, .notAContact, "\(request.to) does not take messages from you")]
        case .failedBefore(let code):
            return [failed(request, code, "not stored: an earlier attempt of it failed (\(code.name)), which this one cannot undo")]
        case .replicasShort(let online):
            return [failed(request, .replicasUnavailable,
                           "not stored: the Redis shard of \(request.to)'s inbox has \(online) of the \(limits.minReplicas) replicas "
                           + "this server requires (waited \(limits.replicaHoldSeconds) s); send it again later")]
        }
    }

    /// What a device's cumulative receipt leads to.
    struct ReceiptEffects: Equatable {
        /// Pushes whose senders learn now that they were delivered (first device to confirm).
        var delivered: [ConfirmedPush]
        /// The receipt to write (the device's new mark), unless it repeats an older one.
        var receipt: ReceiptLedger.Receipt?
    }

    /// A receipt raising a device's mark to `newMark` from `deviceMark`, confirming `pushes`
    /// of this session; `otherDevicesMark`: the highest device mark of the user's other
    /// devices here. A message is delivered when the first device confirms it, and a copy of
    /// what the user sent from another device tells nobody. When the receipt covers seqs this
    /// session never pushed (confirmed before a reconnect), the store must return their
    /// entries: only it knows their senders.
    static func receipt(newMark: UInt64, pushes: [ConfirmedPush], deviceMark: UInt64, otherDevicesMark: UInt64,
                        user: String, device: String) -> ReceiptEffects {
        let delivered = pushes.filter { !$0.isCopy && $0.seq > otherDevicesMark }
        guard newMark > deviceMark else { return ReceiptEffects(delivered: delivered, receipt: nil) }
        let known = pushes.lazy.filter { $0.seq > deviceMark }.count
        let needsEntries = UInt64(known) < newMark - deviceMark
        return ReceiptEffects(delivered: delivered, receipt: .init(user: user, device: device, deviceMark: newMark, needsEntries: needsEntries))
    }

    /// Whether a sender's devices on other nodes must be told too: some of its devices are not
    /// here (it has more than are connected here, or none is).
    static func tellsOtherNodes(devicesHere: Int, devicesKnown: Int) -> Bool {
        devicesHere == 0 || devicesHere < devicesKnown
    }

    /// What early delivery needs to know of the recipient's session.
    struct EarlyRecipient: Equatable {
        var takesEarly = true
        var isBound = true
        /// Its inbox was read after the bind.
        var synced = true
        /// An inbox read is under way, or a store answer left a seq it may not have been pushed.
        var mayMissPushes = false
        /// Pushes wait for its receipt, or were given up on until its next keepalive.
        var pushesOutstanding = false
    }

    /// Whether a message may be pushed before its store answers (EARLY): its sender sends it
    /// for the first time (`fresh`, so it cannot have been stored before) and it is not a late
    /// resend; nothing else is being stored for the recipient here; the recipient has one
    /// session here (a retraction has one place to go) that asked for it, is bound and has
    /// confirmed every push. So the early message cannot overtake one stored before it on this
    /// node, and at most one early message per recipient waits for its store.
    static func mayPushEarly(fresh: Bool, answerOnly: Bool, othersBeingStored: Bool, sessionsHere: Int,
                             recipient: EarlyRecipient?) -> Bool {
        guard fresh, !answerOnly, !othersBeingStored, sessionsHere == 1, let recipient else { return false }
        return recipient.takesEarly && recipient.isBound && recipient.synced && !recipient.mayMissPushes && !recipient.pushesOutstanding
    }

    /// A limit error (RATE_LIMITED, MESSAGE_TOO_LARGE) goes to a session at most once a second
    /// per kind: `lastTold` is when this kind last went.
    static func mayTellLimit(lastTold: NIODeadline?, now: NIODeadline) -> Bool {
        now - (lastTold ?? .distantPast) >= .seconds(1)
    }

    /// Where a `missing` report's scan of the session's send order starts: at the first gap
    /// (a full report of every gap) when the last full one is 200 ms old, else above the
    /// numbers already looked at, so a gap is listed at once and then only every 200 ms.
    /// Listing every earlier gap again on each held datagram had a flooding sender resend
    /// each of them many times over.
    static func missingScan(next: UInt64, checkedUpTo: UInt64, lastFullAt: NIODeadline,
                            now: NIODeadline) -> (start: UInt64, full: Bool) {
        now - lastFullAt >= .milliseconds(200) ? (next, true) : (max(next, checkedUpTo + 1), false)
    }

    /// A `missing` lists at most this many numbers.
    static let missingLimit = 64

    static func accepted(_ request: StoreRequest, seq: UInt64) -> Simp_Envelope {
        var accepted = Simp_Accepted()
        accepted.messageID = request.id
        accepted.toUser = request.to
        accepted.seq = seq
        return Simp_Envelope(.accepted(accepted))
    }

    static func delivered(id: String, to: String, seq: UInt64, member: String = "") -> Simp_Envelope {
        var delivered = Simp_Delivered()
        delivered.messageID = id
        delivered.toUser = to
        delivered.seq = seq
        delivered.member = member
        return Simp_Envelope(.delivered(delivered))
    }

    static func failed(_ request: StoreRequest, _ code: Simp_ErrorCode, _ reason: String) -> Simp_Envelope {
        Simp_Envelope(.failed(Simp_Failed(messageID: request.id, to: request.to, code: code, reason: reason)))
    }
}
