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
    var syncLimit = 10_000
    var maxStoreBatch = 512
    /// Store batches in Redis at once (one pipelined connection keeps their order).
    var maxStoreBatchesInFlight = 4
    var messagesPerSecond = 1000
    var messageBurst = 2000
}

/// Sessions, datagram routing, the store pipeline and retransmission of pushes.
/// All state is confined to `loop` (the UDP channel's event loop); every entry point
/// must run there. Redis work goes through the store's thread pool, never on the loop.
final class Router: @unchecked Sendable {
    let loop: any EventLoop
    let store: MessageStore
    let settings: RouterSettings
    let logger: Logger
    let metrics: ServerMetrics
    var udp: (any Channel)?

    private var sessions: [UInt64: Session] = [:]
    private var sessionByUser: [String: UInt64] = [:]
    private var stores: StorePipeline<StoreRequest>
    private var storesPending: Set<String> = []
    private var flushScheduled = false
    private var drainWaiters: [EventLoopPromise<Void>] = []
    private var unackedReceipts: [String: UInt64] = [:]
    /// Sessions with pushes not yet confirmed: the only ones the tick looks at, so idle
    /// sessions cost the tick nothing.
    private var pushing: Set<UInt64> = []
    private var tickTask: RepeatedTask?
    private let outbox: ControlOutbox

    init(loop: any EventLoop, store: MessageStore, settings: RouterSettings, metrics: ServerMetrics, logger: Logger) {
        self.loop = loop
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.outbox = ControlOutbox(loop: loop)
        self.stores = StorePipeline(maxBatch: settings.maxStoreBatch, maxInFlight: settings.maxStoreBatchesInFlight)
    }

    func start() {
        loop.assertInEventLoop()
        tickTask = loop.scheduleRepeatedTask(initialDelay: settings.tick, delay: settings.tick) { [self] _ in
            retransmitDue(now: .now())
        }
    }

    // MARK: sessions

    /// Opens a session for a user who presented a valid token; replaces their older one on this node.
    func openSession(user: String, control: any Channel, lastSeq: UInt64) -> EventLoopFuture<Simp_ConnectResponse> {
        loop.assertInEventLoop()
        if let old = sessionByUser[user], let previous = sessions[old] {
            closeSession(previous.id)
            previous.control.writeAndFlush(Simp_Envelope.error(.sessionReplaced, "a newer session for \(user) connected"), promise: nil)
            previous.control.close(promise: nil)
        }
        let session = Session(id: newSessionID(), user: user, control: control, bindToken: randomBytes(16),
                              syncFloor: lastSeq, policy: settings.retransmit,
                              bucket: TokenBucket(rate: settings.messagesPerSecond, burst: settings.messageBurst, now: .now()))
        sessions[session.id] = session
        metrics.sessions.set(Int64(sessions.count))
        sessionByUser[user] = session.id
        return store.pending(user: user, after: lastSeq, limit: 0, on: loop).map { [self] pending in
            session.syncFloor = max(lastSeq, pending.confirmed)
            // The client has more than the server knows it confirmed: its last receipt was lost
            // with the previous connection (or node). Apply it now.
            if lastSeq > pending.confirmed { confirm(user: user, upTo: lastSeq) }
            var response = Simp_ConnectResponse()
            response.sessionID = session.id
            response.bindToken = Data(session.bindToken)
            response.confirmedSeq = pending.confirmed
            response.heartbeatMillis = UInt32(settings.heartbeat.nanoseconds / 1_000_000)
            response.user = user
            response.udpPort = UInt32(udp?.localAddress?.port ?? 0)
            response.sessionKey = session.key.withUnsafeBytes { Data($0) }
            return response
        }.flatMapErrorThrowing { [self] error in
            closeSession(session.id)
            throw error
        }
    }

    func closeSession(_ id: UInt64) {
        loop.assertInEventLoop()
        guard let session = sessions.removeValue(forKey: id) else { return }
        metrics.sessions.set(Int64(sessions.count))
        if sessionByUser[session.user] == id { sessionByUser[session.user] = nil }
        store.clearPresence(user: session.user, session: id, on: loop).whenFailure { [logger] error in
            logger.debug("presence not cleared", metadata: ["error": "\(error)"])
        }
    }

    var sessionCount: Int { sessions.count }

