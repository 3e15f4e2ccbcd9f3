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
    var maxMessageBytes = LongText.defaultMaxBytes
    /// With `--redis-min-replicas`: how long a store waits for its shard's replicas before it
    /// fails (REPLICAS_UNAVAILABLE), and how often a held shard is asked for them.
    var replicaHoldLimit: TimeAmount = .seconds(10)
    var replicaProbeInterval: TimeAmount = .milliseconds(500)
    /// Bytes a session's receipts may have resent a second (and in a burst), over what the
    /// retransmit timers send.
    var resendBytesPerSecond = 64 * 1024
    /// Users one user may write to for the first time per hour (`RecipientPacing`).
    var newRecipientsPerHour = 100
}

/// The I/O driver of one node's delivery: it reads the clock once per event, feeds datagrams,
/// control requests, store answers, timers and other nodes' notices to the `DeliveryEngine`,
/// and carries out the actions it returns, in order. It decides nothing. All state is confined
/// to `loop` (the UDP channel's event loop); every entry point must run there. Redis replies
/// arrive on the same loop (one pipelined connection per loop), never blocking it.
final class Router: @unchecked Sendable {
    let loop: any EventLoop
    let store: MessageStore
    let logger: Logger
    let metrics: ServerMetrics
    var udp: (any Channel)? {
        didSet { engine.hasUDP = udp != nil }
    }

    private var engine: DeliveryEngine
    /// Each session's control connection, by session id.
    private var controls: [UInt64: any Channel] = [:]
    private let outbox: ControlOutbox
    private let groups: GroupRelay
    private var timers: [DeliveryEngine.Due: Scheduled<Void>] = [:]
    private var drainWaiters: [EventLoopPromise<Void>] = []
    /// Actions are being carried out: an event fed meanwhile (a future that completed at once)
    /// adds its actions to those, in order, instead of starting a second round.
    private var performing = false
    /// Charges a user's request budget with work done for it outside a request (`Admission.charge`).
    var charge: @Sendable (_ user: String, _ units: Int) -> Void = { _, _ in }

    init(loop: any EventLoop, store: MessageStore, settings: RouterSettings, metrics: ServerMetrics, logger: Logger) {
        self.loop = loop
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.outbox = ControlOutbox(loop: loop)
        let configuration = DeliveryEngine.Configuration(router: settings, presenceTTLSeconds: store.settings.presenceTTLSeconds,
                                                         minReplicas: store.settings.minReplicas, inboxShare: store.bounds.share)
        self.engine = DeliveryEngine(configuration: configuration, metrics: metrics, logger: logger, shardOf: { [store] in store.shard(of: $0) })
        self.groups = GroupRelay(store: store, loop: loop, logger: logger, maxBatch: settings.maxStoreBatch)
        groups.copied = { [unowned self] member, copies in feed { $0.groupCopied(member, copies, now: $1) } }
        groups.answer = { [unowned self] request, envelopes in feed { engine, _ in engine.answerSender(request, envelopes) } }
        groups.recheck = { [unowned self] member in feed { engine, _ in engine.recheck(member: member) } }
        groups.floor = { [unowned self] member in engine.numberingFloor(of: member) }
        groups.held = { [metrics] members in metrics.groupCopiesHeld.increment(by: Int64(members)) }
        groups.resumed = { [metrics] in metrics.groupCopiesResumed.increment() }
    }

    /// The time of an event, read once for it.
    static var now: Moment {
        Moment(deadline: .now(), millis: Int64(Date().timeIntervalSince1970 * 1000))
    }

    /// Feeds one event to the engine and carries out what it decided.
    @discardableResult
    private func feed<Answer>(_ event: (inout DeliveryEngine, Moment) -> Answer) -> Answer {
        loop.assertInEventLoop()
        let answer = event(&engine, Self.now)
        perform()
        return answer
    }

    /// Makes a membership change (a control request); answered once its entries are copied.
    /// `invited`: users a create or add invites rather than adds.
    /// `entryBy`: who the entries name as making the change, when not `by` (an accept names who invited).
    func changeGroup(_ action: MessageStore.GroupChangeAction, group: String, by: String, entryBy: String? = nil, users: [String],
                     invited: [String] = [], maxMembers: Int, nowMillis: Int64) -> EventLoopFuture<MessageStore.GroupChangeResult> {
        loop.assertInEventLoop()
        return groups.change(action, group: group, by: by, entryBy: entryBy ?? by, users: users, invited: invited, maxMembers: maxMembers,
                             nowMillis: nowMillis)
    }

