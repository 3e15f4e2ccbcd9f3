import NIOCore

/// What retransmission does between timeouts.
public struct RetransmitPolicy: Sendable, Equatable {
    /// Backoff doubles the timeout of an entry on every resend, up to this.
    public var maxBackoff: TimeAmount
    /// The queue's own timeout doubles with every probe, up to this (RFC 9002 sets no bound:
    /// a peer that stays silent is probed ever less often).
    public var maxProbeBackoff: TimeAmount
    /// An entry not acknowledged this long after its first send has failed.
    public var giveUpAfter: TimeAmount
    /// How long the peer may wait before it acknowledges (QUIC's max_ack_delay, RFC 9002 5.3):
    /// added to every timeout, so a peer that answers late but within it is not sent anything again.
    public var maxAckDelay: TimeAmount
    /// A timeout while nothing was acknowledged since the oldest due entry was sent resends
    /// this many of the oldest due entries (a probe, RFC 9002 6.2.4), not every due one.
    public var probeSize: Int
    /// A gap longer than this between two calls that tell the time means this side was not
    /// running (a starved CPU): the excess does not count against the peer, whose answers may
    /// be waiting unread. Nil: every gap counts.
    public var stallAllowance: TimeAmount?

    /// QUIC's default max_ack_delay (RFC 9000, 18.2).
    public static let defaultMaxAckDelay = TimeAmount.milliseconds(25)

    public init(maxBackoff: TimeAmount = .seconds(8), giveUpAfter: TimeAmount = .seconds(60),
                maxAckDelay: TimeAmount = .zero, probeSize: Int = 2, maxProbeBackoff: TimeAmount? = nil,
                stallAllowance: TimeAmount? = nil) {
        self.maxBackoff = maxBackoff
        self.giveUpAfter = giveUpAfter
        self.maxAckDelay = maxAckDelay
        self.probeSize = max(1, probeSize)
        self.maxProbeBackoff = max(maxProbeBackoff ?? maxBackoff, maxBackoff)
        self.stallAllowance = stallAllowance
    }
}

