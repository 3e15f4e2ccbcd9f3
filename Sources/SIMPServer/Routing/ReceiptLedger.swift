import NIOCore
import SIMPCore

/// Confirmed marks on their way to the store. Receipts that arrive in one loop tick are
/// written together, one mark per recipient device (the highest); a mark whose write failed is written
/// again after `retryAfter`, merged with any newer one. Pure: the caller supplies the time.
struct ReceiptLedger {
    /// One recipient's mark to write. `needsEntries`: this node does not know the sender of
    /// every message the mark confirms, so the store must return the confirmed entries.
    struct Mark: Equatable {
        var user: String
        var device = DeviceName.unnamed
        var upTo: UInt64
        var needsEntries: Bool

        var owner: Owner { Owner(user: user, device: device) }
    }

    struct Owner: Hashable {
        var user: String
        var device: String
    }

    let retryAfter: TimeAmount
    private var ready: [Owner: Mark] = [:]
    private var failed: [Owner: Mark] = [:]
    private var retryAt: NIODeadline = .distantFuture

    init(retryAfter: TimeAmount = .seconds(1)) {
        self.retryAfter = retryAfter
    }

    var hasReady: Bool { !ready.isEmpty }
    var failedCount: Int { failed.count }

    mutating func record(_ mark: Mark) {
        ready[mark.owner] = Self.merge(ready[mark.owner], mark)
    }

    /// The marks to write now: every recorded one, and the failed ones once their retry is due.
    mutating func take(now: NIODeadline) -> [Mark] {
        if now >= retryAt {
            for mark in failed.values { record(mark) }
            failed.removeAll()
            retryAt = .distantFuture
        }
        defer { ready.removeAll(keepingCapacity: true) }
        return Array(ready.values)
    }

    mutating func writeFailed(_ mark: Mark, now: NIODeadline) {
        failed[mark.owner] = Self.merge(failed[mark.owner], mark)
        retryAt = min(retryAt, now + retryAfter)
    }

    /// A newer write of the device's mark covers a failed older one.
    mutating func written(_ mark: Mark) {
        guard let waiting = failed[mark.owner], waiting.upTo <= mark.upTo else { return }
        failed[mark.owner] = nil
    }

    private static func merge(_ old: Mark?, _ new: Mark) -> Mark {
        guard let old else { return new }
        return Mark(user: new.user, device: new.device, upTo: max(old.upTo, new.upTo), needsEntries: old.needsEntries || new.needsEntries)
    }
}
