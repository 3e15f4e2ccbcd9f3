import Foundation
import Logging
import NIOCore
import SIMPCore
import SIMPRedis

struct RouterSettings: Sendable {
    var nodeID: String
    var heartbeat: TimeAmount
    var retransmit: RetransmitPolicy
    var tick: TimeAmount = .milliseconds(10)
    /// How long keepalive-driven presence refreshes gather before one write carries them all.
    var presenceGathering: TimeAmount = .seconds(1)
    var syncLimit = 10_000
    var maxStoreBatch = 512
    /// Store batches in Redis at once (one pipelined connection keeps their order).
    var maxStoreBatchesInFlight = 4
    var messagesPerSecond = 1000
    var messageBurst = 2000
    /// With `--redis-min-replicas`: how long a store waits for its shard's replicas before it
    /// fails (REPLICAS_UNAVAILABLE), and how often a held shard is asked for them.
    var replicaHoldLimit: TimeAmount = .seconds(10)
    var replicaProbeInterval: TimeAmount = .milliseconds(500)
    /// Bytes a session's receipts may have resent a second (and in a burst), over what the
    /// retransmit timers send.
    var resendBytesPerSecond = 64 * 1024
}

/// The I/O driver of one node's delivery: it feeds datagrams, control frames, store replies and
/// ticks to the pure units (session table, datagram intake, path validation, store pipeline,
/// push queues, receipt ledger) and performs what they decide. All state is confined to `loop`
/// (the UDP channel's event loop); every entry point must run there. Redis replies arrive on
/// the same loop (one pipelined connection per loop), never blocking it.
final class Router: @unchecked Sendable {
    let loop: any EventLoop
    let store: MessageStore
    private(set) var settings: RouterSettings
    let logger: Logger
    let metrics: ServerMetrics
    var udp: (any Channel)?

    private var sessions = SessionTable<Session>()
    private var stores: StorePipeline<StoreRequest>
    /// Stores waiting for their shard's replicas (`--redis-min-replicas`).
    private var replicaHold: ShardHold<StoreRequest>
    private var storeTracker = StoreTracker()
    private var probeTask: Scheduled<Void>?
    private var flushScheduled = false
    private var drainWaiters: [EventLoopPromise<Void>] = []
    private var receipts = ReceiptLedger()
    /// Sessions whose presence is to be written on the next tick.
    private var presenceDue: [UInt64: Session] = [:]
    /// Sessions whose presence is only to live longer: its fields are as written.
    private var presenceRenewals: [UInt64: Session] = [:]
    /// Sessions with pushes not yet confirmed: the only ones the tick looks at, so idle
    /// sessions cost the tick nothing.
    private var pushing: Set<UInt64> = []
    /// Armed only while something waits for a deadline (unconfirmed pushes, receipts to write
    /// again): an idle node wakes for nothing.
    private var tickTask: Scheduled<Void>?
    private var presenceTask: Scheduled<Void>?
    private var stopped = false
    private let outbox: ControlOutbox
    /// Delivered notices for senders with no session here, published once per loop tick.
    private var remoteDelivered: [String: [Simp_Accepted]] = [:]
    /// Payloads for each session's datagrams, gathered until the next `sendDatagrams`, so
    /// those for one session share bundles.
    private var outgoing: [UInt64: (session: Session, payloads: [[UInt8]])] = [:]
    private let groups: GroupRelay

    init(loop: any EventLoop, store: MessageStore, settings: RouterSettings, metrics: ServerMetrics, logger: Logger) {
        self.loop = loop
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.outbox = ControlOutbox(loop: loop)
        self.stores = StorePipeline(maxBatch: settings.maxStoreBatch, maxInFlight: settings.maxStoreBatchesInFlight, place: { $0.order })
        self.replicaHold = ShardHold(limit: settings.replicaHoldLimit)
        self.groups = GroupRelay(store: store, loop: loop, logger: logger, maxBatch: settings.maxStoreBatch)
        groups.copied = { [unowned self] member, copies in pushGroupCopies(member, copies) }
        groups.answer = { [unowned self] request, envelopes in answerSender(request, envelopes) }
        groups.recheck = { [unowned self] member in
            for session in sessions.sessions(of: member) where session.isBound { catchUp(session) }
        }
        groups.floor = { [unowned self] member in sessions.sessions(of: member).compactMap(\.numberingFloor).max() }
    }

    /// Makes a membership change (a control request); answered once its entries are copied.
    func changeGroup(_ action: MessageStore.GroupChangeAction, group: String, by: String, users: [String],
                     maxMembers: Int) -> EventLoopFuture<MessageStore.GroupChangeResult> {
        loop.assertInEventLoop()
        return groups.change(action, group: group, by: by, users: users, maxMembers: maxMembers)
    }

    func start() {
        loop.assertInEventLoop()
        stopped = false
    }

    private func armTick() {
        guard tickTask == nil, !stopped else { return }
        tickTask = loop.scheduleTask(in: settings.tick) { [self] in
            tickTask = nil
            retransmitDue(now: .now())
            if !pushing.isEmpty || receipts.hasReady || receipts.failedCount > 0 { armTick() }
        }
    }

    // MARK: sessions

    /// What a CONNECT asks for, once its token is verified.
    struct SessionRequest: Sendable {
        var user: String
        var device: String
        /// When the token was issued (ms since the epoch): a device revoked since refuses it.
        var tokenIssuedMillis: Int64
        var lastSeq: UInt64
        var takesBundles = false
        var takesEarly = false
    }

    /// Opens a session for a device of a user who presented a valid token; replaces the same
    /// device's older session on this node. Its other devices stay.
    func openSession(_ request: SessionRequest, control: any Channel) -> EventLoopFuture<Simp_ConnectResponse> {
        loop.assertInEventLoop()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        return store.registerDevice(user: request.user, device: request.device, nowMillis: now,
                                    issuedMillis: request.tokenIssuedMillis, on: loop).flatMap { [self] registration in
            switch registration {
            case .registered(let cursor, let devices, let nodes):
                return open(request, control: control, cursor: cursor, devices: devices, nodes: nodes)
            case .tooMany(let devices):
                return loop.makeFailedFuture(ServerError(.tooManyDevices, "\(request.user) has \(devices) devices, the most this server allows; "
                                                         + "revoke one first (/device revoke NAME)"))
            case .revoked:
                return loop.makeFailedFuture(ServerError(.deviceRevoked, "device \(request.device) of \(request.user) was revoked; log in again"))
            }
        }
    }

