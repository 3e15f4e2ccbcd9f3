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
        @usableFromInline var order: UInt64

        @inlinable
        init(payload: Payload, firstSent: NIODeadline, lastSent: NIODeadline, timeout: TimeAmount, attempts: Int, order: UInt64) {
            self.payload = payload
            self.firstSent = firstSent
            self.lastSent = lastSent
            self.timeout = timeout
            self.attempts = attempts
            self.order = order
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
        entries[key] = Entry(payload: payload, firstSent: now, lastSent: now, timeout: rtt.rto, attempts: 1, order: tracked)
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

    /// Removes an entry without taking an RTT sample.
    @inlinable @discardableResult
    public mutating func remove(_ key: Key) -> Payload? {
        entries.removeValue(forKey: key)?.payload
    }

    public struct Due: Sendable {
        public var resend: [(key: Key, payload: Payload)] = []
        public var expired: [(key: Key, payload: Payload)] = []

        @inlinable init() {}
    }

    /// The entries to send again now (their timeouts doubled) and those that gave up (removed),
    /// each list in the order the entries were first tracked, so a burst resent after an
    /// outage reaches the receiver in the order it was sent.
    @inlinable
    public mutating func due(now: NIODeadline) -> Due {
        var result = Due()
        // The usual tick finds nothing due: answer that without building any collection.
        guard entries.values.contains(where: { now >= $0.lastSent + $0.timeout }) else { return result }
        let ready = entries.filter { now >= $0.value.lastSent + $0.value.timeout }.sorted { $0.value.order < $1.value.order }
        for (key, entry) in ready {
            if now - entry.firstSent >= policy.giveUpAfter {
                entries[key] = nil
                result.expired.append((key, entry.payload))
                continue
            }
            var next = entry
            next.lastSent = now
            next.attempts += 1
            next.timeout = .nanoseconds(min(entry.timeout.nanoseconds * 2, policy.maxBackoff.nanoseconds))
            entries[key] = next
            result.resend.append((key, entry.payload))
        }
        return result
    }

    /// Marks every entry as due at once, e.g. after a reconnect on a new path.
    @inlinable
    public mutating func expediteAll(now: NIODeadline) {
        for key in entries.keys {
            entries[key]!.lastSent = now - entries[key]!.timeout
        }
    }

    /// The earliest time an entry becomes due; nil when nothing is pending.
    @inlinable
    public var nextDeadline: NIODeadline? {
        entries.values.map { $0.lastSent + $0.timeout }.min()
    }
}
