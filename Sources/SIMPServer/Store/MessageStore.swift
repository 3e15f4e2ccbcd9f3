import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRedis

/// One message to store: who sent it (from the session), its id, its recipient, its bytes.
struct StoreRequest: Sendable {
    var from: String
    var id: String
    var to: String
    var bytes: [UInt8]
    /// The sender's device: its answer goes there (its other devices never sent it).
    var device: String = DeviceName.unnamed
    /// The sender has other devices: once stored, a copy goes to the sender's own inbox
    /// (`copyFor`), and the sender is answered when that copy is made.
    var copiedForSender = false
    /// Set on the copy, in its sender's inbox, of a message to another user. Boxed: requests are
    /// copied along the pipeline, and most are not copies.
    var senderCopy: SenderCopy?

    var copyFor: String? { senderCopy?.peer }
    /// Set when an attempt may have run in Redis without us seeing the answer.
    var ambiguousSince: NIODeadline?
    /// A resend of a message whose number the session already processed: answered from what
    /// was stored, never stored now (its first attempt failed, and later messages of the
    /// session were stored since; storing it now would put it after them).
    var answerOnly = false
    /// A later message of the same sender to the same recipient was stored while this one
    /// was not (the sender says so, or this node saw it): answered only, and if it was never
    /// stored it fails as out of order.
    var overtaken = false {
        didSet { if overtaken { answerOnly = true } }
    }
    /// The sender transmits it first on this session (its `fresh` flag) in send order: it
    /// cannot have been stored before, so it may be pushed before its store answers.
    var fresh = false
    /// Pushed to the recipient before the store answered (EARLY): if it is not stored, the
    /// recipient is told it was retracted.
    var pushedEarly = false
    /// When its shard first refused it for want of replicas (`--redis-min-replicas`).
    var heldSince: NIODeadline?
    /// A notice of the server's (`ContactNotices`): its "sender" is answered nothing, and the
    /// recipient's filters do not apply to it.
    var notice = false
    /// Kept in the conversation's history; a read receipt is not.
    var inHistory = true
    /// The store pipeline's lane (its order) when not the sender's own: a user's KEYS_CHANGED
    /// notices, up to 2,001 at once, go in a lane of their own, not ahead of its messages.
    var lane: String?
    /// A sealed read receipt (`SEALED_READ`): besides the recipient's blocks and contacts-only
    /// setting, its read-receipts setting refuses it (answered as a block is).
    var sealedRead = false
    /// A group's sealed read receipt (to `SENDER#NAME`): the group NAME. Its reader must be a
    /// member of NAME (`readerChecked`) before it is stored: the store checks only SENDER.
    var readGroup: String?
    /// The reader's membership of `readGroup` was checked (`DeliveryEvent.readerChecked`).
    var readerChecked = false
    /// A notice about its "sender" that the recipient's blocks refuse (its contacts-only
    /// setting does not): a user's KEYS_CHANGED notice is not stored for a peer who blocked it.
    var blocksApply = false
    /// Whether the recipient's blocks and contacts-only setting apply: not to a copy for the
    /// sender's own devices, nor to a message to oneself, nor to a notice.
    var filtered: Bool { !notice && copyFor == nil && from != to }
    /// Its place among the stores this node was handed: one that comes back to be stored again
    /// (an unknown outcome, a wait for replicas) leaves before later ones, and a refused one can
    /// tell whether a later one of its conversation was stored meanwhile.
    var place: UInt64 = 0
}

/// What a copy for the sender's other devices carries: the user the message went to (the copy
/// goes into the sender's history with that user, and no `delivered` comes of it), and what
/// the sender is told once the copy is made.
final class SenderCopy: Sendable {
    let peer: String
    let answers: [Simp_Envelope]

    init(peer: String, answers: [Simp_Envelope]) {
        self.peer = peer
        self.answers = answers
    }
}

struct StoredCredentials: Sendable {
    var salt: [UInt8]
    var hash: [UInt8]
    var kdf: String
}

/// What a login attempt needs to know before any hashing: the credentials (nil: no such
/// user), the waits failed logins earned for this name and source, and whether the user logged
/// in from this source recently.
struct LoginState: Sendable {
    var credentials: StoredCredentials?
    var waits: LoginThrottle.Waits
    var knownSource: Bool
}

/// Counts in fixed windows (Scripts.countInWindow): the count and the time its window has left.
struct WindowCount: Sendable {
    var count: Int
    var left: TimeAmount
}

enum StoreOutcome: Sendable {
    case stored(seq: UInt64, bytes: [UInt8])
    /// Stored before; `delivered` when the recipient has already confirmed it.
    case duplicate(seq: UInt64, delivered: Bool)
    case unknownRecipient
    case inboxFull
    /// The sender already has its share of the recipient's inbox unconfirmed.
    case shareFull
    /// An answer-only request whose message was never stored.
    case notStored
    /// Not stored: the recipient's shard has fewer replicas online than `minReplicas`.
    case replicasShort(online: Int)
    /// An earlier attempt of this message failed for good with `code` (Redis keeps that), and
    /// its sender may not have heard: answered the same, never stored after later messages.
    case failedBefore(code: Simp_ErrorCode)
    /// The recipient blocked the sender, or takes messages from contacts only.
    case notAContact
    case unavailable(RedisError)
}

extension StoreOutcome {
    /// Whether an early copy of the message must be retracted: it will not come numbered (not
    /// stored, for certain), or it was stored and confirmed before this copy was pushed (sent
    /// before by its sender). Not when it may still come numbered (the recipient's ledger takes
    /// that copy instead; a retraction overtaking it would have it shown twice), nor when this
    /// store's own earlier attempt stored it (`ambiguous`: the copy confirmed was this one's).
    /// The message is in the inbox (stored now, or before).
    var isStored: Bool {
        switch self {
        case .stored, .duplicate: true
        default: false
        }
    }