    private func open(_ request: SessionRequest, control: any Channel, cursor: UInt64, devices: Int,
                      nodes: [String]) -> EventLoopFuture<Simp_ConnectResponse> {
        var rng = SystemRandomNumberGenerator()
        let user = request.user
        // The session's path validator forgets it once used; only the answer below needs it too.
        let bindToken = randomBytes(16)
        let session = Session(id: sessions.newID(using: &rng), user: user, device: request.device, control: control, bindToken: bindToken,
                              confirmed: request.lastSeq, policy: settings.retransmit,
                              bucket: TokenBucket(rate: settings.messagesPerSecond, burst: settings.messageBurst, now: .now()))
        session.takesBundles = request.takesBundles
        session.takesEarly = request.takesEarly
        if let previous = sessions.insert(session) {
            sessionClosed(previous)
            previous.control.writeAndFlush(Simp_Envelope.error(.sessionReplaced, "a newer session of \(user)'s device \(request.device) connected"), promise: nil)
            previous.control.close(promise: nil)
        }
        deviceCount(of: user, is: devices)
        if devices > 1 { announceDevices(of: user, count: devices, to: nodes) }
        metrics.sessions.set(Int64(sessions.count))
        logger.info("session opened", metadata: session.logMetadata)
        let lastSeq = request.lastSeq
        // Stores made from now on run in Redis after the numbering check (one connection, in
        // order), so they may already number above what the client has seen.
        session.numberingFloor = lastSeq
        return store.repairNumbering(user: user, lastSeq: lastSeq, on: loop).map { [self] moved in
            if moved > 0 {
                metrics.renumbered.increment(by: Int64(moved))
                logger.warning("Redis lost numbers \(user) had seen; \(moved) messages stored since moved past seq \(lastSeq)",
                               metadata: session.logMetadata)
            }
            session.confirmed = max(lastSeq, cursor)
            // The device has more than the server knows it confirmed: its last receipt was lost
            // with the previous connection (or node). Apply it now.
            if lastSeq > cursor { recordReceipt(.init(user: user, device: session.device, upTo: lastSeq, needsEntries: true)) }
            var response = Simp_ConnectResponse()
            response.sessionID = session.id
            response.bindToken = Data(bindToken)
            response.confirmedSeq = cursor
            response.heartbeatMillis = UInt32(settings.heartbeat.nanoseconds / 1_000_000)
            response.user = user
            response.udpPort = UInt32(udp?.localAddress?.port ?? 0)
            response.sessionKey = session.key.withUnsafeBytes { Data($0) }
            response.bundles = true
            response.early = request.takesEarly
            response.device = session.device
            response.devices = UInt32(devices)
            return response
        }.flatMapErrorThrowing { [self] error in
            closeSession(session.id)
            throw error
        }
    }

    /// Every session of the user here learns how many devices the user has.
    private func deviceCount(of user: String, is count: Int) {
        for session in sessions.sessions(of: user) { session.devices = count }
    }

    /// The user's devices on other nodes learn that the user has `count` devices now.
    private func announceDevices(of user: String, count: Int, to nodes: [String]) {
        let others = nodes.filter { $0 != settings.nodeID }
        guard !others.isEmpty else { return }
        store.publish(.devices(user: user, count: count), to: others, on: loop)
    }

    func closeSession(_ id: UInt64) {
        loop.assertInEventLoop()
        guard let session = sessions.remove(id) else { return }
        sessionClosed(session)
    }

    private func sessionClosed(_ session: Session) {
        metrics.sessions.set(Int64(sessions.count))
        presenceDue[session.id] = nil
        presenceRenewals[session.id] = nil
        let metadata = session.logMetadata
        logger.info("session closed", metadata: metadata)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        store.clearPresence(user: session.user, device: session.device, session: session.id, nowMillis: now, on: loop).whenFailure { [logger] error in
            logger.debug("presence not cleared", metadata: metadata.merging(["error": "\(error)"]) { $1 })
        }
    }

    var sessionCount: Int { sessions.count }

    /// A reload's data rate: sessions opened from now on get it.
    func setMessageRate(perSecond rate: Int, burst: Int) {
        loop.assertInEventLoop()
        settings.messagesPerSecond = rate
        settings.messageBurst = burst
    }

    /// An administrator closes the user's sessions on this node (only `session`, when given):
    /// the clients are told not to reconnect. Returns whether a session was closed.
    @discardableResult
    func closeByAdministrator(user: String, session id: UInt64?) -> Bool {
        loop.assertInEventLoop()
        let closing = sessions.sessions(of: user).filter { id == nil || $0.id == id }
        for session in closing {
            logger.notice("session closed by an administrator", metadata: session.logMetadata)
            end(session, .sessionClosed, "an administrator closed this session")
        }
        return !closing.isEmpty
    }

    /// A device was revoked (from another of its user's devices): its session here ends.
    func closeRevoked(user: String, device: String, by revoker: String) {
        loop.assertInEventLoop()
        guard let session = sessions.session(of: user, device: device) else { return }
        logger.notice("session of a revoked device closed", metadata: session.logMetadata)
        end(session, .sessionClosed, "this device was revoked from \(user)'s device \(revoker)")
    }

    private func end(_ session: Session, _ code: Simp_ErrorCode, _ reason: String) {
        closeSession(session.id)
        session.control.writeAndFlush(Simp_Envelope.error(code, reason), promise: nil)
        session.control.close(promise: nil)
    }

    // MARK: datagrams in

    func receive(_ envelope: AddressedEnvelope<ByteBuffer>) {
        loop.assertInEventLoop()
        metrics.datagramsIn.increment()
        let size = envelope.data.readableBytes
        switch DatagramIntake.decide(envelope.data, peers: { sessions[$0] }) {
        case .oversize:
            metrics.dropped(.oversize)
            metrics.exceeded(.datagramSize)
            tellOversize(envelope)
        case .drop(let reason):
            metrics.dropped(reason)
        case .open(let session, .bind, let token):
            bind(session, token: token, from: envelope.remoteAddress)
        case .open(let session, .data, let payload):
            guard fromValidatedAddress(session, envelope.remoteAddress, size: size) else { return }
            data(session, payload: payload)
        case .open(let session, .bundle, let payload):
            guard fromValidatedAddress(session, envelope.remoteAddress, size: size) else { return }
            guard let messages = try? DatagramBundle.split(payload) else {
                metrics.dropped(.malformed)
                return
            }
            for message in messages { data(session, payload: message) }
        case .open(let session, _, _):
            guard fromValidatedAddress(session, envelope.remoteAddress, size: size) else { return }
            keepalive(session)
        }
    }

