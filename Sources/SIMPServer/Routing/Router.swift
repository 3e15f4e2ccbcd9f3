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
    /// `--e2e required`: messages to users must be SEALED.
    var sealedOnly = false
    /// With `--redis-min-replicas`: how long a store waits for its shard's replicas before it
    /// fails (REPLICAS_UNAVAILABLE), and how often a held shard is asked for them.
    var replicaHoldLimit: TimeAmount = .seconds(10)
    var replicaProbeInterval: TimeAmount = .milliseconds(500)
    /// Bytes a session's receipts may have resent a second (and in a burst), over what the
    /// retransmit timers send.
    var resendBytesPerSecond = 64 * 1024
    /// Users one user may write to for the first time per hour (`RecipientPacing`).
    var newRecipientsPerHour = 100
    /// `--datagrams-over-stream auto`: a session may carry its datagrams inside its control
    /// connection when UDP does not work (`never`: refused, STREAM_PATH_OFF).
    var datagramsOverStream = true
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
        didSet { feed(.udpBound(port: udp.map { $0.localAddress?.port ?? 0 })) }
    }

    private var engine: DeliveryEngine
    /// Each session's control connection, by session id.
    private var controls: [UInt64: any Channel] = [:]
    private let outbox: ControlOutbox
    private let groups: GroupRelay
    private var timers: [DeliveryEngine.Due: Scheduled<Void>] = [:]
    private var drainWaiters: [EventLoopPromise<Void>] = []
    /// CONNECTs under way, by the attempt the engine's answers name: the connection and its answer.
    private var connects: [UInt64: (control: any Channel, answer: EventLoopPromise<Simp_ConnectResponse>)] = [:]
    /// Delivery queries under way, by the ask the engine's answers name.
    private var asks: [UInt64: EventLoopPromise<Void>] = [:]
    /// Names for the next CONNECT and query.
    private var nextAttempt: UInt64 = 1
    /// What the engine asked for and is not yet carried out: an event fed while actions are
    /// being carried out (a future that completed at once) adds its actions to these, in order,
    /// instead of starting a second round.
    private var pending: [DeliveryAction] = []
    private var performing = false
    /// Charges a user's request budget with work done for it outside a request (`Admission.charge`),
    /// at the moment of the event that asked for the work.
    var charge: @Sendable (_ user: String, _ units: Int, _ now: NIODeadline) -> Void = { _, _, _ in }
    /// The moment of the latest event fed: what the actions being carried out stamp (an action
    /// of an earlier event still under way gets the later moment, never a clock read of its own).
    private var moment = Moment(deadline: .uptimeNanoseconds(0), millis: 0)

    init(loop: any EventLoop, store: MessageStore, settings: RouterSettings, metrics: ServerMetrics, logger: Logger) {
        self.loop = loop
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.outbox = ControlOutbox(loop: loop)
        let configuration = DeliveryEngine.Configuration(router: settings, presenceTTLSeconds: store.settings.presenceTTLSeconds,
                                                         minReplicas: store.settings.minReplicas, inboxShare: store.bounds.share)
        self.engine = DeliveryEngine(configuration: configuration, metrics: metrics, logger: logger, shardOf: { [store] in store.shard(of: $0) })
        self.groups = GroupRelay(store: store, loop: loop, metrics: metrics, logger: logger, maxBatch: settings.maxStoreBatch,
                                 now: { Router.now })
        groups.engine = { [unowned self] event in feed(event) }
        groups.floors = { [unowned self] members in engine.numberingFloors(of: members) }
    }

    /// The time of an event, read once for it.
    static var now: Moment { .read() }

    /// Feeds one event to the engine, with the time, and carries out what it decided.
    private func feed(_ event: DeliveryEvent) {
        loop.assertInEventLoop()
        moment = Self.now
        pending.append(contentsOf: engine.handle(event, at: moment))
        perform()
    }

    /// Makes a membership change (a control request's, `GroupFlow`); answered once its entries are copied.
    func changeGroup(_ change: GroupRelayMachine.Change) -> EventLoopFuture<MessageStore.GroupChangeResult> {
        loop.assertInEventLoop()
        return groups.change(change)
    }

    /// What a read request needs of its session: who reads, and how far it confirmed.
    func reader(of sessionID: UInt64) -> ReadReceipts.Reader? {
        loop.assertInEventLoop()
        guard let session = engine.sessions[sessionID] else { return nil }
        return ReadReceipts.Reader(user: session.user, device: session.device, deviceMark: session.deviceMark,
                                   otherDevices: session.devices > 1)
    }

    /// Each session's congestion window, RTT and losses, as text (GET /sessions).
    func pathReport() -> EventLoopFuture<String> {
        loop.submit { [self] in engine.pathReport() }
    }

    /// Finds who may see `change.user`'s presence, and where they are; the engine tells them.
    private func announce(_ change: PresenceChange, at now: NIODeadline) {
        store.presenceCircle(of: change.user, on: loop).flatMap { [store, loop, charge] circle in
            // The user whose connect or disconnect it is pays for it, like for a request.
            charge(change.user, RequestCost.presenceRead(groups: circle.groups, users: circle.users.count), now)
            return store.nodes(of: circle.users, watching: change.user, on: loop)
        }.whenComplete { [self] result in
            switch result {
            case .success(let byNode): feed(.presenceWatchers(change, byNode: byNode))
            // Its circle sees the change when it next asks (`presence`).
            case .failure(let error): logger.warning("presence change not announced", metadata: ["user": "\(change.user)", "error": "\(error)"])
            }
        }
    }

    /// `user`'s key directory changed (a device became one others can add, or one was
    /// revoked): its circle, as presence finds it whatever its last-seen setting, and its own
    /// devices are told with a KEYS datagram, so that their conversations with it follow the
    /// directory now rather than at their next send.
    func keysChanged(of user: String) {
        feed(.keysChanged(user: user))
    }

    /// Finds who is told of `user`'s key change, and where they are; the engine tells them. The
    /// user pays for the read, as for presence, and for a notice stored in each inbox.
    private func announceKeys(of user: String, at now: NIODeadline) {
        store.presenceCircle(of: user, ignoringOwnSetting: true, withPeers: true, on: loop).flatMap { [self, store, loop, charge] circle in
            charge(user, RequestCost.presenceRead(groups: circle.groups, users: circle.users.count)
                + RequestCost.keysNotices(recipients: circle.users.count + 1), now)
            // The notices do not wait for the datagram's read of where sessions are.
            feed(.keysCircle(user: user, circle: circle.users))
            return store.nodes(of: circle.users + [user], watching: user, on: loop)
        }.whenComplete { [self] result in
            switch result {
            case .success(let byNode): feed(.keysWatchers(user: user, byNode: byNode))
            // Its circle's devices add the change at their next send to the user (or check).
            // Past the circle's read, the notices are stored (`keysCircle`): only the datagrams are not sent.
            case .failure(let error): logger.warning("key change not announced (or only by the notices)", metadata: ["user": "\(user)", "error": "\(error)"])
            }
        }
    }

    /// Stores a notice of the server's (`StoreRequest.notice`) in its recipient's inbox, pushed
    /// like any message; nobody is answered.
    func notify(_ notice: StoreRequest) {
        feed(.serverNotice(notice))
    }

    /// The user blocked someone or turned contacts-only on: its sessions here, and on `nodes`,
    /// take nothing early from now on.
    func filtered(user: String, nodes: [String]) {
        feed(.filtered(user: user, nodes: nodes))
    }

    func start() {
        feed(.started)
    }

    func stop() {
        feed(.stopped)
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
        let attempt = nextAttempt
        nextAttempt += 1
        let answer = loop.makePromise(of: Simp_ConnectResponse.self)
        connects[attempt] = (control, answer)
        feed(.connectAsked(request, attempt: attempt))
        return answer.futureResult
    }

    func closeSession(_ id: UInt64) {
        feed(.controlClosed(session: id))
    }

    var sessionCount: Int { engine.sessionCount }

    /// A reload's limits: the data rate for sessions opened from now on, the inbox share as
    /// refusals name it.
    func reload(messagesPerSecond rate: Int, burst: Int, inboxShare: Int) {
        feed(.reloaded(messagesPerSecond: rate, burst: burst, inboxShare: inboxShare))
    }

    /// An administrator closes the user's sessions on this node (only `session`, when given):
    /// the clients are told not to reconnect.
    func closeByAdministrator(user: String, session id: UInt64?) {
        feed(.closedByAdministrator(user: user, session: id))
    }

    // MARK: events from clients and other nodes

    func receive(_ envelope: AddressedEnvelope<ByteBuffer>) {
        feed(.datagram(envelope))
    }

    /// The session's control connection returned the challenge token.
    func pathResponse(sessionID: UInt64, token: [UInt8]) {
        feed(.pathResponse(session: sessionID, token: token))
    }

    /// A sealed datagram that came inside the session's control connection.
    func streamDatagram(sessionID: UInt64, _ datagram: ByteBuffer) {
        feed(.streamDatagram(session: sessionID, datagram))
    }

    func withdraw(sessionID: UInt64, _ withdraw: Simp_Withdraw) {
        feed(.withdraw(session: sessionID, withdraw))
    }

    func receipt(sessionID: UInt64, _ receipt: Simp_Receipt) {
        feed(.receipt(session: sessionID, receipt))
    }

    /// Answers a reconnected sender: Delivered for each message its recipient confirmed.
    /// Completes once the `delivered` frames of the query's answer are queued.
    func answer(_ query: Simp_DeliveryQuery, sessionID: UInt64) -> EventLoopFuture<Void> {
        loop.assertInEventLoop()
        let ask = nextAttempt
        nextAttempt += 1
        let answered = loop.makePromise(of: Void.self)
        asks[ask] = answered
        feed(.deliveryQuery(session: sessionID, query, ask: ask))
        return answered.futureResult
    }

    func received(_ notice: NodeNotice) {
        feed(.notice(notice))
    }

    func catchUpEverySession() {
        feed(.resubscribed)
    }

    /// Completes when every queued and in-flight store has been answered (the engine says
    /// `storesIdle`).
    func drainStores() -> EventLoopFuture<Void> {
        loop.assertInEventLoop()
        let promise = loop.makePromise(of: Void.self)
        drainWaiters.append(promise)
        feed(.draining)
        return promise.futureResult
    }

    // MARK: carrying out

    private func perform() {
        guard !performing else { return }
        performing = true
        var next = 0
        while next < pending.count {
            let action = pending[next]
            next += 1
            carryOut(action)
        }
        // A burst (a sync of thousands) does not keep its capacity for good.
        if pending.capacity > 4_096 { pending = [] } else { pending.removeAll(keepingCapacity: true) }
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
        case .streamDatagram(let id, let header, let payload, let key):
            guard let control = controls[id],
                  let sealed = try? DatagramSeal.seal(header, payload: payload, key: key, direction: .toClient, allocator: control.allocator)
            else { return }
            outbox.send(Simp_Envelope(.datagram(Data(sealed.readableBytesView))), on: control)
        case .later(let due):
            loop.execute { [self] in feed(.due(due)) }
        case .after(let delay, let due):
            timers[due] = loop.scheduleTask(in: delay) { [self] in
                timers[due] = nil
                feed(.due(due))
            }
        case .storesIdle:
            let waiters = drainWaiters
            drainWaiters.removeAll()
            waiters.forEach { $0.succeed() }
        default:
            carryOutConnect(action)
        }
    }

    /// A CONNECT's and a delivery query's steps.
    private func carryOutConnect(_ action: DeliveryAction) {
        switch action {
        case .registerDevice(let attempt, let request, let millis):
            store.registerDevice(user: request.user, device: request.device, nowMillis: millis,
                                 issuedMillis: request.tokenIssuedMillis, on: loop).whenComplete { [self] result in
                switch result {
                case .success(let registration): feed(.deviceRegistered(request, registration, attempt: attempt))
                case .failure(let error): connects.removeValue(forKey: attempt)?.answer.fail(error)
                }
            }
        case .opened(let attempt, let id):
            controls[id] = connects[attempt]?.control
        case .repairNumbering(let id, let user, let lastSeq):
            store.repairNumbering(user: user, lastSeq: lastSeq, on: loop).whenComplete { [self] result in
                feed(.numberingRepaired(session: id, moved: result))
            }
        case .connectAnswered(let attempt, let response):
            connects.removeValue(forKey: attempt)?.answer.succeed(response)
        case .connectRefused(let attempt, let error):
            connects.removeValue(forKey: attempt)?.answer.fail(error)
        case .readConfirmed(let ask, let id, let user, let items):
            store.confirmedOf(user, items, on: loop).whenComplete { [self] result in
                switch result {
                case .success(let confirmed): feed(.confirmedRead(session: id, confirmed, ask: ask))
                case .failure(let error): asks.removeValue(forKey: ask)?.fail(error)
                }
            }
        case .queryAnswered(let ask):
            asks.removeValue(forKey: ask)?.succeed(())
        default:
            carryOutInStore(action)
        }
    }

    /// The actions that go to Redis; each answer is fed back as an event.
    private func carryOutInStore(_ action: DeliveryAction) {
        switch action {
        case .store(let batch, let floors):
            store.store(batch.items, floors: floors, on: loop).whenComplete { [self] result in
                feed(.stored(batch, result.mapError { $0 }))
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
                feed(.replicasProbed(shard, result))
            }
        case .readInbox(let id, let user, let after, let read):
            store.unconfirmed(of: user, after: after, limit: engine.settings.syncLimit, on: loop).whenComplete { [self] result in
                feed(.inboxRead(session: id, read, result.map(\.items)))
            }
        case .readEntries(let id, let user, let seqs):
            store.inboxEntries(user: user, seqs: seqs, on: loop).whenComplete { [self] result in
                feed(.entriesRead(session: id, result))
            }
        case .writeReceipts(let marks):
            store.writeReceipts(marks, on: loop).whenSuccess { [self] results in
                feed(.receiptsWritten(marks, results))
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
                case .success(let first): feed(.presenceWritten(entries, first: first))
                case .failure(let error): logger.warning("presence not written", metadata: ["error": "\(error)"])
                }
            }
        case .renewPresence(let entries, let ids):
            store.renewPresence(entries, on: loop).whenComplete { [self] result in
                switch result {
                case .success(let answers): feed(.presenceRenewed(sessions: ids, answers))
                case .failure(let error): logger.warning("presence not renewed", metadata: ["error": "\(error)"])
                }
            }
        case .clearPresence(let user, let device, let id, let millis):
            store.clearPresence(user: user, device: device, session: id, nowMillis: millis, on: loop).whenComplete { [self] result in
                switch result {
                case .success(let present):
                    feed(.presenceCleared(user: user, devicesPresent: present, millis: millis))
                case .failure(let error):
                    logger.debug("presence not cleared", metadata: ["user": "\(user)", "device": "\(device)", "session": "\(id)", "error": "\(error)"])
                }
            }
        case .announcePresence(let change):
            announce(change, at: moment.deadline)
        case .announceKeys(let user):
            announceKeys(of: user, at: moment.deadline)
        case .publish(let notice, let nodes):
            store.publish(notice, to: nodes, on: loop)
        case .checkReader(let request, let group):
            store.isMember(request.from, of: group, on: loop).whenComplete { [self] result in
                feed(.readerChecked(request, member: result))
            }
        case .routeTyping(let from, let to, let sealed):
            store.typingNodes(from: from, to: to, on: loop).whenSuccess { [self] nodes in
                feed(.typingNodes(from: from, to: to, nodes: nodes, sealed: sealed))
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

extension Moment {
    /// The clocks, read: only a driver calls this, once per event (`Router.now`,
    /// `ControlHandler.now`), and hands the moment to what it feeds.
    static func read() -> Moment {
        Moment(deadline: .now(), millis: Int64(Date().timeIntervalSince1970 * 1000))
    }
}