    private func newSessionID() -> UInt64 {
        var id: UInt64 = 0
        while id == 0 || sessions[id] != nil { id = UInt64.random(in: 1...UInt64.max) }
        return id
    }

    // MARK: datagrams in

    func receive(_ envelope: AddressedEnvelope<ByteBuffer>) {
        loop.assertInEventLoop()
        metrics.datagramsIn.increment()
        var buffer = envelope.data
        let header: DatagramHeader
        do {
            header = try Datagram.decodeHeader(&buffer)
        } catch .payloadTooLarge {
            metrics.dropped(.oversize)
            metrics.exceeded(.datagramSize)
            tellOversize(envelope)
            return
        } catch {
            metrics.dropped(.malformed)
            return
        }
        guard let session = sessions[header.sessionID] else {
            metrics.dropped(.unknownSession)
            return
        }
        // Nothing is parsed or acted on before it opens under the session key, exactly once.
        guard let payload = try? DatagramSeal.open(header, sealed: buffer, key: session.key, direction: .toServer) else {
            metrics.dropped(.unsealable)
            return
        }
        guard session.replay.accept(header.packetNumber) else {
            metrics.dropped(.replayed)
            return
        }
        switch header.kind {
        case .bind: bind(session, token: payload, from: envelope.remoteAddress)
        case .data: data(session, payload: payload, from: envelope.remoteAddress, size: envelope.data.readableBytes)
        case .keepalive: keepalive(session, from: envelope.remoteAddress, size: envelope.data.readableBytes)
        case .pong, .challenge: metrics.dropped(.malformed)
        }
    }

    /// A datagram for a bound session from another address: the client's NAT mapping (or
    /// socket) may have changed, or someone on the path rewrote its source. Challenge the new
    /// address; only the session's own control connection can answer. Until it does, that
    /// address gets nothing but challenges, within three times the bytes it sent us.
    private func challenge(_ session: Session, from address: SocketAddress, size: Int) {
        metrics.dropped(.unvalidatedAddress)
        let now = NIODeadline.now()
        if session.pathChallenge?.address != address {
            session.pathChallenge = PathChallenge(address: address, token: randomBytes(16))
        }
        session.pathChallenge!.budget.receive(size)
        guard now - session.pathChallenge!.sentAt >= .milliseconds(200) else { return }
        let token = session.pathChallenge!.token
        guard session.pathChallenge!.budget.spend(DatagramHeader.size + token.count + DatagramSeal.tagSize) else {
            metrics.dropped(.amplification)
            return
        }
        session.pathChallenge!.sentAt = now
        sendDatagram(to: session, kind: .challenge, payload: token, at: address)
    }

    /// The session's control connection returned the challenge token: the new address is its.
    func pathResponse(sessionID: UInt64, token: [UInt8]) {
        loop.assertInEventLoop()
        guard let session = sessions[sessionID], let pending = session.pathChallenge,
              constantTimeEqual(token, pending.token) else { return }
        session.pathChallenge = nil
        session.address = pending.address
        sendBound(session)
        refreshPresence(session)
        session.outbound.expediteAll(now: .now())
    }

    private func bind(_ session: Session, token: [UInt8], from address: SocketAddress) {
        if let bound = session.address {
            // A repeated bind from the validated address: the client missed our answer.
            if bound == address { sendBound(session) }
            return
        }
        guard !session.bindToken.isEmpty, constantTimeEqual(token, session.bindToken) else {
            // The datagram opened under this session's key, so its control connection may be told.
            metrics.dropped(.badBindToken)
            outbox.send(Simp_Envelope.error(.invalidToken, "bind token does not belong to this session"), on: session.control)
            return
        }
        session.bindToken = []
        session.address = address
        sendBound(session)
        refreshPresence(session)
        sync(session)
    }

    private func sendBound(_ session: Session) {
        var bound = Simp_Bound()
        bound.address = session.address.map(Self.describe) ?? ""
        outbox.send(Simp_Envelope(.bound(bound)), on: session.control)
        sendDatagram(to: session, kind: .pong, payload: [])
    }

    private func keepalive(_ session: Session, from address: SocketAddress, size: Int) {
        guard fromValidatedAddress(session, address, size: size) else { return }
        sendDatagram(to: session, kind: .pong, payload: [])
        unpark(session)
        if NIODeadline.now() - session.lastPresenceWrite > .seconds(Int64(store.settings.presenceTTLSeconds / 3)) {
            refreshPresence(session)
        }
    }