    /// The session's control connection returned the challenge token: the new address is its.
    func pathResponse(sessionID: UInt64, token: [UInt8]) {
        loop.assertInEventLoop()
        guard let session = sessions[sessionID], session.path.respond(token: token) != nil else { return }
        sendBound(session)
        refreshPresence(session, promptly: true)
        session.pushes.expediteAll(now: .now())
    }

    private func bind(_ session: Session, token: [UInt8], from address: SocketAddress) {
        switch session.path.bind(token: token, from: address) {
        case .bound:
            sendBound(session)
            // Presence is written before the inbox is read, on the same connection: a store on
            // another node either ran before the write (the read sees it) or after it (it finds
            // this node in presence, and notifies it).
            session.lastPresenceWrite = .now()
            presenceDue[session.id] = session
            writePresence()
            sync(session)
        case .answerAgain:
            sendBound(session)
        case .badToken:
            metrics.dropped(.badBindToken)
            outbox.send(Simp_Envelope.error(.invalidToken, "bind token does not belong to this session"), on: session.control)
        case .ignored:
            break
        }
    }

    private func sendBound(_ session: Session) {
        var bound = Simp_Bound()
        bound.address = session.address.map(Self.describe) ?? ""
        outbox.send(Simp_Envelope(.bound(bound)), on: session.control)
        sendDatagram(to: session, kind: .pong, payload: [])
    }

    /// A keepalive is not answered: it holds the client's NAT mapping outbound, and an answer
    /// for every one was a tenth of an idle server's CPU. A client checks its path with BIND.
    private func keepalive(_ session: Session) {
        unpark(session)
        if NIODeadline.now() - session.lastPresenceWrite > .seconds(Int64(store.settings.presenceTTLSeconds / 3)) {
            refreshPresence(session, promptly: false)
        }
    }

    /// The path works again (a keepalive came through): push what was given up, in order.
    private func unpark(_ session: Session) {
        guard session.pushes.hasParked else { return }
        for (seq, push) in session.pushes.unpark() { self.push(seq, push, to: session) }
        sendDatagrams()
    }

    /// Presence is written with every other session's that fell due: a new address on the next
    /// tick; a keepalive's renewal (only the TTL: 60 s of it left to spare) within
    /// `presenceGathering`, so an idle node with 20,000 sessions makes one Redis round trip a
    /// second for them all.
    private func refreshPresence(_ session: Session, promptly: Bool) {
        guard session.isBound else { return }
        session.lastPresenceWrite = .now()
        if promptly {
            presenceDue[session.id] = session
            armTick()
        } else {
            presenceRenewals[session.id] = session
            armPresenceWrite()
        }
    }

    private func armPresenceWrite() {
        guard presenceTask == nil, !stopped else { return }
        presenceTask = loop.scheduleTask(in: settings.presenceGathering) { [self] in
            presenceTask = nil
            renewPresence()
        }
    }

    /// A presence that is gone (Redis restarted without it, or the TTL ran out) is written whole.
    /// The renewal also brings each session its user's device count (a notice may be lost).
    private func renewPresence() {
        let renewals = presenceRenewals.values.filter { sessions.isCurrent($0) && $0.address != nil }
        presenceRenewals.removeAll(keepingCapacity: true)
        guard !renewals.isEmpty else { return }
        store.renewPresence(renewals.compactMap(presence), on: loop).whenComplete { [self] result in
            switch result {
            case .success(let renewed):
                for (session, answer) in zip(renewals, renewed) where sessions.isCurrent(session) {
                    if !answer.renewed { presenceDue[session.id] = session }
                    if answer.devices > 0 { session.devices = answer.devices }
                }
                writePresence()
            case .failure(let error):
                logger.warning("presence not renewed", metadata: ["error": "\(error)"])
            }
        }
    }

    private func writePresence() {
        guard !presenceDue.isEmpty else { return }
        let entries = presenceDue.values.filter { sessions.isCurrent($0) }.compactMap(presence)
        presenceDue.removeAll(keepingCapacity: true)
        guard !entries.isEmpty else { return }
        store.setPresence(entries, on: loop).whenFailure { [logger] error in
            logger.warning("presence not written", metadata: ["error": "\(error)"])
        }
    }

    /// The session's presence entry as of now (nil before it has an address).
    private func presence(_ session: Session) -> MessageStore.Presence? {
        guard let address = session.address else { return nil }
        let entry = PresenceEntry(node: settings.nodeID, session: session.id, address: Self.describe(address),
                                  seenMillis: Int64(Date().timeIntervalSince1970 * 1000))
        return MessageStore.Presence(user: session.user, device: session.device, entry: entry)
    }

    /// True when the datagram came from the session's validated address; otherwise it is
    /// dropped, and a bound session's new address is challenged.
    private func fromValidatedAddress(_ session: Session, _ address: SocketAddress, size: Int) -> Bool {
        let verdict = session.path.check(address, size: size, now: .now(), newToken: { randomBytes(16) })
        switch verdict {
        case .accept:
            return true
        case .drop(let reason):
            metrics.dropped(.unvalidatedAddress)
            if reason == .amplification { metrics.dropped(.amplification) }
        case .challenge(let token, let target):
            metrics.dropped(.unvalidatedAddress)
            sendDatagram(to: session, kind: .challenge, payload: token, at: target)
        }
        return false
    }

