import NIOCore

/// Which logins a device's revocation ends, and the revocations a node heard lately.
///
/// A revocation ends the logins whose token was issued at or before it (the rule Redis applies
/// to a CONNECT, `Scripts.registerDevice`), so a login made after it, with a new token, outlives
/// a late announcement of it. A CONNECT checks the revocation in Redis before it joins the
/// node's `LoginTable`: one that passed that check just before the revocation was written, and
/// joins just after the revocation's closes ran, was in no table they could find. So the table
/// remembers what it closed for a while, and a join whose token a remembered revocation ends is
/// refused. The while only has to outlast a CONNECT's way from its check to its join (a few
/// Redis round trips), not a token's lifetime.
struct RecentRevocations {
    /// Whether a revocation at `revokedAt` ends a login whose token was issued at `tokenIssued`
    /// (both ms since the epoch). A revocation without a time (announced by a node of an
    /// earlier version) ends every login of the device, as it did there.
    static func ends(tokenIssued: Int64, revokedAt: Int64?) -> Bool {
        guard let revokedAt else { return true }
        return tokenIssued <= revokedAt
    }

    private struct Device: Hashable {
        var user: String
        var device: String
    }

    private struct Heard {
        var revokedAt: Int64
        /// When it was last heard: it counts until `keepFor` after.
        var at: NIODeadline
        /// Which hearing that was (`hearings`): only its own leaving `order` forgets it.
        var hearing: UInt64
    }

    /// How long a revocation is remembered after it was heard.
    let keepFor: TimeAmount
    /// The most remembered at once: the oldest go first when more are heard within `keepFor`.
    let most: Int
    private var latest: [Device: Heard] = [:]
    /// Every hearing in the order heard, to forget them in that order.
    private var order = CircularBuffer<(device: Device, at: NIODeadline, hearing: UInt64)>()
    private var hearings: UInt64 = 0

    init(keepFor: TimeAmount = .seconds(60), most: Int = 10_000) {
        precondition(most > 0, "a memory of no revocation refuses nothing")
        self.keepFor = keepFor
        self.most = most
    }

    /// How many devices' revocations are kept (some may be past their while until the next
    /// hearing drops them).
    var count: Int { latest.count }

    /// The device was revoked at `revokedAt` (ms since the epoch), heard `now`.
    mutating func heard(user: String, device: String, revokedAt: Int64, now: NIODeadline) {
        let key = Device(user: user, device: device)
        let known = latest[key]?.revokedAt ?? .min
        hearings += 1
        latest[key] = Heard(revokedAt: max(known, revokedAt), at: now, hearing: hearings)
        order.append((key, now, hearings))
        forget(now: now)
    }

    /// Whether a login of the device with a token issued at `tokenIssued` must be refused: a
    /// revocation heard lately ends it.
    func refuses(user: String, device: String, tokenIssued: Int64, now: NIODeadline) -> Bool {
        guard let heard = latest[Device(user: user, device: device)], now < heard.at + keepFor else { return false }
        return Self.ends(tokenIssued: tokenIssued, revokedAt: heard.revokedAt)
    }

    /// Drops the hearings older than `keepFor`, and the oldest beyond `most`. A device heard
    /// again keeps its entry until its last hearing goes.
    private mutating func forget(now: NIODeadline) {
        while let first = order.first, order.count > most || first.at + keepFor <= now {
            order.removeFirst()
            if latest[first.device]?.hearing == first.hearing { latest[first.device] = nil }
        }
    }
}