    /// The path works again (a keepalive came through): push what was given up, in order.
    private func unpark(_ session: Session) {
        guard !session.parked.isEmpty else { return }
        let parked = session.parked.sorted { $0.key < $1.key }
        session.parked.removeAll()
        for (seq, bytes) in parked { push(seq: seq, bytes: bytes, to: session) }
        udp?.flush()
    }

    private func refreshPresence(_ session: Session) {
        guard let address = session.address else { return }
        session.lastPresenceWrite = .now()
        store.setPresence(user: session.user, node: settings.nodeID, address: Self.describe(address),
                          session: session.id, on: loop).whenFailure { [logger] error in
            logger.warning("presence not written", metadata: ["error": "\(error)"])
        }
    }

    /// True when the datagram came from the session's validated address; otherwise it is
    /// dropped, and a bound session's new address is challenged.
    private func fromValidatedAddress(_ session: Session, _ address: SocketAddress, size: Int) -> Bool {
        guard session.address != address else { return true }
        if session.isBound { challenge(session, from: address, size: size) } else { metrics.dropped(.unvalidatedAddress) }
        return false
    }

    private func data(_ session: Session, payload: [UInt8], from address: SocketAddress, size: Int) {
        guard fromValidatedAddress(session, address, size: size) else { return }
        guard session.bucket.take(now: .now()) else {
            rateLimited(session)
            return
        }
        guard var message = try? Simp_Message(serializedBytes: payload) else {
            metrics.dropped(.malformed)
            return
        }
        if let problem = MessageRules.problem(in: message) {
            let failed = Simp_Failed(messageID: message.messageID, to: message.toUser, code: problem.code, reason: problem.reason)
            outbox.send(Simp_Envelope(.failed(failed)), on: session.control)
            return
        }
        let order = message.clientSeq
        // The sender is the session the datagram came on, whatever the datagram claims.
        message.fromUser = session.user
        message.seq = 0
        message.clientSeq = 0
        message.serverTime = Int64(Date().timeIntervalSince1970 * 1000)
        let bytes: [UInt8] = (try? message.serializedBytes()) ?? []
        let request = StoreRequest(from: session.user, id: message.messageID, to: message.toUser, bytes: bytes)
        guard order > 0 else {
            enqueueStore(request)
            return
        }
        switch session.sendOrder.receive(order, request) {
        case .release(let ready): ready.forEach { enqueueStore($0) }
        case .late(let again): enqueueStore(again)
        case .withdrawn: sendWithdrawn(session, id: request.id, to: request.to)
        case .held: reportMissing(session)
        case .dropped: break
        }
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
        guard now - (session.lastLimitError[code] ?? .distantPast) >= .seconds(1) else { return }
        session.lastLimitError[code] = now
        outbox.send(Simp_Envelope.error(code, reason), on: session.control)
    }

    /// The session's send order waits for a number: ask for it now rather than after the
    /// client's timeout. Once per gap, and again every 200 ms while it stays open.
    private func reportMissing(_ session: Session) {
        let now = NIODeadline.now()
        let next = session.sendOrder.next
        guard next != session.lastMissingReported || now - session.lastMissingAt >= .milliseconds(200) else { return }
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
        // A resend of a message whose store is still queued, in flight or being retried is
        // answered by that store's outcome; a second copy could contradict it.
        guard storesPending.insert(Self.storeKey(request)).inserted else { return }
        stores.enqueue(request)
        scheduleFlush()
    }