    private func data(_ session: Session, payload: [UInt8]) {
        guard session.bucket.take(now: .now()) else {
            rateLimited(session)
            return
        }
        guard var message = try? Simp_Message(serializedBytes: payload) else {
            metrics.dropped(.malformed)
            return
        }
        if let problem = MessageRules.problem(in: message) {
            refuse(message, problem, from: session)
            return
        }
        let order = message.clientSeq
        let fresh = message.fresh
        let overtaken = message.overtaken
        message.overtaken = false
        // The sender is the session the datagram came on, whatever the datagram claims.
        message.fromUser = session.user
        message.seq = 0
        message.clientSeq = 0
        message.fresh = false
        message.serverTime = Int64(Date().timeIntervalSince1970 * 1000)
        // A group message goes to its sender's inbox too (a member): the device that sent it
        // knows it by its name and shows it once.
        let toGroup = GroupName.addressed(by: message.toUser) != nil
        if toGroup { message.fromDevice = session.device }
        let bytes: [UInt8] = (try? message.serializedBytes()) ?? []
        let copied = session.devices > 1 && message.toUser != session.user && !toGroup
        // Stored, it (or its copy for the sender's other devices) could never be pushed: its
        // seq would not fit the datagram.
        let limit = MessageRules.maxStoredBytes - (copied ? session.device.utf8.count + 2 : 0)
            - (toGroup ? MessageRules.groupSeqBytes : 0)
        guard bytes.count <= limit else {
            message.clientSeq = order
            refuse(message, (.messageTooLarge, "message is \(bytes.count) bytes as stored (with its sender and time); "
                + "the limit is \(limit)"), from: session)
            return
        }
        var request = StoreRequest(from: session.user, id: message.messageID, to: message.toUser, bytes: bytes)
        request.device = session.device
        request.copiedForSender = copied
        // Unordered messages are stored on every arrival: only a numbered one reaches the
        // store once per session, so only it may go early.
        request.fresh = fresh && order > 0
        request.overtaken = overtaken
        guard order > 0 else {
            enqueueStore(request)
            return
        }
        switch session.sendOrder.receive(order, request) {
        case .release(let ready): ready.forEach { enqueueStore($0) }
        case .late(var again):
            again.answerOnly = true
            enqueueStore(again)
        case .withdrawn: sendWithdrawn(session, id: request.id, to: request.to)
        case .held: reportMissing(session)
        case .dropped: break
        }
    }

    private func refuse(_ message: Simp_Message, _ problem: (code: Simp_ErrorCode, reason: String), from session: Session) {
        let failed = Simp_Failed(messageID: message.messageID, to: message.toUser, code: problem.code, reason: problem.reason)
        outbox.send(Simp_Envelope(.failed(failed)), on: session.control)
        // Refused for good: the sender's later messages must not wait for its number.
        if message.clientSeq > 0 { session.sendOrder.withdraw(message.clientSeq).released.forEach { enqueueStore($0) } }
    }

    /// Over the session's message rate the datagram is dropped unread: the client resends it
    /// later (nothing it was told is lost), and is told why at most once a second.
    private func rateLimited(_ session: Session) {
        metrics.dropped(.rateLimited)
        metrics.exceeded(.messagesPerSecond)
        tellLimit(session, .rateLimited, "more than \(settings.messagesPerSecond) messages per second on this session; slowing down")
    }

    /// An oversize datagram cannot be opened, so its session id is unproven: only a datagram
    /// from the session's validated address gets an error, which a spoofed source can make
    /// arrive at most once a second.
    private func tellOversize(_ envelope: AddressedEnvelope<ByteBuffer>) {
        guard let id = Datagram.sessionID(peeking: envelope.data), let session = sessions[id],
              session.address == envelope.remoteAddress else { return }
        let reason = "datagram of \(envelope.data.readableBytes) bytes exceeds the limit of \(Datagram.maxSize); dropped"
        tellLimit(session, .messageTooLarge, reason)
    }

    private func tellLimit(_ session: Session, _ code: Simp_ErrorCode, _ reason: String) {
        let now = NIODeadline.now()
        guard DeliveryEngine.mayTellLimit(lastTold: session.lastLimitError[code], now: now) else { return }
        session.lastLimitError[code] = now
        outbox.send(Simp_Envelope.error(code, reason), on: session.control)
    }

    /// The session's send order waits for a number: ask for it now rather than after the
    /// client's timeout. Once per gap, and again every 200 ms while it stays open.
    private func reportMissing(_ session: Session) {
        let now = NIODeadline.now()
        let next = session.sendOrder.next
        guard DeliveryEngine.mayReportMissing(next: next, lastReported: session.lastMissingReported, lastAt: session.lastMissingAt,
                                              now: now) else { return }
        session.lastMissingReported = next
        session.lastMissingAt = now
        var missing = Simp_Missing()
        missing.clientSeqs = [next]
        outbox.send(Simp_Envelope(.missing(missing)), on: session.control)
    }

    /// The sender gave up on a message: stop waiting for it, and tell the sender whether the
    /// server ever had it (if it did, its Accepted or Failed is already on the way).
    func withdraw(sessionID: UInt64, _ withdraw: Simp_Withdraw) {
        loop.assertInEventLoop()
        guard let session = sessions[sessionID] else { return }
        let (pending, released) = session.sendOrder.withdraw(withdraw.clientSeq)
        if pending { sendWithdrawn(session, id: withdraw.messageID, to: withdraw.toUser) }
        released.forEach { enqueueStore($0) }
    }

    private func sendWithdrawn(_ session: Session, id: String, to: String) {
        let failed = Simp_Failed(messageID: id, to: to, code: .withdrawn, reason: "the server never received it before the sender gave up")
        outbox.send(Simp_Envelope(.failed(failed)), on: session.control)
    }

    // MARK: the store pipeline

    /// Stores leave in batches, several in flight on the loop's one Redis connection, so the
    /// order in which datagrams arrived is the order of their sequence numbers.
    private func enqueueStore(_ request: StoreRequest) {
        if let group = GroupName.addressed(by: request.to) {
            groups.enqueue(request, group: group)
            return
        }
        // A resend of a message whose store is still queued, in flight or being retried is
        // answered by that store's outcome; a second copy could contradict it.
        guard let place = storeTracker.begin(request) else { return }
        var request = request
        request.order = place
        // Behind its recipient's held stores, wherever they were held (the slot map may have
        // changed since); nothing goes early to it: it may well fail.
        if let shard = heldShard(for: request.to) {
            storeTracker.queued(for: request.to)
            replicaHold.hold(request, shard: shard, now: .now())
            return
        }
        if let recipient = earlyRecipient(of: request) { request.pushedEarly = pushEarly(request, to: recipient) }
        storeTracker.queued(for: request.to)
        stores.enqueue(request)
        scheduleFlush()
    }

