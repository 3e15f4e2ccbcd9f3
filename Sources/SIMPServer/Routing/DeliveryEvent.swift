import NIOCore
import SIMPCore
import SIMPRedis

/// Everything that happens to one node's delivery, as its driver (the `Router`) feeds it to
/// the engine with the time it happened, read once (`DeliveryEngine.handle(_:at:)`): the
/// node's own life, a client's datagram or control request, a store's answer, a timer,
/// another node's notice. The engine answers each with the actions to carry out.
enum DeliveryEvent {
    // MARK: the node

    case started
    /// No timer is asked for from now on; the driver cancels those asked for.
    case stopped
    /// The UDP socket is bound on `port` (nil: closed): pushes may go out.
    case udpBound(port: Int?)
    /// A reload's limits: the data rate for sessions opened from now on, the inbox share as
    /// refusals name it (the store applies it).
    case reloaded(messagesPerSecond: Int, burst: Int, inboxShare: Int)
    /// A timer or an end-of-tick task the engine asked for has come.
    case due(DeliveryEngine.Due)
    /// The node is stopping: marks due are written now and every queued store leaves
    /// (`storesIdle` says when all are answered).
    case draining
    /// The node's subscription to other nodes' notices was made again: some may be lost.
    case resubscribed

    // MARK: sessions

    /// A device presented a valid token; `attempt` names its CONNECT in the driver's answers
    /// (`registerDevice`, `opened`, `connectRefused`, `connectAnswered`).
    case connectAsked(DeliveryEngine.SessionRequest, attempt: UInt64)    /// The store registered (or refused) the device of the CONNECT `attempt`.
    case deviceRegistered(DeliveryEngine.SessionRequest, MessageStore.DeviceRegistration, attempt: UInt64)
    /// The store checked the new session's numbering: `moved` entries renumbered past the
    /// client's last seq, or why it could not.
    case numberingRepaired(session: UInt64, moved: Result<Int, any Error>)
    /// The session's control connection closed.
    case controlClosed(session: UInt64)
    /// An administrator closes the user's sessions on this node (only `session`, when given).
    case closedByAdministrator(user: String, session: UInt64?)

    // MARK: clients

    case datagram(AddressedEnvelope<ByteBuffer>)
    /// The session's control connection returned the challenge token.
    case pathResponse(session: UInt64, token: [UInt8])
    /// A sealed datagram that came inside the session's control connection.
    case streamDatagram(session: UInt64, ByteBuffer)
    case withdraw(session: UInt64, Simp_Withdraw)
    case receipt(session: UInt64, Simp_Receipt)
    /// A reconnected sender asks which of its messages were delivered; `ask` names the
    /// question in the driver's answers (`readConfirmed`, `queryAnswered`).
    case deliveryQuery(session: UInt64, Simp_DeliveryQuery, ask: UInt64)
    /// The store's answer to `readConfirmed`: the items their recipients confirmed.
    case confirmedRead(session: UInt64, [Simp_Accepted], ask: UInt64)

    // MARK: the server and other nodes

    /// A notice of the server's (`StoreRequest.notice`), stored and pushed like any message.
    case serverNotice(StoreRequest)
    /// What another node told this one.
    case notice(NodeNotice)
    /// The user blocked someone or turned contacts-only on; its devices are on `nodes`.
    case filtered(user: String, nodes: [String])
    /// Who may see `change`, by the node their devices are on.
    case presenceWatchers(PresenceChange, byNode: [String: [String]])
    /// `user`'s key directory changed (a device got its first last-resort KeyPackage, or one was
    /// revoked): its circle and its own devices are to be told.
    case keysChanged(user: String)
    /// Whose inbox is told that `user`'s key directory changed (its circle; itself too).
    case keysCircle(user: String, circle: [String])
    /// Who is told that `user`'s key directory changed with a KEYS datagram (its circle and
    /// itself), by node.
    case keysWatchers(user: String, byNode: [String: [String]])
    /// `to` takes `from`'s typing and has devices on `nodes`.
    case typingNodes(from: String, to: String, nodes: [String], sealed: [UInt8]? = nil)

    // MARK: the store's answers

    case stored(StoreBatch, Result<[StoreOutcome], any Error>)
    /// Whether a group's sealed read receipt's reader is a member of its group (`checkReader`).
    case readerChecked(StoreRequest, member: Result<Bool, any Error>)
    case replicasProbed(RedisNodeAddress, Result<Int, any Error>)
    case inboxRead(session: UInt64, InboxRead, Result<[[UInt8]], any Error>)
    case entriesRead(session: UInt64, Result<[[UInt8]], any Error>)
    case receiptsWritten([ReceiptLedger.Receipt], [Result<MessageStore.ReceiptWritten, RedisError>])
    case presenceWritten([MessageStore.Presence], first: [Bool])
    case presenceRenewed(sessions: [UInt64], [(renewed: Bool, devices: Int)])
    case presenceCleared(user: String, devicesPresent: Int, millis: Int64)

