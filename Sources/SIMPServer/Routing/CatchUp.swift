import NIOCore

/// One session's inbox reads after another node's notice (or a doubt about what was pushed):
/// one read at a time, one more after it when asked meanwhile, and whether a seq this node may
/// not have pushed is still unread (then nothing goes early). Pure; the router does the reads.
struct CatchUp: Sendable {
    private(set) var reading = false
    private var again = false
    /// Store answers that left a seq this node may not have pushed, and how many of them a
    /// read issued after them has covered.
    private var doubtsRaised: UInt64 = 0
    private var doubtsCleared: UInt64 = 0
    /// A failed read is tried again after this.
    static let retryAfterFailure = TimeAmount.seconds(1)

    /// A pushed seq may be missing here, or anything may be: a read issued after now covers it.
    var mayMissPushes: Bool { reading || doubtsCleared < doubtsRaised }

    mutating func doubt() { doubtsRaised += 1 }

    /// A read is wanted: the doubts it will cover when it should start now, nil when one is in
    /// flight (it is read again after that one).
    mutating func want() -> UInt64? {
        guard !reading else {
            again = true
            return nil
        }
        reading = true
        return doubtsRaised
    }

    /// The read started with `covering` doubts came back; when to read again, if at all.
    mutating func finished(covering: UInt64, succeeded: Bool) -> TimeAmount? {
        reading = false
        if succeeded { doubtsCleared = max(doubtsCleared, covering) } else { again = true }
        guard again else { return nil }
        again = false
        return succeeded ? .zero : Self.retryAfterFailure
    }
}