    func retractsEarlyCopy(ambiguous: Bool) -> Bool {
        switch self {
        case .stored: false
        case .duplicate(_, let delivered): delivered && !ambiguous
        case .unavailable: !ambiguous
        case .unknownRecipient, .inboxFull, .shareFull, .notStored, .replicasShort, .failedBefore, .notAContact: true
        }
    }

    /// Whether the recipient may have a stored message this answer does not bring, above the
    /// highest seq it was pushed: one stored by an earlier attempt whose answer was lost, or an
    /// attempt given up on that may have run. Its node reads the inbox back rather than wait
    /// for the next message's gap, and sends nothing early past it meanwhile.
    func mayLeaveUnpushed(ambiguous: Bool, pushedUpTo: UInt64) -> Bool {
        switch self {
        case .duplicate(let seq, let delivered): !delivered && seq > pushedUpTo
        case .unavailable: ambiguous
        case .stored, .unknownRecipient, .inboxFull, .shareFull, .notStored, .replicasShort, .failedBefore, .notAContact: false
        }
    }
}

struct StoreSettings: Sendable {
    var namespace = "simp"
    /// How long a sender's message ids are remembered (for de-duplication and queries) after
    /// its last message to that recipient.
    var messageIDTTLSeconds = 86_400
    var historyCap = 1000
    var inboxLimit = 10_000
    /// Unconfirmed messages one sender may have in one recipient's inbox.
    var inboxShare = 2_500
    /// Message ids remembered per sender and recipient (at least `inboxShare`).
    var idsPerSender = 10_000
    var presenceTTLSeconds = 90
    var maxDevicesPerUser = 10
    var maxGroupMembers = 1000
    var maxGroupsPerUser = 500
    /// Contact requests one user may make in an hour.
    var contactRequestsPerHour = 30
    /// A device neither connected nor seen for this long is forgotten (30 days).
    var forgetDevicesAfterMillis: Int64 = 30 * 24 * 3600 * 1000
    /// How long a token lives: a device revocation is kept that long.
    var tokenLifetimeMillis: Int64 = 24 * 3600 * 1000
    /// This node's id, as presence records name it.
    var nodeID = "node-1"
    /// Replicas that must have a store before it counts as done (WAIT), and how long to wait.
    var minReplicas = 0
    var replicaTimeoutMillis: Int64 = 1_000
    /// A replica counts as online (a new message may be stored) while its last acknowledgement
    /// is at most this old; replicas acknowledge every second.
    static let replicaMaxLagSeconds = 3
}

/// SIMP's data in Redis: accounts, inboxes, sequence numbers, receipts, presence, history.
/// Every call goes through the pool, so none blocks an event loop.
final class MessageStore: Sendable {
    let redis: any RedisClient
    let keys: Keys
    let settings: StoreSettings

    /// Told each recipient's inbox depth (unconfirmed entries) after a store added to it.
    let observeInboxDepth: @Sendable (Int) -> Void
    /// The inbox limit and a sender's share of an inbox, which a reload may change.
    private let inboxBounds: NIOLockedValueBox<InboxBounds>

    struct InboxBounds: Sendable {
        var limit: Int
        var share: Int
    }

    var bounds: InboxBounds {
        get { inboxBounds.withLockedValue { $0 } }
        set { inboxBounds.withLockedValue { $0 = InboxBounds(limit: newValue.limit, share: min(newValue.share, newValue.limit)) } }
    }

    init(redis: any RedisClient, settings: StoreSettings, observeInboxDepth: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.redis = redis
        self.keys = Keys(prefix: settings.namespace)
        self.settings = settings
        self.observeInboxDepth = observeInboxDepth
        self.inboxBounds = NIOLockedValueBox(InboxBounds(limit: settings.inboxLimit, share: min(settings.inboxShare, settings.inboxLimit)))
    }

    /// Stores a batch in one pipelined round trip, one script call per recipient; outcomes
    /// come back in batch order. Never fails as a whole: a Redis outage becomes
    /// `.unavailable` for each request.
    /// `floors`: per recipient, the highest seq its sessions on this node have seen (absent: no
    /// session). What the replies come to is `StoreSettlement`'s to say.
    func store(_ batch: [StoreRequest], floors: [String: UInt64] = [:], on loop: any EventLoop) -> EventLoopFuture<[StoreOutcome]> {
        let groups = Self.byRecipient(batch)
        let commands = groups.map { indices in storeCommand(indices.map { batch[$0] }, floor: floors[batch[indices[0]].to]) }
        return run(commands, on: loop).map { [replicaRule] answers in
            let settled = StoreSettlement(batch, groups: groups, answers: answers, rule: replicaRule)
            settled.depths.forEach(self.observeInboxDepth)
            self.followUp(batch, settled.made, notices: settled.notices, on: loop)
            return settled.outcomes
        }.recover { error in
            let failure = error as? RedisError ?? RedisError(.io, "\(error)")
            return batch.map { _ in .unavailable(failure) }
        }
    }

    /// The Redis node that holds `user`'s inbox, as last known (no round trip).
    func shard(of user: String) -> RedisNodeAddress? {
        redis.node(forKey: keys.inbox(user))
    }

    /// How many replicas `node` has online, as the store script counts them.
    func replicasOnline(at node: RedisNodeAddress, on loop: any EventLoop) -> EventLoopFuture<Int> {
        let probe = RedisCommand.script(Scripts.replicasOnline, keys: [], args: [StoreSettings.replicaMaxLagSeconds])
        return redis.run([probe], at: node, on: loop).flatMapThrowing { replies in
            Int(try replies[0].checked().int ?? 0)
        }
    }

    /// Keeps that `request` failed for good with `code`, so a resend whose sender never heard of
    /// it (its session gone) is answered the same rather than stored after later messages.
    func markFailed(_ request: StoreRequest, code: Simp_ErrorCode, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let command = RedisCommand.script(Scripts.markFailed, keys: [keys.messageIDs(to: request.to, from: request.from)],
                                          args: [request.id, code.rawValue, settings.messageIDTTLSeconds])
        return redis.run([command], on: loop).flatMapThrowing { _ = try $0[0].checked() }
    }

