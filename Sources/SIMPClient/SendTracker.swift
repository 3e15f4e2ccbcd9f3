import NIOCore
import SIMPCore

/// A message handed to `send`, kept until its fate is known.
struct Outgoing: Sendable {
    var to: String
    var message: Simp_Message
}

/// The sender's side of delivery, with no I/O and no clock: which messages wait for the
/// server to accept them (resent on a timer), which wait for their recipient to confirm
/// them, which were withdrawn, and the order (`clientSeq`) each got on this session.
/// Each method takes what happened and returns what to send or to report; `SIMPClient`
/// does the sending and the reporting.
struct SendTracker: Sendable {
    typealias Outbox = RetransmitQueue<String, Outgoing>
    private var outbox: Outbox
    /// Accepted, waiting for the recipient's confirmation: id -> (recipient, seq).
    private var awaitingDelivery: [String: (to: String, seq: UInt64)] = [:]
    /// For the latest `groupMemory` group messages this client sent: the members that
    /// confirmed each (a member's two devices confirming on two nodes may each be reported).
    private var membersConfirmed: [String: Set<String>] = [:]
    private var membersConfirmedOrder: [String] = []
    static let groupMemory = 4096
    /// Given up on while connected: the server decides (Failed{WITHDRAWN} or Accepted).
    /// Each keeps its place in the outbox, for a next session that sends it again.
    private var withdrawing: [String: Outbox.Item] = [:]
    /// clientSeq given to each message on the current session, in send order.
    private var sessionOrder: [String: UInt64] = [:]
    private var orderToID: [UInt64: String] = [:]
    private var nextClientSeq: UInt64 = 1
    /// Messages that went out on an earlier session (or an earlier process): the server may
    /// have stored them, so they are never marked `fresh` again.
    private var sentBefore: Set<String> = []
    /// Per recipient, the messages to it that may still wait for acceptance, oldest first;
    /// one answered for leaves when it reaches the front. Whether an accepted message was
    /// preceded by one still waiting (which it overtakes) is then a look at the front, not a
    /// scan of the outbox for every acceptance: with thousands waiting behind a congestion
    /// window that scan took most of a busy client's loop.
    private var unanswered: [String: CircularBuffer<String>] = [:]

    init(policy: RetransmitPolicy, estimator: RTTEstimator = .init()) {
        outbox = RetransmitQueue(policy: policy, estimator: estimator)
    }

    /// Sent but neither delivered nor failed yet.
    var outstandingCount: Int { outbox.count + awaitingDelivery.count + withdrawing.count }
    /// Some message is not accepted yet, so resends may fall due.
    var awaitsAcceptance: Bool { !outbox.isEmpty }
    /// Nothing waiting for acceptance can fall due before this.
    var resendsFrom: NIODeadline { outbox.nothingDueBefore }
    /// Time this client was not running: off every resend timer.
    mutating func stalled(_ time: TimeAmount) { outbox.stalled(time) }
    /// Some accepted message's delivery is not known yet.
    var awaitsDelivery: Bool { !awaitingDelivery.isEmpty }

    /// What a previous process left on disk: the unaccepted go out again, the accepted are asked about.
    mutating func restore(_ saved: ClientStore.Saved, now: NIODeadline) {
        for item in saved.pending {
            sentBefore.insert(item.id)
            outbox.track(item.id, payload: Outgoing(to: item.to, message: item.message), now: now)
            unanswered[item.to, default: []].append(item.id)
        }
        for item in saved.accepted { awaitingDelivery[item.id] = (item.to, item.seq) }
    }

    /// Tracks a new message; returns it ready to go out when the path is bound.
    mutating func send(_ item: Outgoing, id: String, now: NIODeadline, bound: Bool) -> Simp_Message? {
        outbox.track(id, payload: item, now: now)
        unanswered[item.to, default: []].append(id)
        return bound ? numbered(id, item) : nil
    }

    private mutating func numbered(_ id: String, _ item: Outgoing) -> Simp_Message {
        var message = item.message
        message.clientSeq = order(of: id)
        message.fresh = !sentBefore.contains(id)
        return message
    }

