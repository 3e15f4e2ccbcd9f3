import NIOCore

/// The devices that stand in for the one chosen to commit a KEYS hint in a group
/// (`ConversationKeys.commitsOnHint`: the device of the lowest leaf that is not the peer's),
/// should it be away: the device of deputy rank k (the k-th such leaf after it) commits the
/// hint k x `delay` after its check named the duty (or once bound again, if it was not), having
/// first fetched the group's commits, so that it commits only what the chosen device has not. Only the first `ranks` stand in: a hint to a
/// group of 100 is not a race of 99 devices for one epoch (each claiming the new device's
/// KeyPackages). Pure: the caller gives the time.
struct KeysDeputies: Sendable {
    /// This device stands in, at `rank`, for the hint about `peer`'s keys in `conversation`.
    struct Duty: Sendable, Hashable {
        var peer: String
        var conversation: String
        var rank: Int
    }

    /// The wait per rank: long enough for the chosen device, when online, to have committed
    /// (a claim, a commit and its Welcome: well under a second on a working path) and for its
    /// commit to be fetched; short enough that a new device is not kept waiting for a send.
    static let delay = TimeAmount.seconds(10)
    static let ranks = 1...3

    private var due: [Key: NIODeadline] = [:]

    private struct Key: Hashable {
        var peer: String
        var conversation: String
    }

    /// Duties named by a hint's check: each falls due `rank` x `delay` from `now` (an earlier
    /// one for the same peer and conversation stays).
    mutating func named(_ duties: [Duty], now: NIODeadline) {
        for duty in duties where Self.ranks.contains(duty.rank) {
            let key = Key(peer: duty.peer, conversation: duty.conversation)
            let at = now + Self.delay * Int64(duty.rank)
            due[key] = min(due[key] ?? at, at)
        }
    }

    /// When the next duty falls due.
    var next: NIODeadline? { due.values.min() }

    /// The duties due at `now`, taken, in a stable order.
    mutating func take(now: NIODeadline) -> [(peer: String, conversation: String)] {
        let ready = due.filter { $0.value <= now }.keys.sorted { ($0.peer, $0.conversation) < ($1.peer, $1.conversation) }
        for key in ready { due[key] = nil }
        return ready.map { ($0.peer, $0.conversation) }
    }
}
