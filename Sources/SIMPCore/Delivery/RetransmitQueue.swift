import NIOCore

/// What retransmission does between timeouts.
public struct RetransmitPolicy: Sendable, Equatable {
    /// Backoff doubles the timeout of an entry on every resend, up to this.
    public var maxBackoff: TimeAmount
    /// An entry not acknowledged this long after its first send has failed.
    public var giveUpAfter: TimeAmount

    public init(maxBackoff: TimeAmount = .seconds(8), giveUpAfter: TimeAmount = .seconds(60)) {
        self.maxBackoff = maxBackoff
        self.giveUpAfter = giveUpAfter
    }
}

/// Pure retransmit state: which packets wait for an acknowledgement, when each is due again,
/// and which have given up. The caller supplies the time; nothing here reads a clock.
/// Inlinable, so that each user of it is specialised for its key and payload: generic code
/// called across modules looked up type metadata on every call.
public struct RetransmitQueue<Key: Hashable & Sendable, Payload: Sendable>: Sendable {
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var payload: Payload
        @usableFromInline var firstSent: NIODeadline
        @usableFromInline var lastSent: NIODeadline
        @usableFromInline var timeout: TimeAmount
        @usableFromInline var attempts: Int
        @usableFromInline var place: UInt64
        /// Waiting to leave (`hold`): no timer runs, only the give-up one.
        @usableFromInline var held = false