    /// The recipient's session when the message may be pushed before its store answers
    /// (`DeliveryEngine.mayPushEarly`).
    private func earlyRecipient(of request: StoreRequest) -> Session? {
        let here = sessions.sessions(of: request.to)
        let recipient = here.first
        let candidate = recipient.map { session in
            DeliveryEngine.EarlyRecipient(takesEarly: session.takesEarly, isBound: session.isBound, synced: session.synced,
                                          mayMissPushes: session.catchUp.mayMissPushes,
                                          pushesOutstanding: !session.pushes.isEmpty || session.pushes.hasParked)
        }
        let early = DeliveryEngine.mayPushEarly(fresh: request.fresh, answerOnly: request.answerOnly,
                                                othersBeingStored: storeTracker.othersBeingStored(for: request.to), sessionsHere: here.count,
                                                recipient: candidate)
        return early ? recipient : nil
    }

    private func pushEarly(_ request: StoreRequest, to recipient: Session) -> Bool {
        let afterSeq = max(recipient.confirmed, recipient.highestPushed)
        guard let payload = EarlyPayload(afterSeq: afterSeq, message: request.bytes).encoded(),
              sendDatagram(to: recipient, kind: .early, payload: payload) else { return false }
        metrics.earlyPushes.increment()
        return true
    }