    /// With `minReplicas`, each store counts the WAIT of its own shard, so a shard short of
    /// replicas holds back only its own recipients' answers.
    private func run(_ commands: [RedisCommand], on loop: any EventLoop) -> EventLoopFuture<[RedisReplicated]> {
        guard settings.minReplicas > 0 else {
            return redis.run(commands, on: loop).map { replies in replies.map { RedisReplicated(reply: $0, replicas: 0) } }
        }
        let wait = RedisReplicaWait(replicas: settings.minReplicas, timeout: .milliseconds(settings.replicaTimeoutMillis))
        return redis.run(commands, on: loop, countingReplicas: wait)
    }

    /// When a store or a read counts as on the replicas.
    var replicaRule: ReplicaRule {
        ReplicaRule(minReplicas: settings.minReplicas, timeoutMillis: settings.replicaTimeoutMillis)
    }

    /// After a store: the senders' copies of the conversations (the script wrote the
    /// recipients'), in each sender's slot, and a notice to each recipient's node when that is
    /// another node (sent once the store counts as done: with `minReplicas`, once replicated).
    /// Not waited for: the inbox holds the message; a copy lost with a Redis failure leaves a
    /// gap in the sender's history only, and a lost notice delays the push (`NodeNotice`).
    private func followUp(_ batch: [StoreRequest], _ outcomes: [StoreOutcome], notices: [(node: String, user: String)],
                          on loop: any EventLoop) {
        let copies = historyCopies(batch, outcomes)
        if !copies.isEmpty { _ = redis.run(copies, on: loop) }
        let published = notices.map { notice in
            RedisCommand("SPUBLISH", [keys.nodeChannel(notice.node), NodeNotice.inbox(user: notice.user).payload])
        }
        if !published.isEmpty { publish(published, on: loop) }
    }

    /// Sends notices; those whose SPUBLISH failed are sent again when `NoticeRetry` says.
    private func publish(_ notices: [RedisCommand], retry: NoticeRetry = NoticeRetry(), on loop: any EventLoop) {
        redis.run(notices, on: loop).whenComplete { [self] result in
            guard let next = retry.next(notices, replies: try? result.get()) else { return }
            loop.scheduleTask(in: next.after) { self.publish(next.again, retry: next.retry, on: loop) }
        }
    }

    /// Asks every node (not waited for; tried again a few times).
    func announce(_ request: AdminRequest, on loop: any EventLoop) {
        publish([RedisCommand("SPUBLISH", [keys.adminChannel, request.text])], on: loop)
    }

    /// Tells these nodes something (not waited for; tried again a few times).
    func publish(_ notice: NodeNotice, to nodes: [String], on loop: any EventLoop) {
        publish(nodes.map { RedisCommand("SPUBLISH", [keys.nodeChannel($0), notice.payload]) }, on: loop)
    }

    /// The nodes named in a recipient's store answer (stored, or a duplicate not yet
    /// confirmed): where its devices are, other than here.
    static func recipientNodes(_ reply: RedisValue) -> [String] {
        let named = reply.array?.first { ($0.array?.count ?? 0) > 3 }
        return named?.array?.dropFirst(3).compactMap(\.string) ?? []
    }

    private func historyCopies(_ batch: [StoreRequest], _ outcomes: [StoreOutcome]) -> [RedisCommand] {
        guard !redis.scriptsCrossSlots else { return [] }
        var lists: [String: [[UInt8]]] = [:]
        var order: [String] = []
        for (request, outcome) in zip(batch, outcomes) where needsSenderCopy(request) {
            guard case .stored(_, let bytes) = outcome else { continue }
            let key = keys.history(of: request.from, with: request.to)
            if lists[key] == nil { order.append(key) }
            lists[key, default: []].append(bytes)
        }
        return order.flatMap { key in
            [RedisCommand([Array("RPUSH".utf8), Array(key.utf8)] + lists[key]!), RedisCommand("LTRIM", [key, -settings.historyCap, -1])]
        }
    }

    /// Whether the sender's history with the recipient gets the message too. The store script
    /// writes it where one script may write both users' keys; in a cluster it is a command of its own.
    /// A sender with several devices has its copy (and its history) made by a store of its own.
    private func needsSenderCopy(_ request: StoreRequest) -> Bool {
        request.from != request.to && !request.copiedForSender && request.inHistory
    }

    /// Positions of the batch's requests, grouped by recipient, each group in batch order.
    static func byRecipient(_ batch: [StoreRequest]) -> [[Int]] {
        var groups: [String: Int] = [:]
        var result: [[Int]] = []
        for (index, request) in batch.enumerated() {
            if let group = groups[request.to] {
                result[group].append(index)
            } else {
                groups[request.to] = result.count
                result.append([index])
            }
        }
        return result
    }

    private func storeCommand(_ requests: [StoreRequest], floor: UInt64?) -> RedisCommand {
        let to = requests[0].to
        var keys: [any RedisArgument] = [keys.user(to), keys.seq(to), keys.inbox(to), keys.deliveredMark(to), keys.numbering(to),
                                         keys.presence(to), keys.contacts(to), keys.blocked(to), keys.settings(to), keys.groupCopies(to)]
        for request in requests {
            let history = self.keys.history(of: to, with: request.copyFor ?? request.from)
            keys.append(self.keys.messageIDs(to: to, from: request.from))
            keys.append(history)
            keys.append(redis.scriptsCrossSlots && needsSenderCopy(request) ? self.keys.history(of: request.from, with: to) : history)
        }
        // A group's sealed read receipt is refused unless its recipient is in the group: its
        // groups record (same slot), last, read only for such a read.
        if requests.contains(where: \.sealedRead) { keys.append(self.keys.groups(to)) }
        let bounds = self.bounds
        var args: [any RedisArgument] = [settings.messageIDTTLSeconds, settings.historyCap, bounds.limit,
                                         bounds.share, max(settings.idsPerSender, bounds.share),
                                         floor.map { Int64($0) } ?? -1, "run id",
                                         settings.nodeID, settings.minReplicas, StoreSettings.replicaMaxLagSeconds]
        // After numkeys and the keys, the 7th argument.
        let runIDArgument = 1 + keys.count + 6
        for request in requests {
            args.append(request.id)
            args.append(request.answerOnly ? [] : request.bytes)
            args.append(Self.storeFlag(request))
        }
        var command = RedisCommand.script(Scripts.store, keys: keys, args: args)
        command.runIDArgument = runIDArgument
        return command
    }