    /// What a read request needs of its session: who reads, and how far it confirmed.
    func reader(of sessionID: UInt64) -> ReadReceipts.Reader? {
        loop.assertInEventLoop()
        guard let session = engine.sessions[sessionID] else { return nil }
        return ReadReceipts.Reader(user: session.user, device: session.device, confirmed: session.confirmed,
                                   otherDevices: session.devices > 1)
    }

    /// Each session's congestion window, RTT and losses, as text (GET /sessions).
    func pathReport() -> EventLoopFuture<String> {
        loop.submit { [self] in engine.pathReport() }
    }

    /// Tells those who may see `change.user`'s presence, on every node where they are.
    private func announce(_ change: PresenceChange) {
        store.presenceCircle(of: change.user, on: loop).flatMap { [store, loop, charge] circle in
            // The user whose connect or disconnect it is pays for it, like for a request.
            charge(change.user, RequestCost.presenceRead(groups: circle.groups, users: circle.users.count))
            return store.nodes(of: circle.users, watching: change.user, on: loop)
        }.whenSuccess { [self] byNode in
            for (node, watchers) in byNode {
                if node == engine.settings.nodeID {
                    feed { engine, _ in engine.relayPresence(change, to: watchers) }
                } else {
                    store.publish(.presence(change, watchers: watchers), to: [node], on: loop)
                }
            }
        }
    }

    /// Stores a notice of the server's (`StoreRequest.notice`) in its recipient's inbox, pushed
    /// like any message; nobody is answered.
    func notify(_ notice: StoreRequest) {
        feed { engine, now in engine.enqueueStore(notice, now: now) }
    }

    /// The user blocked someone or turned contacts-only on: its sessions here, and on `nodes`,
    /// take nothing early from now on.
    func filtered(user: String, nodes: [String]) {
        feed { engine, _ in engine.received(.filtered(user: user)) }
        let others = nodes.filter { $0 != engine.settings.nodeID }
        if !others.isEmpty { store.publish(.filtered(user: user), to: others, on: loop) }
    }

    func start() {
        feed { engine, _ in engine.start() }
    }

    func stop() {
        feed { engine, _ in engine.stop() }
        for (due, task) in timers where due.isTimer {
            task.cancel()
            timers[due] = nil
        }
    }

    // MARK: sessions

    /// Opens a session for a device of a user who presented a valid token; replaces the same
    /// device's older session on this node. Its other devices stay.
    func openSession(_ request: DeliveryEngine.SessionRequest, control: any Channel) -> EventLoopFuture<Simp_ConnectResponse> {
        loop.assertInEventLoop()
        return store.registerDevice(user: request.user, device: request.device, nowMillis: Self.now.millis,
                                    issuedMillis: request.tokenIssuedMillis, on: loop).flatMap { [self] registration in
            if let refusal = DeliveryEngine.refusal(registration, request) { return loop.makeFailedFuture(refusal) }
            guard case .registered(let cursor, let devices, let nodes, let filtered) = registration else { preconditionFailure("refused above") }
            var wanted = request
            if filtered { wanted.takesEarly = false }
            let opened = feed { engine, now in engine.open(wanted, devices: devices, nodes: nodes, now: now) }
            let session = opened.session
            controls[session.id] = control
            return store.repairNumbering(user: request.user, lastSeq: request.lastSeq, on: loop).map { [self] moved in
                feed { engine, _ in engine.numberingChecked(session, lastSeq: request.lastSeq, cursor: cursor, moved: moved) }
                return engine.connectResponse(session, bindToken: opened.bindToken, cursor: cursor, devices: devices,
                                              udpPort: udp?.localAddress?.port ?? 0)
            }.flatMapErrorThrowing { [self] error in
                closeSession(session.id)
                throw error
            }
        }
    }

    func closeSession(_ id: UInt64) {
        feed { engine, now in engine.close(id, now: now) }
    }

    var sessionCount: Int { engine.sessionCount }

    /// A reload's limits: the data rate for sessions opened from now on, the inbox share as
    /// refusals name it.
    func reload(messagesPerSecond rate: Int, burst: Int, inboxShare: Int) {
        feed { engine, _ in engine.reload(messagesPerSecond: rate, burst: burst, inboxShare: inboxShare) }
    }