    /// Batches leave at the end of the loop tick, so one tick's datagrams share a batch.
    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.execute { [self] in
            flushScheduled = false
            flushStores()
        }
    }

    private func flushStores() {
        while let batch = stores.nextBatch() {
            store.store(batch.items, floor: { [sessions] in sessions.sessions(of: $0).compactMap(\.numberingFloor).max() }, on: loop).whenComplete { [self] result in
                // The store never fails as a whole: an outage is an outcome per message.
                let outcomes = (try? result.get()) ?? []
                storeCompleted(batch, outcomes)
            }
        }
        if stores.isIdle { finishDrain() }
    }

    private func storeCompleted(_ batch: StorePipeline<StoreRequest>.Batch, _ outcomes: [StoreOutcome]) {
        var retry: [StoreRequest] = []
        for (index, (request, outcome)) in zip(batch.items, outcomes).enumerated() {
            if holdForReplicas(request, outcome, ticket: batch.ticket, index: index) { continue }
            if let again = unsettled(request, outcome) { retry.append(again) } else { settle(request, outcome) }
        }
        sendDatagrams()
        switch stores.completed(batch.ticket, retry: retry) {
        case .proceed: flushStores()
        case .waitForInFlight: break
        case .pause:
            // Redis is likely restarting: the unknown ones go again, first, after a moment.
            loop.scheduleTask(in: .milliseconds(200)) { [self] in
                stores.resume()
                flushStores()
            }
        }
    }

    private func heldShard(for recipient: String) -> RedisNodeAddress? {
        guard !replicaHold.isEmpty else { return nil }
        if let shard = replicaHold.shard(holding: { $0.to == recipient }) { return shard }
        return store.shard(of: recipient).flatMap { replicaHold.holds($0) ? $0 : nil }
    }

    /// A store refused for want of replicas waits for its shard (nothing was written).
    private func holdForReplicas(_ request: StoreRequest, _ outcome: StoreOutcome, ticket: UInt64, index: Int) -> Bool {
        guard case .replicasShort(let online) = outcome, let shard = heldShard(for: request.to) ?? store.shard(of: request.to) else { return false }
        if !replicaHold.holds(shard) {
            let wait = settings.replicaHoldLimit.nanoseconds / 1_000_000_000
            logger.warning("Redis shard \(shard) has \(online) of the \(store.settings.minReplicas) replicas --redis-min-replicas asks for; its recipients' messages wait up to \(wait) s")
        }
        // A store tried again after its shard was let go keeps the time it first waited from.
        var request = request
        if storeTracker.isOvertaken(request) { request.overtaken = true }
        let since = request.heldSince ?? .now()
        request.heldSince = since
        replicaHold.refused(request, shard: shard, online: online, ticket: ticket, index: index, now: since)
        metrics.replicasShort(replicaHold.held)
        armReplicaProbe()
        return true
    }

    /// Its sender may be gone and send it again later, on another session or node.
    private func keepFailure(_ request: StoreRequest, code: Simp_ErrorCode) {
        store.markFailed(request, code: code, on: loop).whenFailure { [logger] error in
            logger.warning("could not record that message \(request.id) from \(request.from) failed for good; a resend of it may be stored after later ones: \(error)")
        }
    }

    private func armReplicaProbe() {
        guard probeTask == nil, !stopped, !replicaHold.isEmpty else { return }
        probeTask = loop.scheduleTask(in: settings.replicaProbeInterval) { [self] in
            probeTask = nil
            probeHeldShards()
        }
    }

    /// Fails what waited too long, asks each held shard for its replicas, and lets go of
    /// those that have them again.
    private func probeHeldShards() {
        let now = NIODeadline.now()
        for (request, online) in replicaHold.expired(now: now) {
            keepFailure(request, code: .replicasUnavailable)
            settle(request, .replicasShort(online: online))
        }
        storeTracker.prune(now: now)
        for (shard, _) in replicaHold.held {
            store.replicasOnline(at: shard, on: loop).whenComplete { [self] result in
                let released: [StoreRequest]
                switch result {
                case .success(let online):
                    released = replicaHold.probed(shard, online: online, needed: store.settings.minReplicas)
                    if !replicaHold.holds(shard) {
                        logger.notice("Redis shard \(shard) has \(online) replicas online again; \(released.count) held messages are stored now")
                    }
                case .failure(let error):
                    released = replicaHold.letGo(shard)
                    logger.notice("Redis shard \(shard) did not answer (\(error)); its \(released.count) held messages are tried where their slots are now")
                }
                stores.enqueueFirst(released)
                if !released.isEmpty { scheduleFlush() }
                metrics.replicasShort(replicaHold.held)
            }
        }
        sendDatagrams()
        armReplicaProbe()
    }

    private func finishDrain() {
        let waiters = drainWaiters
        drainWaiters.removeAll()
        waiters.forEach { $0.succeed() }
    }

    /// A store whose outcome is unknown (the script may have run, the answer was lost) is
    /// tried again, idempotently by message id, until Redis gives a real answer or 30 s pass.
    private func unsettled(_ request: StoreRequest, _ outcome: StoreOutcome) -> StoreRequest? {
        guard case .unavailable(let error) = outcome else { return nil }
        var again = request
        if again.ambiguousSince == nil {
            guard error.mayHaveRun else { return nil }
            again.ambiguousSince = .now()
        }
        return NIODeadline.now() - again.ambiguousSince! < .seconds(30) ? again : nil
    }

    private func settle(_ request: StoreRequest, _ outcome: StoreOutcome) {
        storeTracker.settled(request)
        if case .stored(let seq, let bytes) = outcome {
            answerHeldEarlierOnly(request)
            let push = Push(bytes: bytes, from: request.from, id: request.id, isCopy: request.copyFor != nil)
            for recipient in sessions.sessions(of: request.to) {
                recipient.raiseNumberingFloor(seq)
                if recipient.isBound { self.push(seq, push, to: recipient) }
            }
        } else {
            catchUpIfUnpushed(request, outcome)
        }
        guard request.copyFor == nil else {
            copySettled(request, outcome)
            return
        }
        let envelopes = answers(request, outcome)
        if request.pushedEarly { retractEarlyCopyIfDue(request, outcome, answers: envelopes) }
        if request.copiedForSender, outcome.isStored {
            enqueueStore(Self.senderCopy(of: request, answers: envelopes))
            return
        }
        answerSender(request, envelopes)
    }

    private func answerSender(_ request: StoreRequest, _ envelopes: [Simp_Envelope]) {
        guard let sender = sessions.session(of: request.from, device: request.device) else { return }
        for envelope in envelopes { outbox.send(envelope, on: sender.control) }
    }

    /// The copy of a stored message for its sender's other devices, in the sender's own inbox.
    /// The sender hears about the message once the copy is made: until then a crash could
    /// leave the message stored and the copy never made, while a resend (answered as a
    /// duplicate) makes it.
    private static func senderCopy(of request: StoreRequest, answers: [Simp_Envelope]) -> StoreRequest {
        var copy = StoreRequest(from: request.from, id: request.id, to: request.from,
                                bytes: StoredMessage.appending(fromDevice: request.device, to: request.bytes))
        copy.device = request.device
        copy.senderCopy = SenderCopy(peer: request.to, answers: answers)
        return copy
    }

    /// The message is stored whatever became of its copy: its sender hears so now.
    private func copySettled(_ copy: StoreRequest, _ outcome: StoreOutcome) {
        if !outcome.isStored {
            logger.warning("message \(copy.id) from \(copy.from) to \(copy.copyFor ?? "?") was stored, but its copy for \(copy.from)'s other devices was not: \(outcome)")
        }
        answerSender(copy, copy.senderCopy?.answers ?? [])
    }

    /// A later message of the same sender stored while an earlier one waits for replicas (its
    /// shard's replicas came back between the two): the earlier one may no longer be stored,
    /// it would follow the later one. It is answered (not stored) when it is let go.
    private func answerHeldEarlierOnly(_ request: StoreRequest) {
        guard store.settings.minReplicas > 0 else { return }
        storeTracker.stored(request, now: .now())
        guard !replicaHold.isEmpty else { return }
        let conversation = StoreTracker.Conversation(request)
        replicaHold.update(matching: { StoreTracker.Conversation($0) == conversation }) { $0.overtaken = true }
    }

    /// A store found already made (its first answer lost) or given up on while it may have run
    /// leaves a seq this node has not pushed: the inbox is read back now, and nothing goes early
    /// to that recipient until a read issued after it has come back (`Session.mayMissPushes`).
    private func catchUpIfUnpushed(_ request: StoreRequest, _ outcome: StoreOutcome) {
        for recipient in sessions.sessions(of: request.to) where recipient.isBound {
            let pushedUpTo = max(recipient.confirmed, recipient.highestPushed)
            guard outcome.mayLeaveUnpushed(ambiguous: request.ambiguousSince != nil, pushedUpTo: pushedUpTo) else { continue }
            recipient.catchUp.doubt()
            catchUp(recipient)
        }
    }

    /// An early message that will not come numbered, or that its recipient had confirmed
    /// before (its sender sent it again), is retracted, with the reason its sender got.
    private func retractEarlyCopyIfDue(_ request: StoreRequest, _ outcome: StoreOutcome, answers: [Simp_Envelope]) {
        guard outcome.retractsEarlyCopy(ambiguous: request.ambiguousSince != nil) else { return }
        var retracted = Simp_Retracted()
        retracted.fromUser = request.from
        retracted.messageID = request.id
        if case .failed(let failed) = answers.first?.body {
            retracted.code = failed.code
            retracted.reason = failed.reason
        } else {
            retracted.code = .badRequest
            retracted.reason = "the sender had sent this message before"
        }
        metrics.earlyRetracted.increment()
        for recipient in sessions.sessions(of: request.to) { outbox.send(Simp_Envelope(.retracted(retracted)), on: recipient.control) }
    }

    /// What the sender is told about its message's store; the outcome is counted.
    private func answers(_ request: StoreRequest, _ outcome: StoreOutcome) -> [Simp_Envelope] {
        switch outcome {
        case .stored: metrics.stored.increment()
        case .duplicate: metrics.duplicates.increment()
        case .inboxFull: metrics.exceeded(.inboxSize)
        case .shareFull: metrics.exceeded(.inboxShare)
        case .replicasShort: metrics.replicaRefusals.increment()
        default: break
        }
        return DeliveryEngine.answers(request, outcome, limits: limits)
    }

    private var limits: DeliveryEngine.Limits {
        DeliveryEngine.Limits(inboxShare: store.bounds.share, minReplicas: store.settings.minReplicas,
                              replicaHoldSeconds: settings.replicaHoldLimit.nanoseconds / 1_000_000_000)
    }

    /// Completes when every queued and in-flight store has been answered.
    func drainStores() -> EventLoopFuture<Void> {
        loop.assertInEventLoop()
        writeReceipts(now: .now())
        guard !stores.isIdle else { return loop.makeSucceededVoidFuture() }
        let promise = loop.makePromise(of: Void.self)
        drainWaiters.append(promise)
        flushStores()
        return promise.futureResult
    }

    // MARK: pushes to recipients

    private func sync(_ session: Session) {
        store.pending(user: session.user, after: session.confirmed, limit: settings.syncLimit, on: loop).whenComplete { [self] result in
            guard sessions.isCurrent(session) else { return }
            switch result {
            case .success(let pending):
                session.synced = true
                pushStored(pending.items, to: session)
            case .failure(let error):
                logger.warning("sync failed; retrying", metadata: session.logMetadata.merging(["error": "\(error)"]) { $1 })
                loop.scheduleTask(in: .seconds(1)) { [self] in sync(session) }
            }
        }
    }

    /// Pushes a group's entries just copied into a member's inbox to the member's sessions here.
    private func pushGroupCopies(_ member: String, _ copies: [GroupCopy]) {
        for recipient in sessions.sessions(of: member) {
            for copy in copies {
                recipient.raiseNumberingFloor(copy.seq)
                if recipient.isBound { push(copy.seq, copy.push, to: recipient) }
            }
        }
        sendDatagrams()
    }

    /// Pushes inbox entries read back from the store (each carries its seq and sender).
    private func pushStored(_ items: [[UInt8]], to session: Session) {
        for bytes in items {
            guard let message = try? Simp_Message(serializedBytes: bytes) else { continue }
            push(message.seq, Push(stored: message, bytes: bytes, recipient: session.user), to: session)
        }
        sendDatagrams()
    }

    /// Queues the push for the next `sendDatagrams`.
    private func push(_ seq: UInt64, _ push: Push, to session: Session) {
        guard !session.pushes.contains(seq), udp != nil, session.address != nil else { return }
        queueDatagram(push.bytes, to: session)
        metrics.pushes.increment()
        session.highestPushed = max(session.highestPushed, seq)
        _ = session.pushes.push(seq, push, now: .now())
        pushing.insert(session.id)
        armTick()
    }

    private func queueDatagram(_ payload: [UInt8], to session: Session) {
        outgoing[session.id, default: (session, [])].payloads.append(payload)
    }

    /// Sends the queued payloads, a session's together in bundles when it takes them, and flushes.
    private func sendDatagrams() {
        for (session, payloads) in outgoing.values {
            guard session.takesBundles else {
                for payload in payloads { sendDatagram(to: session, kind: .data, payload: payload, flush: false) }
                continue
            }
            for datagram in DatagramBundle.pack(payloads) {
                sendDatagram(to: session, kind: datagram.kind, payload: datagram.payload, flush: false)
                if datagram.kind == .bundle { metrics.bundles.increment() }
            }
        }
        outgoing.removeAll(keepingCapacity: true)
        udp?.flush()
    }

    /// Seals under a fresh packet number and sends, to the validated address unless told otherwise.
    @discardableResult
    private func sendDatagram(to session: Session, kind: DatagramKind, payload: [UInt8], flush: Bool = true,
                              at target: SocketAddress? = nil) -> Bool {
        guard let udp, let address = target ?? session.address else { return false }
        let header = DatagramHeader(kind: kind, sessionID: session.id, packetNumber: session.takePacketNumber())
        guard let buffer = try? DatagramSeal.seal(header, payload: payload, key: session.key, direction: .toClient,
                                                  allocator: udp.allocator) else { return false }
        let envelope = AddressedEnvelope(remoteAddress: address, data: buffer)
        if flush { udp.writeAndFlush(envelope, promise: nil) } else { udp.write(envelope, promise: nil) }
        return true
    }

    private func retransmitDue(now: NIODeadline) {
        guard udp != nil else { return }
        var wrote = false
        for id in pushing {
            guard let session = sessions[id], !session.pushes.isEmpty else {
                pushing.remove(id)
                continue
            }
            guard session.isBound else { continue }
            let due = session.pushes.due(now: now)
            for bytes in due.resend {
                queueDatagram(bytes, to: session)
                metrics.retransmits.increment()
                wrote = true
            }
            // Given up on this path for now: pushed again after the client's next keepalive.
            metrics.pushesGivenUp.increment(by: Int64(due.parked))
        }
        if wrote { sendDatagrams() }
        writeReceipts(now: now)
        writePresence()
    }

    // MARK: receipts

    /// A cumulative receipt: the senders of the pushes it confirms are told at once; the mark
    /// is written with the tick's other receipts.
    func receipt(sessionID: UInt64, _ receipt: Simp_Receipt) {
        loop.assertInEventLoop()
        guard let session = sessions[sessionID] else { return }
        let confirmed = session.pushes.confirm(upTo: receipt.upToSeq, now: .now())
        session.raiseNumberingFloor(receipt.upToSeq)
        resendMissing(receipt.missing.prefix(RequestCost.missingPerReceipt), to: session)
        let elsewhere = sessions.sessions(of: session.user).lazy.filter { $0 !== session }.map(\.confirmed).max() ?? 0
        let effects = DeliveryEngine.receipt(upTo: receipt.upToSeq, pushes: confirmed, confirmed: session.confirmed,
                                             confirmedElsewhere: elsewhere, user: session.user, device: session.device)
        for push in effects.delivered { notifyDelivered(id: push.id, from: push.from, to: session.user, seq: push.seq, group: push.group) }
        guard let mark = effects.mark else { return }
        session.confirmed = mark.upTo
        recordReceipt(mark)
    }

    /// Resends what the receiver reports missing, within the session's resend budget (what is
    /// left out is resent by the retransmit timers, or asked for again). A seq this session
    /// never pushed (its store reply was lost with a Redis connection, say) is fetched from the
    /// inbox, so no gap stays; one such read at a time per session, however many receipts ask.
    private func resendMissing(_ seqs: ArraySlice<UInt64>, to session: Session) {
        guard udp != nil, !seqs.isEmpty else { return }
        let (resend, unknown) = session.pushes.missing(seqs)
        let now = NIODeadline.now()
        var budget = session.resendBudget ?? TokenBucket(rate: settings.resendBytesPerSecond, burst: settings.resendBytesPerSecond, now: now)
        var overBudget = false
        for bytes in resend {
            guard budget.take(bytes.count, now: now) else {
                overBudget = true
                break
            }
            queueDatagram(bytes, to: session)
            metrics.retransmits.increment()
        }
        session.resendBudget = budget
        if overBudget { metrics.exceeded(.resendBytes) }
        sendDatagrams()
        guard !unknown.isEmpty, !session.readingMissing else { return }
        session.readingMissing = true
        store.inboxEntries(user: session.user, seqs: unknown, on: loop).whenComplete { [self] result in
            session.readingMissing = false
            guard case .success(let items) = result, sessions.isCurrent(session) else { return }
            pushStored(items, to: session)
        }
    }

    /// Marks wait for the next retransmit tick (10 ms): nothing waits for them (senders were
    /// told from the pushes), and a quiet node writes one mark per recipient per tick instead
    /// of one per receipt.
    private func recordReceipt(_ mark: ReceiptLedger.Mark) {
        receipts.record(mark)
        armTick()
    }

    /// Writes the tick's marks in one round trip. A failed mark is written again a second
    /// later; entries come back only for marks that asked (their senders are told then).
    private func writeReceipts(now: NIODeadline) {
        let marks = receipts.take(now: now)
        guard !marks.isEmpty else { return }
        store.acknowledge(marks, on: loop).whenSuccess { [self] results in
            for (mark, result) in zip(marks, results) {
                switch result {
                case .success(let entries):
                    receipts.written(mark)
                    for bytes in entries { notifyDelivered(storedBytes: bytes, recipient: mark.user) }
                case .failure(let error):
                    logger.warning("receipt not stored; will retry", metadata: ["user": "\(mark.user)", "error": "\(error)"])
                    receipts.writeFailed(mark, now: .now())
                    armTick()
                }
            }
        }
    }

    private func notifyDelivered(storedBytes bytes: [UInt8], recipient: String) {
        guard let message = try? Simp_Message(serializedBytes: bytes) else { return }
        let push = Push(stored: message, bytes: [], recipient: recipient)
        // A copy for its sender's other devices, or a group's change, tells nobody.
        guard !push.isCopy else { return }
        notifyDelivered(id: message.messageID, from: message.fromUser, to: recipient, seq: message.seq, group: push.group)
    }

    /// Tells the sender's devices: those here at once, those on other nodes through their
    /// nodes (presence says which). A device whose notice is lost, or that is offline, asks
    /// with DeliveryQuery when it connects and now and then.
    private func notifyDelivered(id: String, from sender: String, to recipient: String, seq: UInt64, group: GroupPlace? = nil) {
        // A group message's sender hears which member confirmed it, by its place in the group.
        let to = group.map { GroupName.address($0.name) } ?? recipient
        let place = group?.seq ?? seq
        let member = group == nil ? "" : recipient
        let here = sessions.sessions(of: sender)
        for session in here { outbox.send(DeliveryEngine.delivered(id: id, to: to, seq: place, member: member), on: session.control) }
        guard DeliveryEngine.tellsOtherNodes(devicesHere: here.count, devicesKnown: here.map(\.devices).max() ?? 0) else { return }
        var item = Simp_Accepted()
        item.messageID = id
        item.toUser = to
        item.seq = place
        item.member = member
        if remoteDelivered.isEmpty { loop.execute { [self] in publishDelivered() } }
        remoteDelivered[sender, default: []].append(item)
    }

    /// This tick's delivered notices for senders not connected here, in one round trip to
    /// find their nodes and one to tell them.
    private func publishDelivered() {
        let notices = remoteDelivered
        remoteDelivered.removeAll(keepingCapacity: true)
        guard !notices.isEmpty else { return }
        store.publishDelivered(notices, on: loop).whenFailure { [logger] error in
            logger.debug("delivered notices not published; the senders will ask", metadata: ["error": "\(error)"])
        }
    }

    // MARK: other nodes

    /// What another node told this one.
    func received(_ notice: NodeNotice) {
        loop.assertInEventLoop()
        switch notice {
        case .inbox(let user):
            for session in sessions.sessions(of: user) where session.isBound { catchUp(session) }
        case .delivered(let sender, let messages):
            for session in sessions.sessions(of: sender) {
                for item in messages {
                    outbox.send(DeliveryEngine.delivered(id: item.messageID, to: item.toUser, seq: item.seq, member: item.member), on: session.control)
                }
            }
        case .devices(let user, let count):
            deviceCount(of: user, is: count)
        }
    }

    /// This node's notices may have been lost (its subscription broke and was made again): every
    /// bound session reads its inbox, so nothing stored meanwhile on another node waits for the
    /// next message or reconnect to be pushed.
    func catchUpEverySession() {
        loop.assertInEventLoop()
        for session in sessions.all where session.isBound && session.synced { catchUp(session) }
    }

    /// Pushes what another node stored for this session since its last push. One read at a
    /// time per session: notices that arrive meanwhile make one more read after it.
    private func catchUp(_ session: Session) {
        guard let covering = session.catchUp.want() else { return }
        let after = max(session.confirmed, session.highestPushed)
        store.pending(user: session.user, after: after, limit: settings.syncLimit, on: loop).whenComplete { [self] result in
            guard sessions.isCurrent(session) else { return }
            if case .success(let pending) = result { pushStored(pending.items, to: session) }
            if case .failure(let error) = result {
                logger.warning("catch-up read failed; retrying", metadata: session.logMetadata.merging(["error": "\(error)"]) { $1 })
            }
            guard let wait = session.catchUp.finished(covering: covering, succeeded: (try? result.get()) != nil) else { return }
            loop.scheduleTask(in: wait) { [self] in catchUp(session) }
        }
    }

    /// Answers a reconnected sender: Delivered for each message its recipient confirmed.
    /// Each item of a query is two Redis commands; the client asks about 512 at a time.
    static let maxQueryItems = 512

    func answer(_ query: Simp_DeliveryQuery, sessionID: UInt64) {
        loop.assertInEventLoop()
        guard let session = sessions[sessionID] else { return }
        guard query.messages.count <= Self.maxQueryItems else {
            outbox.send(.error(.badRequest, "a query asks about at most \(Self.maxQueryItems) messages, not \(query.messages.count)"),
                        on: session.control)
            return
        }
        store.confirmedOf(session.user, query.messages, on: loop).whenSuccess { [self] confirmed in
            for item in confirmed {
                outbox.send(DeliveryEngine.delivered(id: item.messageID, to: item.toUser, seq: item.seq), on: session.control)
            }
        }
    }

    // MARK: shutdown

    func stop() {
        loop.assertInEventLoop()
        stopped = true
        tickTask?.cancel()
        tickTask = nil
        presenceTask?.cancel()
        presenceTask = nil
        probeTask?.cancel()
        probeTask = nil
    }

    static func describe(_ address: SocketAddress) -> String {
        "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
    }
}

func randomBytes(_ count: Int) -> [UInt8] {
    var rng = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}