    /// Numbers the message on this session the first time it goes out, so the server can
    /// store a session's messages in send order whatever order the datagrams arrive in.
    private mutating func order(of id: String) -> UInt64 {
        if let order = sessionOrder[id] { return order }
        let order = nextClientSeq
        sessionOrder[id] = order
        orderToID[order] = id
        nextClientSeq += 1
        return order
    }

    /// Once the server has answered for a message, its order is never asked for again: the
    /// number is dropped, so a long session keeps one entry per message in flight, not per
    /// message ever sent.
    private mutating func forgetOrder(of id: String) {
        if !sentBefore.isEmpty { sentBefore.remove(id) }
        guard let order = sessionOrder.removeValue(forKey: id) else { return }
        orderToID[order] = nil
    }

    /// Messages numbered on this session and not yet answered for.
    var numberedCount: Int { sessionOrder.count }

    // MARK: the server's notices

    /// The message waits in the uplink for the window: its retransmit timer stops until it
    /// leaves, and runs from then.
    mutating func waiting(_ id: String) {
        outbox.hold(id)
    }

    mutating func left(_ id: String, now: NIODeadline) {
        outbox.left(id, now: now)
    }

    /// Nil when the message was not waiting for it (a repeated notice).
    mutating func accepted(_ notice: Simp_Accepted, now: NIODeadline) -> ClientEvent? {
        let id = notice.messageID
        let place = outbox.place(of: id) ?? withdrawing[id]?.place
        guard outbox.acknowledge(id, now: now) != nil || withdrawing.removeValue(forKey: id) != nil else { return nil }
        forgetOrder(of: id)
        if let place { markOvertaken(by: place, to: notice.toUser) }
        // A group's members each confirm it (`memberDelivered`): nothing more to wait for here.
        if notice.toUser.first == GroupName.marker {
            if notice.recipients > 0 { rememberMembers(of: id) }
            return .groupAccepted(id: id, to: notice.toUser, seq: notice.seq, recipients: Int(notice.recipients))
        }
        awaitingDelivery[id] = (notice.toUser, notice.seq)
        return .accepted(id: id, to: notice.toUser, seq: notice.seq)
    }

    /// What a delivery notice tells the application, in this order.
    struct DeliveryNews: Equatable {
        /// The acceptance it overtook: on a retransmitted path a delivery can arrive first.
        var accepted: ClientEvent?
        /// Nil when it was told already: a push and a query answer can report the same delivery.
        var delivered: ClientEvent?
    }

    /// The `delivered` a read receipt implies for a message still waiting for one: the server
    /// tells a read only of a message its reader confirmed, and its `delivered` may still be
    /// on the way (from another node).
    func deliveryImplied(byReadOf id: String) -> Simp_Delivered? {
        guard let waiting = awaitingDelivery[id] else { return nil }
        var delivered = Simp_Delivered()
        delivered.messageID = id
        delivered.toUser = waiting.to
        delivered.seq = waiting.seq
        return delivered
    }

    mutating func delivered(_ notice: Simp_Delivered) -> DeliveryNews {
        let id = notice.messageID
        var news = DeliveryNews()
        if !notice.member.isEmpty {
            // A member may confirm before the sender hears `accepted` (which waits for every
            // member's copy): the message stays in the outbox until then, for its count.
            if outbox.place(of: id) != nil || withdrawing[id] != nil { rememberMembers(of: id) }
            if memberSeenBefore(id, notice.member) { return news }
            news.delivered = .memberDelivered(id: id, to: notice.toUser, member: notice.member, seq: notice.seq)
            return news
        }
        let place = outbox.place(of: id) ?? withdrawing[id]?.place
        if let pending = outbox.remove(id) ?? withdrawing.removeValue(forKey: id)?.payload {
            forgetOrder(of: id)
            if let place { markOvertaken(by: place, to: pending.to) }
            news.accepted = .accepted(id: id, to: pending.to, seq: notice.seq)
            awaitingDelivery[id] = (pending.to, notice.seq)
        }
        if awaitingDelivery.removeValue(forKey: id) != nil {
            news.delivered = .delivered(id: id, to: notice.toUser, seq: notice.seq)
        }
        return news
    }