    /// The store script's third argument per message: the sender whose messages the recipient's
    /// filters may refuse (a filtered message, kept in the history), `~SENDER` for a filtered
    /// sealed read receipt (not kept in the history; refused by the recipient's read-receipts
    /// setting too), `~SENDER#GROUP` for a group's (refused unless the recipient is a member of
    /// GROUP, by its groups record, the script's last key; contacts-only does not apply, as to
    /// the group's messages), `!SENDER` for a notice only the recipient's blocks refuse (not
    /// kept in the history), `-` for one not kept in the history, empty for neither. No user
    /// name starts with `~`, `!` or `-`, or holds a `#`.
    static func storeFlag(_ request: StoreRequest) -> String {
        if request.filtered {
            guard request.sealedRead else { return request.from }
            return "~" + request.from + (request.readGroup.map(GroupName.address) ?? "")
        }
        assert(!request.blocksApply || !request.inHistory, "a notice only blocks refuse is never in a history")
        if request.notice, request.blocksApply, !request.inHistory { return "!" + request.from }
        return request.inHistory ? "" : "-"
    }

    static func outcomes(_ reply: RedisValue, count: Int) -> [StoreOutcome] {
        if case .error(let message) = reply { return Array(repeating: .unavailable(RedisError.reply(message)), count: count) }
        guard let parts = reply.array, parts.count == count else {
            return Array(repeating: .unavailable(RedisError(.protocolViolation, "store script returned \(reply)")), count: count)
        }
        return parts.map(outcome)
    }

    /// The depth after the last message the script stored (nil: it stored none).
    static func inboxDepth(_ reply: RedisValue) -> Int? {
        reply.array?.compactMap { entry -> Int? in
            guard let parts = entry.array, parts.count >= 3, parts[0].int == 1 else { return nil }
            return parts[2].int.map { Int($0) }
        }.max()
    }

    private static func outcome(_ reply: RedisValue) -> StoreOutcome {
        guard let parts = reply.array, let status = parts.first?.int else {
            return .unavailable(RedisError(.protocolViolation, "store script returned \(reply)"))
        }
        switch status {
        case 1:
            guard parts.count >= 3, let seq = parts[1].int else { break }
            return .stored(seq: UInt64(seq), bytes: [])
        case 0:
            guard parts.count >= 3, let seq = parts[1].int, let confirmed = parts[2].int else { break }
            return .duplicate(seq: UInt64(seq), delivered: confirmed >= seq)
        case -1: return .unknownRecipient
        case -2: return .inboxFull
        case -3: return .shareFull
        case -4: return .notStored
        case -5:
            guard parts.count >= 2, let online = parts[1].int else { break }
            return .replicasShort(online: Int(online))
        case -6:
            guard parts.count >= 2, let code = parts[1].int else { break }
            return .failedBefore(code: Simp_ErrorCode(rawValue: Int(code)) ?? .storeUnavailable)
        case -7: return .notAContact
        default: break
        }
        return .unavailable(RedisError(.protocolViolation, "store script returned \(reply)"))
    }

    /// The stored bytes are the request's with the seq appended, as the script stored them.
    static func withStoredBytes(_ outcome: StoreOutcome, _ request: StoreRequest) -> StoreOutcome {
        guard case .stored(let seq, _) = outcome else { return outcome }
        return .stored(seq: seq, bytes: StoredMessage.appending(seq: seq, to: request.bytes))
    }

    /// What writing one receipt came to (`Scripts.receipt`).
    struct ReceiptWritten: Equatable, Sendable {
        /// The inbox entries it was first to confirm, when it asked for them.
        var entries: [[UInt8]] = []
        /// The groups whose copies to the user were held: they go on now.
        var heldGroups: [String] = []
    }

    /// Writes devices' receipts (each a device's new mark) in one pipelined round trip. Per
    /// receipt: what it came to, or why it failed.
    func writeReceipts(_ receipts: [ReceiptLedger.Receipt], on loop: any EventLoop) -> EventLoopFuture<[Result<ReceiptWritten, RedisError>]> {
        let commands = receipts.map { receipt in
            RedisCommand.script(Scripts.receipt, keys: [keys.inbox(receipt.user), keys.deliveredMark(receipt.user), keys.seq(receipt.user),
                                                        keys.deviceMarks(receipt.user), keys.devices(receipt.user), keys.heldGroups(receipt.user)],
                                args: [receipt.deviceMark, receipt.needsEntries ? 1 : 0, receipt.device, bounds.limit])
        }
        return redis.run(commands, on: loop).map { replies in
            replies.map { reply in
                Result { () throws(RedisError) in
                    let parts = try reply.checked().array ?? []
                    guard parts.count == 2 else { throw RedisError(.protocolViolation, "receipt script returned \(reply)") }
                    return ReceiptWritten(entries: (parts[0].array ?? []).compactMap(\.bytes), heldGroups: (parts[1].array ?? []).compactMap(\.string))
                }
            }
        }.recover { error in
            let failure = error as? RedisError ?? RedisError(.io, "\(error)")
            return receipts.map { _ in .failure(failure) }
        }
    }

    /// The confirmed mark and the unconfirmed inbox entries after `after`, oldest first.
    func unconfirmed(of user: String, after: UInt64, limit: Int, on loop: any EventLoop) -> EventLoopFuture<(confirmed: UInt64, items: [[UInt8]])> {
        readInbox(user: user, after: after, upto: nil, limit: limit, on: loop)
    }

