import Logging
import NIOCore
import SIMPCore
import SIMPRedis

/// The delivery decisions of one node, pure: events in (a datagram, a control request, a store
/// answer, a timer, another node's notice; each with the time it happened), actions out
/// (`DeliveryAction`), in the order they are to be carried out. It owns the session table
/// (by user and device), store tracking, pushes and their retransmits, receipts, presence and
/// the early-delivery policy; the `Router` is its driver and does the I/O. No socket, no
/// Redis, no clock: every decision here has a unit test with an injected time.
/// (It counts and logs through the sinks it is given; those are not decisions.)
struct DeliveryEngine {
    /// What the engine is told of its environment.
    struct Configuration: Sendable {
        var router: RouterSettings
        var presenceTTLSeconds: Int
        var minReplicas: Int
        var inboxShare: Int
    }

    /// A timer or an end-of-tick task the driver was asked to run.
    enum Due: Hashable, Sendable {
        /// Retransmits, receipts and prompt presence writes.
        case tick
        /// Keepalive-driven presence renewals, gathered.
        case presenceRenewal
        case replicaProbe
        case flushStores
        case resumeStores
        case publishDelivered
        /// A session's inbox read, again after a failure.
        case read(session: UInt64, InboxRead)

        /// The node's own timers: a stopped node arms none, and the driver cancels them.
        var isTimer: Bool { self == .tick || self == .presenceRenewal || self == .replicaProbe }

        /// Its bit in `waiting`; nil for a session's read.
        var bit: UInt8? {
            switch self {
            case .tick: 1
            case .presenceRenewal: 2
            case .replicaProbe: 4
            case .flushStores: 8
            case .resumeStores: 16
            case .publishDelivered: 32
            case .read: nil
            }
        }
    }

    private(set) var configuration: Configuration
    var settings: RouterSettings { configuration.router }
    let metrics: ServerMetrics
    let logger: Logger
    /// The Redis shard of a user's inbox, as the slot map says now.
    let shardOf: @Sendable (String) -> RedisNodeAddress?
    let randomBytes: @Sendable (Int) -> [UInt8]

    /// What to carry out, in order; `handle` hands them over after each event.
    var actions: [DeliveryAction] = []
    /// The UDP socket's port: nothing is pushed before it is bound.
    var udpPort: Int?
    var hasUDP: Bool { udpPort != nil }
    /// Sessions opened and not yet answered: their numbering is being checked.
    var connecting: [UInt64: Connecting] = [:]

    var sessions = SessionTable<Session>()
    var stores: StorePipeline<StoreRequest, String>
    /// Groups' sealed read receipts whose reader's membership the store is being asked
    /// (`DeliveryAction.checkReader`): a drain is not over before they are answered.
    var readersBeingChecked = 0
    /// Stores waiting for their shard's replicas (`--redis-min-replicas`).
    var replicaHold: ShardHold<StoreRequest>
    var storeTracker = StoreTracker()
    var receipts = ReceiptLedger()
    var recipients: RecipientPacing
    /// Sessions whose presence is to be written on the next tick.
    var presenceDue: [UInt64: Session] = [:]
    /// Sessions whose presence is only to live longer: its fields are as written.
    var presenceRenewals: [UInt64: Session] = [:]
    /// Sessions with pushes not yet confirmed: the only ones the tick looks at, so idle
    /// sessions cost the tick nothing.
    var pushing: Set<UInt64> = []
    /// Delivered notices for senders with no session here, published once per loop tick.
    var remoteDelivered: [String: [Simp_Accepted]] = [:]
    /// Sessions with pushes queued for their congestion window or pacing: `sendDatagrams`
    /// sends what each may, those for one session together in bundles.
    var releasing: Set<UInt64> = []
    /// Timers and end-of-tick tasks asked for and not yet due: each is asked for once. The
    /// node's own are bits (one is asked for with every push); a session's reads, a set.
    var waiting: UInt8 = 0
    var waitingReads: Set<Due> = []
    var stopped = false

    init(configuration: Configuration, metrics: ServerMetrics, logger: Logger,
         shardOf: @escaping @Sendable (String) -> RedisNodeAddress? = { _ in nil },
         randomBytes: @escaping @Sendable (Int) -> [UInt8] = { count in (0..<count).map { _ in UInt8.random(in: 0...255) } }) {
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        self.shardOf = shardOf
        self.randomBytes = randomBytes
        let settings = configuration.router
        stores = StorePipeline(maxBatch: settings.maxStoreBatch, maxInFlight: settings.maxStoreBatchesInFlight, place: { $0.place },
                               lane: { $0.lane ?? $0.from })
        replicaHold = ShardHold(limit: settings.replicaHoldLimit)
        recipients = RecipientPacing(limit: settings.newRecipientsPerHour)
    }

    /// Hands over what to carry out.
    mutating func takeActions() -> [DeliveryAction] {
        defer { actions.removeAll(keepingCapacity: true) }
        return actions
    }

    mutating func act(_ action: DeliveryAction) {
        actions.append(action)
    }

    /// Asks for `due` at the end of this loop tick, or after `delay`, unless it is asked for already.
    mutating func ask(_ due: Due, after delay: TimeAmount? = nil) {
        guard !(stopped && due.isTimer) else { return }
        if let bit = due.bit {
            guard waiting & bit == 0 else { return }
            waiting |= bit
        } else {
            guard waitingReads.insert(due).inserted else { return }
        }
        act(delay.map { .after($0, due) } ?? .later(due))
    }

    /// A timer or end-of-tick task the engine asked for has come.
    mutating func due(_ due: Due, now: Moment) {
        if let bit = due.bit { waiting &= ~bit } else { waitingReads.remove(due) }
        switch due {
        case .tick:
            tick(now: now)
        case .presenceRenewal:
            renewPresence(now: now)
        case .replicaProbe:
            probeHeldShards(now: now)
        case .flushStores:
            flushStores()
        case .resumeStores:
            stores.resume()
            flushStores()
        case .publishDelivered:
            publishDelivered()
        case .read(let id, let read):
            guard let session = sessions[id] else { return }
            switch read {
            case .sync: sync(session)
            case .catchUp: catchUp(session)
            }
        }
    }

    /// No timer is asked for from now on; the driver cancels those asked for.
    mutating func stop() {
        stopped = true
        for timer in [Due.tick, .presenceRenewal, .replicaProbe] { waiting &= ~timer.bit! }
    }

    mutating func reload(messagesPerSecond rate: Int, burst: Int, inboxShare: Int) {
        configuration.router.messagesPerSecond = rate
        configuration.router.messageBurst = burst
        configuration.inboxShare = inboxShare
    }

    var sessionCount: Int { sessions.count }

    /// The highest numbering floor of the user's sessions here (`Session.numberingFloor`).
    func numberingFloor(of user: String) -> UInt64? {
        sessions.sessions(of: user).compactMap(\.numberingFloor).max()
    }

    /// The numbering floors of those of `users` with sessions here.
    func numberingFloors(of users: [String]) -> [String: UInt64] {
        var floors: [String: UInt64] = [:]
        for user in users { floors[user] = numberingFloor(of: user) }
        return floors
    }

    var limits: Limits {
        Limits(inboxShare: configuration.inboxShare, minReplicas: configuration.minReplicas,
               replicaHoldSeconds: settings.replicaHoldLimit.nanoseconds / 1_000_000_000)
    }

    static func describe(_ address: SocketAddress) -> String {
        "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
    }
}

func randomBytes(_ count: Int) -> [UInt8] {
    var rng = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}