    // MARK: the group relay

    /// Copies of group entries were made in `member`'s inbox.
    case groupCopied(member: String, [GroupCopy])
    /// A message to a group has its answers for its sender.
    case groupAnswered(StoreRequest, [Simp_Envelope])
    /// A member's copies were made again after a doubt: its sessions here read their inbox.
    case groupRecheck(member: String)
}

extension DeliveryEngine {
    /// The one entry: an event and the time it happened in, the actions to carry out (in
    /// order) out.
    mutating func handle(_ event: DeliveryEvent, at now: Moment) -> [DeliveryAction] {
        switch event {
        case .started: stopped = false
        case .stopped: stop()
        case .udpBound(let port): udpPort = port
        case .reloaded(let rate, let burst, let share): reload(messagesPerSecond: rate, burst: burst, inboxShare: share)
        case .due(let due): self.due(due, now: now)
        case .draining: drain(now: now)
        case .resubscribed: catchUpEverySession()
        case .connectAsked(let request, let attempt): connectAsked(request, attempt: attempt, now: now)
        case .deviceRegistered(let request, let registration, let attempt): registered(request, registration, attempt: attempt, now: now)
        case .numberingRepaired(let id, let moved): numberingRepaired(id, moved, now: now)
        case .controlClosed(let id): close(id, now: now)
        case .closedByAdministrator(let user, let id): closeByAdministrator(user: user, session: id, now: now)
        default: return handleTraffic(event, at: now)
        }
        return takeActions()
    }

    private mutating func handleTraffic(_ event: DeliveryEvent, at now: Moment) -> [DeliveryAction] {
        switch event {
        case .datagram(let envelope): receive(envelope, now: now)
        case .pathResponse(let id, let token): pathResponse(sessionID: id, token: token, now: now)
        case .streamDatagram(let id, let datagram): receiveOverStream(datagram, sessionID: id, now: now)
        case .withdraw(let id, let withdraw): self.withdraw(sessionID: id, withdraw, now: now)
        case .receipt(let id, let receipt): self.receipt(sessionID: id, receipt, now: now)
        case .deliveryQuery(let id, let query, let ask): self.query(query, sessionID: id, ask: ask)
        case .confirmedRead(let id, let confirmed, let ask): confirmedOf(session: id, confirmed, ask: ask)
        case .serverNotice(let notice): enqueueStore(notice, now: now)
        case .notice(let notice): received(notice)
        case .filtered(let user, let nodes): filtered(user: user, nodes: nodes)
        case .presenceWatchers(let change, let byNode): presenceWatchers(change, byNode: byNode)
        case .keysChanged(let user): act(.announceKeys(user: user))
        case .keysCircle(let user, let circle): keysCircle(user: user, circle: circle, now: now)
        case .keysWatchers(let user, let byNode): keysWatchers(user: user, byNode: byNode)
        case .typingNodes(let from, let to, let nodes, let sealed): typingNodes(from: from, to: to, nodes: nodes, sealed: sealed)
        default: return handleAnswer(event, at: now)
        }
        return takeActions()
    }

    private mutating func handleAnswer(_ event: DeliveryEvent, at now: Moment) -> [DeliveryAction] {
        switch event {
        case .stored(let batch, let result): storeCompleted(batch, Self.outcomes(of: batch, result), now: now)
        case .readerChecked(let request, let member): readerChecked(request, member, now: now)
        case .replicasProbed(let shard, let result): replicasProbed(shard, result)
        case .inboxRead(let id, let read, let result): inboxRead(session: id, read, result, now: now)
        case .entriesRead(let id, let result): entriesRead(session: id, result, now: now)
        case .receiptsWritten(let marks, let results): receiptsWritten(marks, results, now: now)
        case .presenceWritten(let entries, let first): presenceWritten(entries, first: first)
        case .presenceRenewed(let ids, let answers): presenceRenewed(ids, answers, now: now)
        case .presenceCleared(let user, let present, let millis): presenceCleared(user: user, devicesPresent: present, millis: millis)
        case .groupCopied(let member, let copies): groupCopied(member, copies, now: now)
        case .groupAnswered(let request, let envelopes): answerSender(request, envelopes)
        case .groupRecheck(let member): recheck(member: member)
        default: preconditionFailure("an event with no handler: \(event)")
        }
        return takeActions()
    }

    /// A batch's outcomes, one per message: an outage is an outcome per message; the whole
    /// batch fails only when the Redis client is shut down, and then each message hears so.
    static func outcomes(of batch: StoreBatch, _ result: Result<[StoreOutcome], any Error>) -> [StoreOutcome] {
        (try? result.get()) ?? batch.items.map { _ in .unavailable(RedisError(.closed, "the Redis client is shut down")) }
    }
}
