import NIOCore

/// The receiver's record of the messages it handed to the application early, before they were
/// stored and numbered (EARLY datagrams), kept until the numbered copy or a retraction comes:
/// the numbered copy is then confirmed like any other but not handed over again. Pure: the
/// caller supplies the time and the sequencer's state.
public struct EarlyLedger: Sendable {
    public struct Key: Hashable, Sendable {
        public var from: String
        public var id: String

        public init(from: String, id: String) {
            self.from = from
            self.id = id
        }
    }

    /// A server sends one early message per recipient at a time; more entries than this are
    /// ones whose fate was lost with a connection. Full, the ledger takes nothing early: the
    /// messages come numbered, and none is shown twice because an entry was pushed out.
    public static let capacity = 64
    /// An entry whose numbered copy and retraction were both lost (its session ended before the
    /// store answered, and the store failed) is forgotten after this: a numbered copy can come
    /// no later than the recipient's next session after the sender's store, within a day.
    public static let lifetime = TimeAmount.hours(24)

    private var handed: [Key: NIODeadline] = [:]
    /// Retractions that came before their early datagram (it was delayed on the way): that
    /// datagram, should it still come, is not taken. The newest `capacity` are kept.
    private var retractedFirst: [Key] = []

    public init() {}

    public var count: Int { handed.count }

    /// Whether an early message may be handed over now, recording it if so: only when the
    /// receiver has handed over exactly the seqs up to `afterSeq` (the server's view when it
    /// pushed) and holds none above a gap, so it overtakes nothing numbered and is not a late
    /// copy of one already handed over.
    public mutating func admit(_ key: Key, afterSeq: UInt64, deliveredUpTo: UInt64, holding: Bool, now: NIODeadline) -> Bool {
        forgetExpired(now: now)
        guard afterSeq == deliveredUpTo, !holding, handed[key] == nil, handed.count < Self.capacity,
              retractedFirst.isEmpty || !retractedFirst.contains(key) else { return false }
        handed[key] = now
        return true
    }

    /// A numbered message's turn came: true when it was handed over early (confirm it, do not
    /// hand it over again).
    public mutating func numbered(_ key: Key) -> Bool {
        guard !handed.isEmpty else { return false }
        return handed.removeValue(forKey: key) != nil
    }

    /// The server says an early message was not stored: true when it was handed over here.
    public mutating func retracted(_ key: Key) -> Bool {
        if handed.removeValue(forKey: key) != nil { return true }
        if retractedFirst.count == Self.capacity { retractedFirst.removeFirst() }
        retractedFirst.append(key)
        return false
    }

    private mutating func forgetExpired(now: NIODeadline) {
        guard !handed.isEmpty else { return }
        handed = handed.filter { now - $0.value < Self.lifetime }
    }
}