    private mutating func rememberMembers(of id: String) {
        guard membersConfirmed[id] == nil else { return }
        membersConfirmed[id] = []
        membersConfirmedOrder.append(id)
        guard membersConfirmedOrder.count > 2 * Self.groupMemory else { return }
        let dropped = membersConfirmedOrder.prefix(membersConfirmedOrder.count - Self.groupMemory)
        membersConfirmedOrder.removeFirst(dropped.count)
        for old in dropped { membersConfirmed[old] = nil }
    }

    /// The `memberDelivered` a member's read implies, unless that member's confirmation was
    /// reported already (its own notice may still be on the way, from another node); the
    /// notice that comes after it is then not reported again.
    mutating func memberDeliveryImplied(byReadOf id: String, member: String, group: String, seq: UInt64) -> ClientEvent? {
        rememberMembers(of: id)
        guard !memberSeenBefore(id, member) else { return nil }
        return .memberDelivered(id: id, to: GroupName.address(group), member: member, seq: seq)
    }

    /// Whether this member's confirmation of a message this client sent was reported already.
    private mutating func memberSeenBefore(_ id: String, _ member: String) -> Bool {
        guard membersConfirmed[id] != nil else { return false }
        return !membersConfirmed[id]!.insert(member).inserted
    }

    /// The place of the oldest message to `recipient` still waiting for its answer, dropping
    /// the answered ones ahead of it.
    private mutating func oldestWaiting(to recipient: String) -> UInt64? {
        guard var queue = unanswered.removeValue(forKey: recipient) else { return nil }
        var oldest: UInt64?
        while let front = queue.first {
            oldest = outbox.place(of: front) ?? withdrawing[front]?.place
            if oldest != nil { break }
            queue.removeFirst()
        }
        if !queue.isEmpty { unanswered[recipient] = queue }
        return oldest
    }

    /// A message was stored while ones sent before it to the same recipient were not: those may
    /// no longer be stored (they would follow it), only answered for if they were already.
    private mutating func markOvertaken(by place: UInt64, to recipient: String) {
        guard let oldest = oldestWaiting(to: recipient), oldest < place else { return }
        outbox.updatePayloads(placedBefore: place, where: { $0.to == recipient }) { $0.message.overtaken = true }
        for (id, item) in withdrawing where item.place < place && item.payload.to == recipient {
            withdrawing[id]?.payload.message.overtaken = true
        }
    }

    /// Nil when the message was not waiting for its fate. A refusal is an answer: the server
    /// is working through what it was sent, so what still waits is not an unanswered flight
    /// to probe two at a time (`now`: when it came).
    mutating func failed(_ notice: Simp_Failed, now: NIODeadline? = nil) -> ClientEvent? {
        let id = notice.messageID
        // Accepted is durable: a later failure can only be a resend's store that failed
        // (Redis down), which does not undo the first. The receipt will come.
        guard awaitingDelivery[id] == nil else { return nil }
        if outbox.remove(id) != nil {
            if let now { outbox.acknowledged(now: now) }
        } else if withdrawing.removeValue(forKey: id) == nil {
            return nil
        }
        forgetOrder(of: id)
        _ = oldestWaiting(to: notice.toUser)
        return .failed(id: id, to: notice.toUser, reason: notice.reason.isEmpty ? notice.code.name : notice.reason, code: ErrorCode(notice.code))
    }

    /// The messages the server says it is missing from this session (at most 64), to send
    /// again at once with the order they had. The server holds what came after them: those
    /// acceptances will measure the wait, not the path (no RTT sample). The notice is an
    /// answer too (like an acknowledgement that skips a gap, it shows that something sent
    /// later arrived): probing ends, and what still waits is timed from `now`. Counted as
    /// silence, a lossy path's flight, held whole behind each lost message, was probed
    /// with ever longer waits.
    mutating func missing(_ notice: Simp_Missing, now: NIODeadline) -> [Simp_Message] {
        var resend: [Simp_Message] = []
        var ids: [String] = []
        for order in notice.clientSeqs.prefix(64) {
            guard let id = orderToID[order], var message = outbox.peek(id)?.message else { continue }
            message.clientSeq = order
            message.fresh = !sentBefore.contains(id)
            resend.append(message)
            ids.append(id)
        }
        outbox.resentOutOfBand(ids)
        outbox.acknowledged(now: now)
        return resend
    }