    /// An administrator closes the user's sessions on this node (only `session`, when given):
    /// the clients are told not to reconnect. Returns whether a session was closed.
    @discardableResult
    func closeByAdministrator(user: String, session id: UInt64?) -> Bool {
        feed { engine, now in engine.closeByAdministrator(user: user, session: id, now: now) }
    }

    // MARK: events from clients and other nodes

    func receive(_ envelope: AddressedEnvelope<ByteBuffer>) {
        feed { engine, now in engine.receive(envelope, now: now) }
    }

    /// The session's control connection returned the challenge token.
    func pathResponse(sessionID: UInt64, token: [UInt8]) {
        feed { engine, now in engine.pathResponse(sessionID: sessionID, token: token, now: now) }
    }

    func withdraw(sessionID: UInt64, _ withdraw: Simp_Withdraw) {
        feed { engine, now in engine.withdraw(sessionID: sessionID, withdraw, now: now) }
    }

    func receipt(sessionID: UInt64, _ receipt: Simp_Receipt) {
        feed { engine, now in engine.receipt(sessionID: sessionID, receipt, now: now) }
    }

    /// Answers a reconnected sender: Delivered for each message its recipient confirmed.
    /// Completes once the `delivered` frames of the query's answer are queued.
    func answer(_ query: Simp_DeliveryQuery, sessionID: UInt64) -> EventLoopFuture<Void> {
        guard let asked = feed({ engine, _ in engine.query(query, sessionID: sessionID) }) else {
            return loop.makeSucceededVoidFuture()
        }
        return store.confirmedOf(asked.user, asked.items, on: loop).map { [self] confirmed in
            feed { engine, _ in engine.confirmedOf(session: sessionID, confirmed) }
        }
    }

    func received(_ notice: NodeNotice) {
        feed { engine, _ in engine.received(notice) }
    }

    func catchUpEverySession() {
        feed { engine, _ in engine.catchUpEverySession() }
    }

    /// Completes when every queued and in-flight store has been answered.
    func drainStores() -> EventLoopFuture<Void> {
        feed { engine, now in engine.drain(now: now) }
        // Waited for only when stores are under way; the engine says `storesIdle` when the
        // last is answered.
        guard !engine.storesIdle else { return loop.makeSucceededVoidFuture() }
        let promise = loop.makePromise(of: Void.self)
        drainWaiters.append(promise)
        return promise.futureResult
    }

    // MARK: carrying out

    private func perform() {
        guard !performing else { return }
        performing = true
        // By index, not by taking the array: the buffer is kept for the next event, and an
        // event fed meanwhile appends to what is still to do.
        var next = 0
        while next < engine.actions.count {
            let action = engine.actions[next]
            next += 1
            carryOut(action)
        }
        // A burst (a sync of thousands) does not keep its capacity for good.
        if engine.actions.capacity > 4_096 { engine.actions = [] } else { engine.actions.removeAll(keepingCapacity: true) }
        performing = false
    }

    private func carryOut(_ action: DeliveryAction) {
        switch action {
        case .send(let envelope, let id):
            guard let control = controls[id] else { return }
            outbox.send(envelope, on: control)
        case .end(let id, let envelope):
            guard let control = controls.removeValue(forKey: id) else { return }
            control.writeAndFlush(envelope, promise: nil)
            control.close(promise: nil)
        case .closed(let id):
            controls[id] = nil
        case .datagram(let datagram):
            send(datagram)
        case .flushDatagrams:
            udp?.flush()
        case .later(let due):
            loop.execute { [self] in feed { $0.due(due, now: $1) } }
        case .after(let delay, let due):
            timers[due] = loop.scheduleTask(in: delay) { [self] in
                timers[due] = nil
                feed { $0.due(due, now: $1) }
            }
        case .storesIdle:
            let waiters = drainWaiters
            drainWaiters.removeAll()
            waiters.forEach { $0.succeed() }
        default:
            carryOutInStore(action)
        }
    }