        @inlinable
        init(payload: Payload, firstSent: NIODeadline, lastSent: NIODeadline, timeout: TimeAmount, attempts: Int, place: UInt64) {
            self.payload = payload
            self.firstSent = firstSent
            self.lastSent = lastSent
            self.timeout = timeout
            self.attempts = attempts
            self.place = place
        }
    }

    public var policy: RetransmitPolicy
    public var estimator: RTTEstimator { rtt }
    @usableFromInline var rtt: RTTEstimator
    @usableFromInline var entries: [Key: Entry] = [:]
    @usableFromInline var tracked: UInt64 = 0

    @inlinable
    public init(policy: RetransmitPolicy = .init(), estimator: RTTEstimator = .init()) {
        self.policy = policy
        self.rtt = estimator
    }

    @inlinable public var count: Int { entries.count }
    @inlinable public var isEmpty: Bool { entries.isEmpty }
    @inlinable public func contains(_ key: Key) -> Bool { entries[key] != nil }
    @inlinable public var pendingKeys: [Key] { Array(entries.keys) }

    /// Records a first send. Tracking a key twice keeps the first send's times.
    @inlinable
    public mutating func track(_ key: Key, payload: Payload, now: NIODeadline) {
        guard entries[key] == nil else { return }
        tracked += 1
        entries[key] = Entry(payload: payload, firstSent: now, lastSent: now, timeout: rtt.rto, attempts: 1, place: tracked)
    }

    /// Tracks an entry given up on (`Due.expired`) afresh from `now`, in the place it had:
    /// resent after an outage, it still goes out ahead of what was tracked after it.
    @inlinable
    public mutating func retrack(_ expired: Item, now: NIODeadline) {
        guard entries[expired.key] == nil else { return }
        entries[expired.key] = Entry(payload: expired.payload, firstSent: now, lastSent: now, timeout: rtt.rto,
                                     attempts: 1, place: expired.place)
    }

    /// The entry waits to leave (for a congestion window): its retransmit timer stops until
    /// `left`; it still gives up `giveUpAfter` after it was first tracked.
    @inlinable
    public mutating func hold(_ key: Key) {
        entries[key]?.held = true
    }

    /// The entry actually left at `now`: its timer, and the RTT sample its acknowledgement
    /// gives, run from then.
    @inlinable
    public mutating func left(_ key: Key, now: NIODeadline) {
        guard entries[key] != nil else { return }
        entries[key]!.held = false
        entries[key]!.lastSent = now
    }

    @inlinable
    func deadline(of entry: Entry) -> NIODeadline {
        entry.held ? entry.firstSent + policy.giveUpAfter : entry.lastSent + entry.timeout
    }

    /// A pending entry's place among the tracked ones (earlier tracked, lower).
    @inlinable
    public func place(of key: Key) -> UInt64? {
        entries[key]?.place
    }

    /// Changes the payload of every pending entry tracked before `place` that `matches`.
    @inlinable
    public mutating func updatePayloads(placedBefore place: UInt64, where matches: (Payload) -> Bool,
                                        _ change: (inout Payload) -> Void) {
        // By index: no hashing per entry, and the storage is copied only if one matches.
        var index = entries.values.startIndex
        while index != entries.values.endIndex {
            if entries.values[index].place < place && matches(entries.values[index].payload) {
                change(&entries.values[index].payload)
            }
            entries.values.formIndex(after: &index)
        }
    }

    /// Removes an acknowledged entry and returns its payload; nil when it was not pending.
    @inlinable @discardableResult
    public mutating func acknowledge(_ key: Key, now: NIODeadline) -> Payload? {
        guard let entry = entries.removeValue(forKey: key) else { return nil }
        if entry.attempts == 1 {
            rtt.sample(now - entry.firstSent)
        }
        return entry.payload
    }

    /// The payload of a pending entry, without changing its timers.
    @inlinable
    public func peek(_ key: Key) -> Payload? {
        entries[key]?.payload
    }

    /// Feeds an RTT sample the caller took (entries it removes with `remove` give none).
    @inlinable
    public mutating func sampleRTT(_ sample: TimeAmount) {
        rtt.sample(sample)
    }

    /// When a pending entry was last sent (or found due).
    @inlinable
    public func lastSent(of key: Key) -> NIODeadline? {
        entries[key]?.lastSent
    }

    /// Removes an entry without taking an RTT sample.
    @inlinable @discardableResult
    public mutating func remove(_ key: Key) -> Payload? {
        entries.removeValue(forKey: key)?.payload
    }

    /// A due or given-up entry, with its place among the tracked ones.
    public struct Item: Sendable {
        public var key: Key
        public var payload: Payload
        public let place: UInt64
        /// When it was last sent before it became due.
        public let sentAt: NIODeadline

        @inlinable init(key: Key, payload: Payload, place: UInt64, sentAt: NIODeadline) {
            self.key = key
            self.payload = payload
            self.place = place
            self.sentAt = sentAt
        }
    }

    public struct Due: Sendable {
        public var resend: [Item] = []
        public var expired: [Item] = []

        @inlinable init() {}
    }

    /// The entries to send again now (their timeouts doubled) and those that gave up (removed),
    /// each list in the order the entries were first tracked, so a burst resent after an
    /// outage reaches the receiver in the order it was sent.
    @inlinable
    public mutating func due(now: NIODeadline) -> Due {
        var result = Due()
        // The usual tick finds nothing due: answer that without building any collection.
        guard entries.values.contains(where: { now >= deadline(of: $0) }) else { return result }
        let ready = entries.filter { now >= deadline(of: $0.value) }.sorted { $0.value.place < $1.value.place }
        for (key, entry) in ready {
            if now - entry.firstSent >= policy.giveUpAfter {
                entries[key] = nil
                result.expired.append(Item(key: key, payload: entry.payload, place: entry.place, sentAt: entry.lastSent))
                continue
            }
            var next = entry
            next.lastSent = now
            next.attempts += 1
            next.timeout = .nanoseconds(min(entry.timeout.nanoseconds * 2, policy.maxBackoff.nanoseconds))
            entries[key] = next
            result.resend.append(Item(key: key, payload: entry.payload, place: entry.place, sentAt: entry.lastSent))
        }
        return result
    }

    /// Marks every entry as due at once, e.g. after a reconnect on a new path.
    @inlinable
    public mutating func expediteAll(now: NIODeadline) {
        for key in entries.keys {
            entries[key]!.held = false
            entries[key]!.lastSent = now - entries[key]!.timeout
        }
    }

    /// The earliest time an entry becomes due; nil when nothing is pending.
    @inlinable
    public var nextDeadline: NIODeadline? {
        entries.values.map { deadline(of: $0) }.min()
    }
}