/// Pure retransmit state: which packets wait for an acknowledgement, when each is due again,
/// and which have given up. The caller supplies the time; nothing here reads a clock.
///
/// One queue is one peer (a session). Timers follow RFC 9002's probe timeout rather than
/// resending everything that is due: an entry's timeout is the RTO plus the peer's
/// `maxAckDelay`, and runs from its last send or the peer's last acknowledgement, whichever
/// is later (a peer that is still acknowledging is working through what it was sent). When
/// timers fire and nothing was acknowledged since the oldest due entry was sent, the whole
/// flight is unanswered: the queue sends a probe of the `probeSize` oldest due entries, and
/// nothing more until its own timeout, which doubles with every probe (capped at
/// `maxProbeBackoff`). A new acknowledgement ends the probing; what is still due then was sent
/// before something the peer answered, and is resent as before, each entry with its own
/// doubling timeout. New entries start at the RTO, not at a timeout doubled by earlier
/// timeouts (as RFC 9002 resets its PTO backoff on an acknowledgement, not on an RTT sample):
/// kept until an RTT sample (Karn's algorithm for one timer, RFC 6298 5.7), it held every new
/// message of a lossy path to the 4 s cap (the fault suite's 30% loss with early delivery: p99
/// 5-30 s, was 1-3 s). An acknowledgement that may have waited behind a resend of an earlier
/// entry (a peer that takes them in order) gives no RTT sample. Loss shown otherwise (a
/// receipt's `missing`) is the caller's to resend at once. Time this side spent not running
/// (`stallAllowance`) is taken off every timer.
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
        /// `paused` when it was last sent: its timer runs that much less than the clock since.
        @usableFromInline var pauseMark: TimeAmount = .zero
        /// One tracked before it (or this one) went again while this one was pending: a peer
        /// that takes them in order held this one for it, so its acknowledgement gives no RTT sample.
        @usableFromInline var waited = false

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

    public var policy: RetransmitPolicy { didSet { mayBeDueSooner() } }
    public var estimator: RTTEstimator { rtt }
    @usableFromInline var rtt: RTTEstimator
    @usableFromInline var entries: [Key: Entry] = [:]
    @usableFromInline var tracked: UInt64 = 0
    /// When the peer last acknowledged an entry it had not acknowledged before.
    @usableFromInline var lastAcknowledged: NIODeadline = .distantPast
    /// Probes sent since the last acknowledgement; while above 0 nothing is resent before `probeDeadline`.
    @usableFromInline var probes = 0
    @usableFromInline var probeDeadline: NIODeadline = .distantPast
    /// Set by `expediteAll`: the next `due` resends everything due, with no probe.
    @usableFromInline var expedited = false
    /// Time this side was found not running (beyond `stallAllowance`), in all.
    @usableFromInline var paused: TimeAmount = .zero
    @usableFromInline var lastLooked: NIODeadline?
    @usableFromInline var ackPauseMark: TimeAmount = .zero
    @usableFromInline var probePauseMark: TimeAmount = .zero
    /// Nothing is due before this (a lower bound of `nextDeadline`, lowered by whatever may
    /// bring a deadline closer): `due` answers a look before it without touching an entry. A
    /// server with thousands of sessions whose pushes go unanswered looks at each every tick;
    /// scanning each one's entries then took a quarter of a starved server's CPU.
    @usableFromInline var notBefore: NIODeadline = .distantFuture

    @inlinable
    public init(policy: RetransmitPolicy = .init(), estimator: RTTEstimator = .init()) {
        self.policy = policy
        self.rtt = estimator
    }

    @inlinable public var count: Int { entries.count }
    @inlinable public var isEmpty: Bool { entries.isEmpty }
    @inlinable public func contains(_ key: Key) -> Bool { entries[key] != nil }
    @inlinable public var pendingKeys: [Key] { Array(entries.keys) }
    /// Nothing is due before this (earlier when something changed since the last `due`).
    @inlinable public var nothingDueBefore: NIODeadline { notBefore }
    /// Probes sent since the peer last acknowledged anything.
    @inlinable public var probeCount: Int { probes }
    /// The timeout a newly tracked entry gets: RTO plus the peer's ack delay.
    @inlinable public var timeout: TimeAmount { rtt.rto + policy.maxAckDelay }
    /// How long after a probe the next may go: the timeout doubled for every probe since the
    /// peer last acknowledged anything, capped.
    @inlinable var probeTimeout: TimeAmount {
        Self.doubled(timeout, probes, cap: policy.maxProbeBackoff)
    }

    /// Notes the time of a call: a gap beyond `stallAllowance` since the last one was this
    /// side not running, and is added to `paused`.
    @inlinable
    mutating func look(_ now: NIODeadline) {
        if let allowance = policy.stallAllowance, let last = lastLooked, !entries.isEmpty, now - last > allowance {
            paused = paused + (now - last - allowance)
        }
        if lastLooked.map({ now > $0 }) ?? true { lastLooked = now }
    }

    /// Time this side was not running, found by the caller (a timer that fired that much after
    /// its deadline): taken off every timer, as a gap beyond `stallAllowance` is. For a caller
    /// that looks only when something falls due, whose gaps between looks say nothing.
    @inlinable
    public mutating func stalled(_ time: TimeAmount) {
        guard time > .zero, !entries.isEmpty else { return }
        paused = paused + time
    }

    /// Something may fall due before `notBefore`: the next `due` looks at every entry.
    @inlinable
    mutating func mayBeDueSooner() {
        notBefore = .distantPast
    }

    /// `notBefore` lowered to `entry`'s deadline.
    @inlinable
    mutating func mayBeDue(_ entry: Entry) {
        notBefore = min(notBefore, deadline(of: entry))
    }

    /// A time remembered with the pause then: later by what was paused since.
    @inlinable
    func shifted(_ time: NIODeadline, mark: TimeAmount) -> NIODeadline {
        time == .distantPast ? time : time + (paused - mark)
    }

    @inlinable
    static func doubled(_ base: TimeAmount, _ times: Int, cap: TimeAmount) -> TimeAmount {
        var value = base.nanoseconds
        for _ in 0..<times where value < cap.nanoseconds { value *= 2 }
        return .nanoseconds(min(value, max(cap.nanoseconds, base.nanoseconds)))
    }

    /// Records a first send. Tracking a key twice keeps the first send's times.
    @inlinable
    public mutating func track(_ key: Key, payload: Payload, now: NIODeadline) {
        guard entries[key] == nil else { return }
        look(now)
        tracked += 1
        entries[key] = Entry(payload: payload, firstSent: now, lastSent: now, timeout: timeout, attempts: 1, place: tracked)
        entries[key]!.pauseMark = paused
        mayBeDue(entries[key]!)
    }

    /// Tracks an entry given up on (`Due.expired`) afresh from `now`, in the place it had:
    /// resent after an outage, it still goes out ahead of what was tracked after it.
    @inlinable
    public mutating func retrack(_ expired: Item, now: NIODeadline) {
        guard entries[expired.key] == nil else { return }
        look(now)
        entries[expired.key] = Entry(payload: expired.payload, firstSent: now, lastSent: now, timeout: timeout,
                                     attempts: 1, place: expired.place)
        entries[expired.key]!.pauseMark = paused
        mayBeDue(entries[expired.key]!)
    }

    /// The entry waits to leave (for a congestion window): its retransmit timer stops until
    /// `left`; it still gives up `giveUpAfter` after it was first tracked.
    @inlinable
    public mutating func hold(_ key: Key) {
        guard entries[key] != nil else { return }
        entries[key]!.held = true
        // Held, only its give-up timer runs: its deadline moves, most often later.
        mayBeDue(entries[key]!)
    }

    /// The entry actually left at `now`: its timer, and the RTT sample its acknowledgement
    /// gives, run from then.
    @inlinable
    public mutating func left(_ key: Key, now: NIODeadline) {
        guard entries[key] != nil else { return }
        look(now)
        entries[key]!.held = false
        entries[key]!.lastSent = now
        entries[key]!.pauseMark = paused
        mayBeDue(entries[key]!)
    }

    @inlinable
    func deadline(of entry: Entry) -> NIODeadline {
        entry.held ? entry.firstSent + policy.giveUpAfter
            : max(shifted(entry.lastSent, mark: entry.pauseMark), shifted(lastAcknowledged, mark: ackPauseMark)) + entry.timeout
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
        acknowledged(now: now)
        if entry.attempts == 1 && !entry.waited {
            sampleRTT(now - entry.firstSent)
        }
        return entry.payload
    }

    /// The peer acknowledged something it had not before (entries the caller took out with
    /// `remove`, say): probing ends, and the timers of what is still pending run from now.
    @inlinable
    public mutating func acknowledged(now: NIODeadline) {
        look(now)
        if now > lastAcknowledged {
            lastAcknowledged = now
            ackPauseMark = paused
        }
        probes = 0
        mayBeDueSooner()
    }

    /// The caller sent these entries again on its own (losses the peer reported): they and
    /// every pending entry tracked after the first may be held for them, and their
    /// acknowledgements give no RTT sample. Their timers are not changed.
    @inlinable
    public mutating func resentOutOfBand(_ keys: some Sequence<Key>) {
        var first: UInt64?
        for key in keys {
            if let place = entries[key]?.place, place < first ?? .max { first = place }
        }
        if let first { markWaiting(from: first) }
    }

    /// Every pending entry from `place` on waited for a resend (see `Entry.waited`).
    @inlinable
    mutating func markWaiting(from place: UInt64) {
        var index = entries.values.startIndex
        while index != entries.values.endIndex {
            if entries.values[index].place >= place && !entries.values[index].waited {
                entries.values[index].waited = true
            }
            entries.values.formIndex(after: &index)
        }
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
    /// outage reaches the receiver in the order it was sent. While nothing was acknowledged
    /// since the oldest due entry was sent, only a probe goes (see the type's notes).
    @inlinable
    public mutating func due(now: NIODeadline) -> Due {
        var result = Due()
        look(now)
        if now < notBefore { return result }
        defer { notBefore = nextDeadline ?? .distantFuture }
        // Probing: nothing more until the probe's timeout.
        if probes > 0, now < shifted(probeDeadline, mark: probePauseMark) { return result }
        // The usual tick finds nothing due: answer that without building any collection.
        guard entries.values.contains(where: { now >= deadline(of: $0) }) else { return result }
        let ready = entries.filter { now >= deadline(of: $0.value) }.sorted { $0.value.place < $1.value.place }
        var resendable: [(key: Key, value: Entry)] = []
        for (key, entry) in ready {
            if now - entry.firstSent >= policy.giveUpAfter {
                entries[key] = nil
                result.expired.append(Item(key: key, payload: entry.payload, place: entry.place, sentAt: entry.lastSent))
                continue
            }
            // Held (waiting to leave): only its give-up timer runs.
            if !entry.held { resendable.append((key, entry)) }
        }
        guard !resendable.isEmpty else { return result }
        let oldestSent = resendable.lazy.map(\.value.lastSent).min()!
        let probing = !expedited && lastAcknowledged < oldestSent
        expedited = false
        for (key, entry) in probing ? Array(resendable.prefix(policy.probeSize)) : resendable {
            var next = entry
            next.lastSent = now
            next.pauseMark = paused
            next.attempts += 1
            next.timeout = .nanoseconds(min(entry.timeout.nanoseconds * 2, max(policy.maxBackoff.nanoseconds, entry.timeout.nanoseconds)))
            entries[key] = next
            result.resend.append(Item(key: key, payload: entry.payload, place: entry.place, sentAt: entry.lastSent))
        }
        // What was tracked after the first one resent waits for it at a peer that takes them
        // in order: its acknowledgement would measure the loss, not the path.
        if let first = result.resend.first { markWaiting(from: first.place) }
        if probing {
            probes = min(probes + 1, 32)
            probeDeadline = now + probeTimeout
            probePauseMark = paused
        }
        return result
    }

    /// Marks every entry as due at once, e.g. after a reconnect on a new path.
    @inlinable
    public mutating func expediteAll(now: NIODeadline) {
        look(now)
        lastAcknowledged = .distantPast
        probes = 0
        mayBeDueSooner()
        expedited = !entries.isEmpty
        for key in entries.keys {
            entries[key]!.held = false
            entries[key]!.lastSent = now - entries[key]!.timeout
            entries[key]!.pauseMark = paused
        }
    }

    /// The earliest time an entry becomes due; nil when nothing is pending.
    @inlinable
    public var nextDeadline: NIODeadline? {
        guard let earliest = entries.values.map({ deadline(of: $0) }).min() else { return nil }
        return probes > 0 ? max(earliest, shifted(probeDeadline, mark: probePauseMark)) : earliest
    }
}