    /// The actions that go to Redis; each answer is fed back as an event.
    private func carryOutInStore(_ action: DeliveryAction) {
        switch action {
        case .store(let batch):
            store.store(batch.items, floor: { [unowned self] in engine.numberingFloor(of: $0) }, on: loop).whenComplete { [self] result in
                // An outage is an outcome per message; the whole batch fails only when the
                // Redis client is shut down, and then each message hears so.
                let outcomes = (try? result.get())
                    ?? batch.items.map { _ in .unavailable(RedisError(.closed, "the Redis client is shut down")) }
                feed { $0.storeCompleted(batch, outcomes, now: $1) }
            }
        case .relay(let request, let group):
            groups.enqueue(request, group: group)
        case .resumeGroupCopies(let member, let held):
            for group in held { groups.resume(member: member, group: group) }
        case .markFailed(let request, let code):
            store.markFailed(request, code: code, on: loop).whenFailure { [logger] error in
                logger.warning("could not record that message \(request.id) from \(request.from) failed for good; a resend of it may be stored after later ones: \(error)")
            }
        case .probeReplicas(let shard):
            store.replicasOnline(at: shard, on: loop).whenComplete { [self] result in
                feed { engine, _ in engine.replicasProbed(shard, result) }
            }
        case .readInbox(let id, let user, let after, let read):
            store.unconfirmed(of: user, after: after, limit: engine.settings.syncLimit, on: loop).whenComplete { [self] result in
                feed { $0.inboxRead(session: id, read, result.map(\.items), now: $1) }
            }
        case .readEntries(let id, let user, let seqs):
            store.inboxEntries(user: user, seqs: seqs, on: loop).whenComplete { [self] result in
                feed { $0.entriesRead(session: id, result, now: $1) }
            }
        case .writeMarks(let marks):
            store.acknowledge(marks, on: loop).whenSuccess { [self] results in
                feed { $0.marksWritten(marks, results, now: $1) }
            }
        default:
            carryOutElsewhere(action)
        }
    }

    private func carryOutElsewhere(_ action: DeliveryAction) {
        switch action {
        case .setPresence(let entries):
            store.setPresence(entries, on: loop).whenComplete { [self] result in
                switch result {
                case .success(let first): feed { engine, _ in engine.presenceWritten(entries, first: first) }
                case .failure(let error): logger.warning("presence not written", metadata: ["error": "\(error)"])
                }
            }
        case .renewPresence(let entries, let ids):
            store.renewPresence(entries, on: loop).whenComplete { [self] result in
                switch result {
                case .success(let answers): feed { $0.presenceRenewed(ids, answers, now: $1) }
                case .failure(let error): logger.warning("presence not renewed", metadata: ["error": "\(error)"])
                }
            }
        case .clearPresence(let user, let device, let id, let millis):
            store.clearPresence(user: user, device: device, session: id, nowMillis: millis, on: loop).whenComplete { [self] result in
                switch result {
                case .success(let present):
                    feed { engine, _ in engine.presenceCleared(user: user, devicesPresent: present, millis: millis) }
                case .failure(let error):
                    logger.debug("presence not cleared", metadata: ["user": "\(user)", "device": "\(device)", "session": "\(id)", "error": "\(error)"])
                }
            }
        case .announcePresence(let change):
            announce(change)
        case .publish(let notice, let nodes):
            store.publish(notice, to: nodes, on: loop)
        case .routeTyping(let from, let to):
            store.typingNodes(from: from, to: to, on: loop).whenSuccess { [self] nodes in
                if nodes.contains(engine.settings.nodeID) { feed { engine, _ in engine.relayTyping(from: from, to: to) } }
                let others = nodes.filter { $0 != engine.settings.nodeID }
                if !others.isEmpty { store.publish(.typing(from: from, to: to), to: others, on: loop) }
            }
        case .publishDelivered(let notices):
            store.publishDelivered(notices, on: loop).whenFailure { [logger] error in
                logger.debug("delivered notices not published; the senders will ask", metadata: ["error": "\(error)"])
            }
        default:
            preconditionFailure("an action with no carrier: \(action)")
        }
    }

    private func send(_ datagram: OutgoingDatagram) {
        guard let udp, let buffer = try? DatagramSeal.seal(datagram.header, payload: datagram.payload, key: datagram.key,
                                                            direction: .toClient, allocator: udp.allocator) else { return }
        let envelope = AddressedEnvelope(remoteAddress: datagram.address, data: buffer)
        if datagram.flush { udp.writeAndFlush(envelope, promise: nil) } else { udp.write(envelope, promise: nil) }
    }
}