    /// Specific unconfirmed inbox entries, by seq (those still in the inbox).
    func inboxEntries(user: String, seqs: [UInt64], on loop: any EventLoop) -> EventLoopFuture<[[UInt8]]> {
        guard let low = seqs.min(), let high = seqs.max() else { return loop.makeSucceededFuture([]) }
        let wanted = Set(seqs)
        return readInbox(user: user, after: low - 1, upto: high, limit: Int(high - low + 1), on: loop).map { read in
            read.items.filter { bytes in (try? Simp_Message(serializedBytes: bytes)).map { wanted.contains($0.seq) } ?? false }
        }
    }

    /// With `minReplicas`, only what the replicas have is read for a session: a message shown
    /// and then lost with its master would see its seq given to another message, which the
    /// client would take for one it has seen. The read is then a script that also writes (so
    /// the replication stream holds everything it saw by that point), followed by WAIT; whether
    /// its answer counts is `ReplicaRule.readCounts`'s to say.
    private func readInbox(user: String, after: UInt64, upto: UInt64?, limit: Int,
                           on loop: any EventLoop) -> EventLoopFuture<(confirmed: UInt64, items: [[UInt8]])> {
        let top = upto.map { "\($0)" } ?? "+inf"
        // A read of the mark alone (limit 0) sends nothing to the session.
        let replicated = settings.minReplicas > 0 && limit > 0
        let commands = replicated
            ? [RedisCommand.script(Scripts.readReplicated, keys: [keys.deliveredMark(user), keys.inbox(user), keys.numbering(user)],
                                   args: [after, top, limit, StoreSettings.replicaMaxLagSeconds]),
               RedisCommand("WAIT", [settings.minReplicas, settings.replicaTimeoutMillis])]
            : [RedisCommand("GET", [keys.deliveredMark(user)]),
               RedisCommand("ZRANGEBYSCORE", [keys.inbox(user), "(\(after)", top, "LIMIT", "0", limit])]
        return redis.run(commands, on: loop).flatMapThrowing { [settings, replicaRule] replies in
            var replies = replies
            if replicated {
                let confirmedBy = try replies[1].checked().int ?? 0
                replies = try replies[0].checked().array ?? []
                let online = replies.count == 3 ? replies.removeLast().int ?? 0 : 0
                guard replicaRule.readCounts(confirmedBy: confirmedBy, online: online) else {
                    throw RedisError(.notReady, "\(user)'s inbox read, but only \(confirmedBy) of \(settings.minReplicas) replicas confirmed it (WAIT)")
                }
            }
            guard replies.count == 2 else { throw RedisError(.protocolViolation, "inbox read returned \(replies)") }
            let confirmed = UInt64(try replies[0].checked().int ?? 0)
            let items = try (replies[1].checked().array ?? []).compactMap(\.bytes)
            return (confirmed, items)
        }
    }

    /// Before a session reads its inbox: if Redis lost numbers the client had seen (its
    /// `lastSeq` is above the seq numbering restarted from), the entries stored since move past
    /// `lastSeq`, in order, so the client does not drop them as ones it has seen. Tried again
    /// if a store changes the inbox between the check and the move, as `NumberingRepair` says.
    func repairNumbering(user: String, lastSeq: UInt64, repair: NumberingRepair = NumberingRepair(),
                         on loop: any EventLoop) -> EventLoopFuture<Int> {
        var check = RedisCommand.script(Scripts.numberingCheck, keys: [keys.seq(user), keys.inbox(user), keys.numbering(user)],
                                        args: [lastSeq, "run id"])
        // After numkeys, the three keys and lastSeq.
        check.runIDArgument = 5
        return redis.run([check], on: loop).flatMap { [self] replies in
            let parts: [RedisValue]
            do { parts = try replies[0].checked().array ?? [] } catch { return loop.makeFailedFuture(error) }
            guard parts.count == 2, let base = parts[0].string, let flat = parts[1].array else { return loop.makeSucceededFuture(0) }
            let entries = Self.renumbered(flat)
            let command = RedisCommand.script(
                Scripts.renumber,
                keys: [keys.seq(user), keys.inbox(user), keys.numbering(user)] + entries.map { keys.messageIDs(to: user, from: $0.from) },
                args: [base, lastSeq] + entries.flatMap { [$0.seq, $0.id] as [any RedisArgument] })
            return redis.run([command], on: loop).flatMap { replies in
                let moved = (try? replies[0].checked().int).flatMap { $0 } ?? 0
                switch repair.next(moved: Int(moved), entries: entries.count) {
                case .done(let moved): return loop.makeSucceededFuture(moved)
                case .again(let next): return self.repairNumbering(user: user, lastSeq: lastSeq, repair: next, on: loop)
                case .failed:
                    return loop.makeFailedFuture(RedisError(.protocolViolation, "\(user)'s inbox kept changing while its numbering was repaired"))
                }
            }
        }
    }

    /// Entries with their scores (ZRANGEBYSCORE WITHSCORES), as seq, sender and message id.
    private static func renumbered(_ flat: [RedisValue]) -> [(seq: UInt64, from: String, id: String)] {
        stride(from: 0, to: flat.count - 1, by: 2).compactMap { index in
            guard let bytes = flat[index].bytes, let seq = flat[index + 1].int,
                  let message = try? Simp_Message(serializedBytes: bytes) else { return nil }
            return (UInt64(seq), message.fromUser, message.messageID)
        }
    }