    // MARK: resends

    struct Resends: Sendable {
        /// Messages to send again, in the order they were first sent, each numbered for
        /// this session (numbered where the retransmit queue listed them: no copy per tick).
        var transmit: [Outbox.Item] = []
        /// Messages out of time: ask the server to drop them or say it already has them.
        var withdraw: [Simp_Withdraw] = []
    }

    /// What the retransmit timers say now. Unbound, nothing goes out and nothing is withdrawn.
    mutating func resends(now: NIODeadline, bound: Bool) -> Resends {
        let due = outbox.due(now: now)
        var result = Resends()
        var transmit = due.resend
        for expired in due.expired {
            if bound, let order = sessionOrder[expired.key] {
                result.withdraw.append(withdraw(expired, order: order))
                continue
            }
            // Never sent on this session, so no server was asked: keep trying, in its place,
            // so that after a long outage it is still stored before what was sent after it.
            outbox.retrack(expired, now: now)
            if bound { transmit.append(expired) }
        }
        guard bound else { return result }
        if transmit.count > due.resend.count { transmit.sort { $0.place < $1.place } }
        for index in transmit.indices {
            transmit[index].payload.message.clientSeq = order(of: transmit[index].key)
            transmit[index].payload.message.fresh = !sentBefore.contains(transmit[index].key)
        }
        result.transmit = transmit
        return result
    }

    private mutating func withdraw(_ expired: Outbox.Item, order: UInt64) -> Simp_Withdraw {
        withdrawing[expired.key] = expired
        var withdraw = Simp_Withdraw()
        withdraw.messageID = expired.key
        withdraw.clientSeq = order
        withdraw.toUser = expired.payload.to
        return withdraw
    }

    /// Every unaccepted message at once: the path is new, the old timers say nothing about it.
    mutating func resendAll(now: NIODeadline, bound: Bool) -> Resends {
        outbox.expediteAll(now: now)
        return resends(now: now, bound: bound)
    }

    /// Which accepted messages have their recipients confirmed? Nil when none waits.
    func deliveryQuery() -> Simp_DeliveryQuery? {
        guard !awaitingDelivery.isEmpty else { return nil }
        var query = Simp_DeliveryQuery()
        query.messages = awaitingDelivery.prefix(512).map { id, target in
            var item = Simp_Accepted()
            item.messageID = id
            item.toUser = target.to
            item.seq = target.seq
            return item
        }
        return query
    }

    // MARK: sessions

    /// A new session numbers from 1 again. Withdrawn messages' fate was for the old session
    /// to tell; on this one they are simply sent again (the server de-duplicates by id).
    mutating func startSession(now: NIODeadline) {
        sentBefore.formUnion(sessionOrder.keys)
        sessionOrder.removeAll()
        orderToID.removeAll()
        nextClientSeq = 1
        for expired in withdrawing.values { outbox.retrack(expired, now: now) }
        withdrawing.removeAll()
    }

    /// The user disconnected and nothing on disk will send them again: every message not
    /// yet accepted has failed. Accepted ones stay, so a later session learns their delivery.
    mutating func abandonUnaccepted() -> [ClientEvent] {
        var given: [(id: String, to: String)] = withdrawing.values.map { ($0.key, $0.payload.to) }
        for id in outbox.pendingKeys {
            if let item = outbox.remove(id) { given.append((id, item.to)) }
        }
        let failed = given.map { id, to in
            ClientEvent.failed(id: id, to: to, reason: "client disconnected before the server confirmed it")
        }
        withdrawing.removeAll()
        sentBefore.removeAll()
        unanswered.removeAll()
        return failed
    }
}