    private static func storeKey(_ request: StoreRequest) -> String { "\(request.from)\u{0}\(request.id)" }

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
            store.store(batch, on: loop).whenComplete { [self] result in
                // The store never fails as a whole: an outage is an outcome per message.
                let outcomes = (try? result.get()) ?? []
                storeCompleted(batch, outcomes)
            }
        }
        if stores.isIdle { finishDrain() }
    }

    private func storeCompleted(_ batch: [StoreRequest], _ outcomes: [StoreOutcome]) {
        var retry: [StoreRequest] = []
        for (request, outcome) in zip(batch, outcomes) {
            if let again = unsettled(request, outcome) { retry.append(again) } else { settle(request, outcome) }
        }
        udp?.flush()
        switch stores.completed(retry: retry) {
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
        storesPending.remove(Self.storeKey(request))
        if case .stored(let seq, let bytes) = outcome,
           let recipient = sessionByUser[request.to].flatMap({ sessions[$0] }), recipient.isBound {
            push(seq: seq, bytes: bytes, to: recipient)
        }
        let envelopes = answers(request, outcome)
        guard let sender = sessionByUser[request.from].flatMap({ sessions[$0] }) else { return }
        for envelope in envelopes { outbox.send(envelope, on: sender.control) }
    }

    /// What the sender is told about its message's store.
    private func answers(_ request: StoreRequest, _ outcome: StoreOutcome) -> [Simp_Envelope] {
        switch outcome {
        case .stored(let seq, _):
            metrics.stored.increment()
            return [Self.accepted(request, seq: seq)]
        case .duplicate(let seq, let delivered):
            metrics.duplicates.increment()
            let accepted = Self.accepted(request, seq: seq)
            return delivered ? [accepted, Self.delivered(id: request.id, to: request.to, seq: seq)] : [accepted]
        case .unknownRecipient:
            return [Self.failed(request, .unknownUser, "no such user: \(request.to)")]
        case .inboxFull:
            metrics.exceeded(.inboxSize)
            return [Self.failed(request, .inboxFull, "\(request.to)'s inbox is full")]
        case .unavailable(let error):
            let doubt = request.ambiguousSince == nil ? "" : "; it may still be delivered"
            return [Self.failed(request, .storeUnavailable, "message store unavailable: \(error.message)\(doubt)")]
        }
    }

    private static func accepted(_ request: StoreRequest, seq: UInt64) -> Simp_Envelope {
        var accepted = Simp_Accepted()
        accepted.messageID = request.id
        accepted.toUser = request.to
        accepted.seq = seq
        return Simp_Envelope(.accepted(accepted))
    }

    private static func failed(_ request: StoreRequest, _ code: Simp_ErrorCode, _ reason: String) -> Simp_Envelope {
        Simp_Envelope(.failed(Simp_Failed(messageID: request.id, to: request.to, code: code, reason: reason)))
    }

    /// Completes when every queued and in-flight store has been answered.
    func drainStores() -> EventLoopFuture<Void> {
        loop.assertInEventLoop()
        guard !stores.isIdle else { return loop.makeSucceededVoidFuture() }
        let promise = loop.makePromise(of: Void.self)
        drainWaiters.append(promise)
        flushStores()
        return promise.futureResult
    }

    // MARK: pushes to recipients

    private func sync(_ session: Session) {
        store.pending(user: session.user, after: session.syncFloor, limit: settings.syncLimit, on: loop).whenComplete { [self] result in
            guard sessions[session.id] === session else { return }
            switch result {
            case .success(let pending):
                for bytes in pending.items {
                    guard let seq = try? Simp_Message(serializedBytes: bytes).seq else { continue }
                    push(seq: seq, bytes: bytes, to: session)
                }
                udp?.flush()
            case .failure(let error):
                logger.warning("sync failed; retrying", metadata: ["user": "\(session.user)", "error": "\(error)"])
                loop.scheduleTask(in: .seconds(1)) { [self] in sync(session) }
            }
        }
    }

    private func push(seq: UInt64, bytes: [UInt8], to session: Session) {
        guard !session.outbound.contains(seq), sendDatagram(to: session, kind: .data, payload: bytes, flush: false) else { return }
        metrics.pushes.increment()
        session.outbound.track(seq, payload: bytes, now: .now())
        pushing.insert(session.id)
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
        guard let udp else { return }
        var wrote = false
        for id in pushing {
            guard let session = sessions[id], !session.outbound.isEmpty else {
                pushing.remove(id)
                continue
            }
            guard session.isBound else { continue }
            let due = session.outbound.due(now: now)
            for (_, plaintext) in due.resend {
                sendDatagram(to: session, kind: .data, payload: plaintext, flush: false)
                metrics.retransmits.increment()
                wrote = true
            }
            // Given up on this path for now: pushed again after the client's next keepalive.
            metrics.pushesGivenUp.increment(by: Int64(due.expired.count))
            for (seq, plaintext) in due.expired { session.parked[seq] = plaintext }
        }
        if wrote { udp.flush() }
        retryReceipts()
    }

    // MARK: receipts

    func receipt(sessionID: UInt64, _ receipt: Simp_Receipt) {
        loop.assertInEventLoop()
        guard let session = sessions[sessionID] else { return }
        let now = NIODeadline.now()
        for seq in session.outbound.pendingKeys where seq <= receipt.upToSeq {
            session.outbound.acknowledge(seq, now: now)
        }
        if !session.parked.isEmpty { session.parked = session.parked.filter { $0.key > receipt.upToSeq } }
        resendMissing(receipt.missing.prefix(64), to: session)
        guard receipt.upToSeq > session.lastReceipt else { return }
        session.lastReceipt = receipt.upToSeq
        confirm(user: session.user, upTo: receipt.upToSeq)
    }

    /// Resends what the receiver reports missing. A seq this session never pushed (its store
    /// reply was lost with a Redis connection, say) is fetched from the inbox, so no gap stays.
    private func resendMissing(_ seqs: ArraySlice<UInt64>, to session: Session) {
        guard let udp, !seqs.isEmpty else { return }
        var unknown: [UInt64] = []
        for seq in seqs {
            guard let plaintext = session.outbound.peek(seq) else {
                unknown.append(seq)
                continue
            }
            sendDatagram(to: session, kind: .data, payload: plaintext, flush: false)
            metrics.retransmits.increment()
        }
        udp.flush()
        guard !unknown.isEmpty else { return }
        store.inboxEntries(user: session.user, seqs: unknown, on: loop).whenSuccess { [self] items in
            guard sessions[session.id] === session else { return }
            for bytes in items {
                guard let seq = try? Simp_Message(serializedBytes: bytes).seq else { continue }
                push(seq: seq, bytes: bytes, to: session)
            }
            udp.flush()
        }
    }

    private func confirm(user: String, upTo: UInt64) {
        store.acknowledge(user: user, upTo: upTo, on: loop).whenComplete { [self] result in
            switch result {
            case .success(let items):
                if let waiting = unackedReceipts[user], waiting <= upTo { unackedReceipts[user] = nil }
                for bytes in items { notifyDelivered(bytes, recipient: user) }
            case .failure(let error):
                logger.warning("receipt not stored; will retry", metadata: ["user": "\(user)", "error": "\(error)"])
                unackedReceipts[user] = max(unackedReceipts[user] ?? 0, upTo)
            }
        }
    }

    private var lastReceiptRetry: NIODeadline = .distantPast

    private func retryReceipts() {
        guard !unackedReceipts.isEmpty, NIODeadline.now() - lastReceiptRetry > .seconds(1) else { return }
        lastReceiptRetry = .now()
        for (user, upTo) in unackedReceipts { confirm(user: user, upTo: upTo) }
    }

    /// Tells an online sender; an offline one asks with DeliveryQuery when it connects.
    private func notifyDelivered(_ bytes: [UInt8], recipient: String) {
        guard let message = try? Simp_Message(serializedBytes: bytes),
              let sender = sessionByUser[message.fromUser].flatMap({ sessions[$0] }) else { return }
        outbox.send(Self.delivered(id: message.messageID, to: recipient, seq: message.seq), on: sender.control)
    }

    private static func delivered(id: String, to: String, seq: UInt64) -> Simp_Envelope {
        var delivered = Simp_Delivered()
        delivered.messageID = id
        delivered.toUser = to
        delivered.seq = seq
        return Simp_Envelope(.delivered(delivered))
    }

    /// Answers a reconnected sender: Delivered for each message its recipient confirmed.
    func answer(_ query: Simp_DeliveryQuery, sessionID: UInt64) {
        loop.assertInEventLoop()
        guard let session = sessions[sessionID] else { return }
        let recipients = Array(Set(query.messages.map(\.toUser)))
        store.confirmedMarks(recipients, on: loop).whenSuccess { [self] marks in
            for item in query.messages where item.seq > 0 && (marks[item.toUser] ?? 0) >= item.seq {
                outbox.send(Self.delivered(id: item.messageID, to: item.toUser, seq: item.seq), on: session.control)
            }
        }
    }

    // MARK: shutdown

    func stop() {
        loop.assertInEventLoop()
        tickTask?.cancel()
        tickTask = nil
    }

    static func describe(_ address: SocketAddress) -> String {
        "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
    }
}

func randomBytes(_ count: Int) -> [UInt8] {
    var rng = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}