    /// One page of the conversation's history (`HistoryPaging`): at most `limit` stored
    /// messages from position `before` back, cut to `budget` bytes. The list grows at its
    /// newest end and is trimmed at its oldest, so a position counted from the newest moves
    /// only when a message arrives: a later page may then repeat one, never skip one.
    /// A page of A's copy of the conversation with B.
    func history(between a: String, and b: String, before: UInt64, limit: Int, budget: Int,
                 on loop: any EventLoop) -> EventLoopFuture<HistoryPaging.Page> {
        let key = keys.history(of: a, with: b)
        let skip = Int(min(before, UInt64(HistoryPaging.maxPosition)))
        let read = min(limit, HistoryPaging.maxReadPerPage)
        let commands = [RedisCommand("LRANGE", [key, -(skip + read), -(skip + 1)]), RedisCommand("LLEN", [key])]
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            let items = try (replies[0].checked().array ?? []).compactMap(\.bytes)
            let stored = try Int(replies[1].checked().int ?? 0)
            return HistoryPaging.page(oldestFirst: items, before: skip, stored: stored, budget: budget)
        }
    }

    func userExists(_ user: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        redis.run([RedisCommand("EXISTS", [keys.user(user)])], on: loop).flatMapThrowing { replies in
            try replies[0].checked().int == 1
        }
    }

    struct Presence {
        var user: String
        var device: String
        var entry: PresenceEntry
    }

    /// Writes the presence of several devices in one round trip; per device, whether it was the
    /// only one of its user present (the user came online).
    func setPresence(_ presences: [Presence], on loop: any EventLoop) -> EventLoopFuture<[Bool]> {
        let ttl = settings.presenceTTLSeconds
        let commands = presences.map { presence in
            RedisCommand.script(Scripts.setPresence, keys: [keys.presence(presence.user)],
                                args: [presence.device, presence.entry.text, ttl, presence.entry.seenMillis - Int64(ttl) * 1000])
        }
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            try replies.map { try $0.checked().int == 1 }
        }
    }

    /// Renews these devices' presence (and forgets their users' devices unseen for
    /// `forgetDevicesAfterMillis`). Per device: false when its entry is gone (to be written
    /// whole), and how many devices its user has.
    func renewPresence(_ presences: [Presence], on loop: any EventLoop) -> EventLoopFuture<[(renewed: Bool, devices: Int)]> {
        let commands = presences.map { presence in
            let now = presence.entry.seenMillis
            return RedisCommand.script(Scripts.renewPresence,
                                       keys: [keys.presence(presence.user), keys.devices(presence.user), keys.deviceMarks(presence.user)],
                                       args: [presence.device, "\(presence.entry.node) \(presence.entry.session) ", presence.entry.text,
                                              settings.presenceTTLSeconds, now, now - settings.forgetDevicesAfterMillis])
        }
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            try replies.map { reply in
                let parts = try reply.checked().array ?? []
                return (parts.first?.int == 1, Int(parts.count > 1 ? parts[1].int ?? 1 : 1))
            }
        }
    }

    /// Tells the nodes of these senders' devices (their presence) which of their messages were
    /// confirmed; this node is skipped (it told its own sessions).
    func publishDelivered(_ bySender: [String: [Simp_Accepted]], on loop: any EventLoop) -> EventLoopFuture<Void> {
        let senders = Array(bySender.keys)
        let lookups = senders.map { RedisCommand("HVALS", [keys.presence($0)]) }
        return redis.run(lookups, on: loop).flatMap { [self] entries in
            var publishes: [RedisCommand] = []
            for (sender, entries) in zip(senders, entries) {
                guard let messages = bySender[sender] else { continue }
                let nodes = Set((entries.array ?? []).compactMap { $0.string.flatMap(PresenceEntry.init)?.node })
                for node in nodes where node != settings.nodeID {
                    publishes.append(RedisCommand("SPUBLISH", [keys.nodeChannel(node), NodeNotice.delivered(sender: sender, messages: messages).payload]))
                }
            }
            guard !publishes.isEmpty else { return loop.makeSucceededVoidFuture() }
            return redis.run(publishes, on: loop).map { _ in }
        }
    }

    /// Clears a device's presence; how many of the user's devices are still present.
    func clearPresence(user: String, device: String, session: UInt64, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<Int> {
        let command = RedisCommand.script(Scripts.clearPresence, keys: [keys.presence(user), keys.devices(user)],
                                          args: [device, session, nowMillis, nowMillis - Int64(settings.presenceTTLSeconds) * 1000])
        return redis.run([command], on: loop).flatMapThrowing { Int(try $0[0].checked().int ?? 0) }
    }

    /// Which of `asker`'s messages (recipient, id, seq) their recipients have confirmed.
    /// Only the sender of a message learns this, so nobody can watch another user read.
    func confirmedOf(_ asker: String, _ items: [Simp_Accepted], on loop: any EventLoop) -> EventLoopFuture<[Simp_Accepted]> {
        guard !items.isEmpty else { return loop.makeSucceededFuture([]) }
        let commands = items.flatMap { item in
            [RedisCommand("ZSCORE", [keys.messageIDs(to: item.toUser, from: asker), item.messageID]),
             RedisCommand("GET", [keys.deliveredMark(item.toUser)])]
        }
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            var confirmed: [Simp_Accepted] = []
            for (index, item) in items.enumerated() {
                // A negative score is a failure kept for the id (Scripts.store), never a seq.
                let seq = try replies[2 * index].checked().int.flatMap { $0 > 0 ? UInt64($0) : nil }
                let mark = UInt64(try replies[2 * index + 1].checked().int ?? 0)
                // The stored seq, not the asker's: a repair after Redis lost writes may have moved it.
                if let seq, mark >= seq {
                    var answer = item
                    answer.seq = seq
                    confirmed.append(answer)
                }
            }
            return confirmed
        }
    }

    // MARK: devices

    enum DeviceRegistration: Equatable {
        /// The device's confirmed mark, how many devices the user has, and the nodes its
        /// devices are connected to; `filtered`: the user blocked someone or takes messages
        /// from contacts only (nothing is pushed to it before its store answers).
        case registered(deviceMark: UInt64, devices: Int, nodes: [String], filtered: Bool = false)
        case tooMany(devices: Int)
        case revoked
    }

    /// Registers a device at CONNECT, or finds it; `issuedMillis`: when the token was issued.
    func registerDevice(user: String, device: String, nowMillis: Int64, issuedMillis: Int64,
                        on loop: any EventLoop) -> EventLoopFuture<DeviceRegistration> {
        let command = RedisCommand.script(
            Scripts.registerDevice,
            keys: [keys.devices(user), keys.deviceMarks(user), keys.deliveredMark(user), keys.revokedDevice(user, device), keys.presence(user),
                   keys.blocked(user), keys.settings(user)],
            args: [device, settings.maxDevicesPerUser, nowMillis, issuedMillis])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let parts = try replies[0].checked().array ?? []
            switch parts.first?.int {
            case Int64(1)? where parts.count >= 4:
                return .registered(deviceMark: UInt64(parts[1].int ?? 0), devices: Int(parts[2].int ?? 1),
                                   nodes: parts.dropFirst(4).compactMap(\.string), filtered: parts[3].int == 1)
            case Int64(-1)?: return .tooMany(devices: Int(parts.count > 2 ? parts[2].int ?? 0 : 0))
            case Int64(-2)?: return .revoked
            default: throw RedisError(.protocolViolation, "device registration returned \(parts)")
            }
        }
    }

    /// Ends a device; nil when the user has no such device, else where it is connected (if it is).
    func revokeDevice(user: String, device: String, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<PresenceEntry??> {
        let command = RedisCommand.script(
            Scripts.revokeDevice,
            keys: [keys.devices(user), keys.deviceMarks(user), keys.presence(user), keys.revokedDevice(user, device),
                   keys.revokedDevicesBefore(user), keys.deviceCertificates(user), keys.keyPackages(user), keys.lastResortKeyPackages(user),
                   keys.revokedCertificates(user)],
            args: [device, nowMillis, settings.tokenLifetimeMillis])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let reply = try replies[0].checked()
            guard let text = reply.string else { return nil }
            return .some(PresenceEntry(text))
        }
    }

    /// The user's devices, by name.
    func devices(of user: String, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<[Simp_Device]> {
        redis.run(Self.deviceReads(of: user, keys: keys), on: loop).flatMapThrowing { [settings] replies in
            try Self.devices(from: replies, liveSince: nowMillis - Int64(settings.presenceTTLSeconds) * 1000)
        }
    }

    /// What `devices(from:liveSince:)` reads.
    static func deviceReads(of user: String, keys: Keys) -> [RedisCommand] {
        [RedisCommand("HGETALL", [keys.devices(user)]), RedisCommand("HGETALL", [keys.deviceMarks(user)]),
         RedisCommand("HGETALL", [keys.presence(user)])]
    }

    /// The devices in the replies to `deviceReads`: online when a node rewrote its presence
    /// entry since `liveSince` (ms).
    static func devices(from replies: [RedisValue], liveSince: Int64) throws(RedisError) -> [Simp_Device] {
        let seen = fields(try replies[0].checked())
        let cursors = fields(try replies[1].checked())
        let presence = fields(try replies[2].checked()).compactMapValues(PresenceEntry.init)
        return seen.keys.sorted().map { name in
            var device = Simp_Device()
            device.name = name
            device.lastSeen = Int64(seen[name] ?? "") ?? 0
            device.confirmedSeq = UInt64(cursors[name] ?? "") ?? 0
            if let entry = presence[name], entry.seenMillis >= liveSince {
                device.online = true
                device.lastSeen = max(device.lastSeen, entry.seenMillis)
            }
            return device
        }
    }

    /// A HGETALL reply as a dictionary.
    private static func fields(_ reply: RedisValue) -> [String: String] {
        let flat = reply.array ?? []
        var fields: [String: String] = [:]
        for index in stride(from: 0, to: flat.count - 1, by: 2) {
            if let name = flat[index].string, let value = flat[index + 1].string { fields[name] = value }
        }
        return fields
    }

    // MARK: accounts

    /// Succeeds with false when the name is taken.
    func createAccount(user: String, salt: [UInt8], hash: [UInt8], kdf: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        let command = RedisCommand.script(Scripts.register, keys: [keys.user(user)], args: [salt, hash, kdf])
        return redis.run([command], on: loop).flatMapThrowing { try $0[0].checked().int == 1 }
    }

    /// Everything a login attempt checks before hashing, in one round trip.
    func loginState(user: String, source: String, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<LoginState> {
        redis.run([
            RedisCommand("HMGET", [keys.user(user), "salt", "hash", "kdf"]),
            RedisCommand("PTTL", [keys.loginLock(user, from: source)]),
            RedisCommand("PTTL", [keys.sourceLock(source)]),
            RedisCommand("PTTL", [keys.loginLock(user)]),
            RedisCommand("ZSCORE", [keys.knownSources(user), source]),
        ], on: loop).flatMapThrowing { replies in
            func wait(_ index: Int) throws -> TimeAmount { .milliseconds(max(0, try replies[index].checked().int ?? 0)) }
            let waits = LoginThrottle.Waits(nameFromSource: try wait(1), source: try wait(2), name: try wait(3))
            let lastLogin = try replies[4].checked().int
            let known = lastLogin.map { nowMillis - $0 < LoginThrottle.knownSourceLifetime.nanoseconds / 1_000_000 } ?? false
            var credentials: StoredCredentials?
            if let fields = try replies[0].checked().array, fields.count == 3,
               let salt = fields[0].bytes, let hash = fields[1].bytes, let kdf = fields[2].string {
                credentials = StoredCredentials(salt: salt, hash: hash, kdf: kdf)
            }
            return LoginState(credentials: credentials, waits: waits, knownSource: known)
        }
    }

    /// Counts a failed login for the name from this source, for the source across names and for
    /// the name from everywhere, each in its fixed window (docs/SECURITY.md).
    func recordFailedLogin(user: String, source: String, window: TimeAmount,
                           on loop: any EventLoop) -> EventLoopFuture<(nameFromSource: WindowCount, source: WindowCount, name: WindowCount)> {
        countInWindow([keys.loginFailures(user, from: source), keys.sourceFailures(source), keys.loginFailures(user)],
                      window: window, on: loop).map { counts in (counts[0], counts[1], counts[2]) }
    }

    /// Counts a registration attempt from `source` in its fixed window.
    func recordRegistration(source: String, window: TimeAmount, on loop: any EventLoop) -> EventLoopFuture<WindowCount> {
        countInWindow([keys.registrations(source)], window: window, on: loop).map { $0[0] }
    }

    /// One script call per key: the keys belong to different names and sources, so to
    /// different hash slots on a Redis Cluster.
    private func countInWindow(_ counted: [String], window: TimeAmount, on loop: any EventLoop) -> EventLoopFuture<[WindowCount]> {
        let millis = max(1, window.nanoseconds / 1_000_000)
        let commands = counted.map { RedisCommand.script(Scripts.countInWindow, keys: [$0], args: [millis]) }
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            try replies.map { reply in
                let values = try reply.checked().array ?? []
                guard values.count == 2 else { throw RedisError(.protocolViolation, "countInWindow returned \(values.count) values") }
                return WindowCount(count: Int(values[0].int ?? 0), left: .milliseconds(values[1].int ?? 0))
            }
        }
    }

    /// Makes logins wait: for the name from `source`, from `source` for any name, or for the name everywhere.
    func lockLogins(_ locks: [(lock: LoginThrottle.Lock, wait: TimeAmount)], user: String, source: String,
                    on loop: any EventLoop) -> EventLoopFuture<Void> {
        guard !locks.isEmpty else { return loop.makeSucceededVoidFuture() }
        let commands = locks.map { lock, wait in
            let key = switch lock {
            case .nameFromSource: keys.loginLock(user, from: source)
            case .source: keys.sourceLock(source)
            case .name: keys.loginLock(user)
            }
            return RedisCommand("SET", [key, 1, "PX", max(1, wait.nanoseconds / 1_000_000)])
        }
        return redis.run(commands, on: loop).flatMapThrowing { replies in for reply in replies { _ = try reply.checked() } }
    }

    /// After a successful login: the name's failure counts and waits are cleared (the source's
    /// count across names is not: one's own account must not reset a spraying budget) and the
    /// source becomes one of the user's known sources, of which the newest few are kept.
    func loginSucceeded(user: String, source: String, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let known = keys.knownSources(user)
        let lifetime = LoginThrottle.knownSourceLifetime.nanoseconds / 1_000_000
        return redis.run([
            RedisCommand("DEL", [keys.loginFailures(user, from: source), keys.loginLock(user, from: source),
                                 keys.loginFailures(user), keys.loginLock(user)]),
            RedisCommand("ZADD", [known, nowMillis, source]),
            RedisCommand("ZREMRANGEBYSCORE", [known, "-inf", nowMillis - lifetime]),
            RedisCommand("ZREMRANGEBYRANK", [known, 0, -(LoginThrottle.knownSourcesPerUser + 1)]),
            RedisCommand("PEXPIRE", [known, lifetime]),
        ], on: loop).flatMapThrowing { replies in for reply in replies { _ = try reply.checked() } }
    }

    /// A new password; tokens issued before `tokensFrom` (ms) stop opening sessions.
    func setPassword(user: String, salt: [UInt8], hash: [UInt8], kdf: String, tokensFrom: Int64,
                     on loop: any EventLoop) -> EventLoopFuture<Void> {
        redis.run([RedisCommand("HSET", [keys.user(user), "salt", salt, "hash", hash, "kdf", kdf, "tokensFrom", tokensFrom])], on: loop)
            .flatMapThrowing { replies in _ = try replies[0].checked() }
    }

    /// Tokens of the user issued before `millis` stop opening sessions.
    func setTokensFrom(user: String, millis: Int64, on loop: any EventLoop) -> EventLoopFuture<Void> {
        redis.run([RedisCommand("HSET", [keys.user(user), "tokensFrom", millis])], on: loop)
            .flatMapThrowing { replies in _ = try replies[0].checked() }
    }

    /// Replaces the user's password hash by one made with other parameters, only while the
    /// stored hash is still `old`. Returns whether it did.
    func replaceHash(user: String, old: [UInt8], salt: [UInt8], hash: [UInt8], kdf: String,
                     on loop: any EventLoop) -> EventLoopFuture<Bool> {
        let command = RedisCommand.script(Scripts.replaceHash, keys: [keys.user(user)], args: [old, salt, hash, kdf])
        return redis.run([command], on: loop).flatMapThrowing { replies in try replies[0].checked().int == 1 }
    }

    /// Marks tokens revoked until they would have expired anyway.
    func revoke(_ tokens: [(id: String, remainingMillis: Int64)], on loop: any EventLoop) -> EventLoopFuture<Void> {
        let live = tokens.filter { $0.remainingMillis > 0 }
        guard !live.isEmpty else { return loop.makeSucceededVoidFuture() }
        return redis.run(live.map { RedisCommand("SET", [keys.revoked($0.id), 1, "PX", $0.remainingMillis]) }, on: loop)
            .flatMapThrowing { replies in for reply in replies { _ = try reply.checked() } }
    }

    /// Whether logout revoked the token, and since when the user's tokens count (an
    /// administrator's password reset makes every token issued before it invalid; 0: always).
    func tokenState(tokenID: String, user: String, on loop: any EventLoop) -> EventLoopFuture<(revoked: Bool, validFromMillis: Int64)> {
        redis.run([RedisCommand("EXISTS", [keys.revoked(tokenID)]), RedisCommand("HGET", [keys.user(user), "tokensFrom"])], on: loop)
            .flatMapThrowing { replies in
                (try replies[0].checked().int == 1, try replies[1].checked().int ?? 0)
            }
    }

    /// The token-signing key every node shares; the first node to start creates it.
    func sharedSecret(candidate: [UInt8]) async throws(RedisError) -> [UInt8] {
        let replies = try await redis.run([
            RedisCommand("SET", [keys.secret, candidate, "NX"]),
            RedisCommand("GET", [keys.secret]),
        ])
        guard let secret = try replies[1].checked().bytes, !secret.isEmpty else {
            throw RedisError(.protocolViolation, "token secret missing after SET NX")
        }
        return secret
    }
}
