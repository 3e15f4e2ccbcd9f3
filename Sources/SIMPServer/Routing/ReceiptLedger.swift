import NIOCore
import SIMPCore

/// Receipts on their way to the store. Receipts that arrive in one loop tick are written
/// together, one per recipient device (the highest device mark); a receipt whose write failed
/// is written again after `retryAfter`, merged with any newer one. Pure: the caller supplies
/// the time.
///
/// The names along a receipt's path: the client's RECEIPT datagram (`Simp_Receipt`) raises
/// the session's **device mark** (the highest seq one device confirmed; Redis hash `cursors`),
/// the engine records a `Receipt`, the router writes it (`.writeReceipts`,
/// `MessageStore.writeReceipts`, `Scripts.receipt`), and the script raises the device mark in
/// Redis and the user's **delivered mark** (the highest device mark: a message is delivered
/// once one device confirms it; Redis key `acked`).
struct ReceiptLedger {
    /// One recipient device's receipt to write: its new device mark. `needsEntries`: this node
    /// does not know the sender of every message the receipt confirms, so the store must return
    /// the confirmed entries.
    struct Receipt: Equatable {
        var user: String
        var device = DeviceName.unnamed
        var deviceMark: UInt64
        var needsEntries: Bool

        var owner: Owner { Owner(user: user, device: device) }
    }

    struct Owner: Hashable {
        var user: String
        var device: String
    }

    let retryAfter: TimeAmount
    private var ready: [Owner: Receipt] = [:]
    private var failed: [Owner: Receipt] = [:]
    private var retryAt: NIODeadline = .distantFuture

    init(retryAfter: TimeAmount = .seconds(1)) {
        self.retryAfter = retryAfter
    }

    var hasReady: Bool { !ready.isEmpty }
    var failedCount: Int { failed.count }

    mutating func record(_ receipt: Receipt) {
        ready[receipt.owner] = Self.merge(ready[receipt.owner], receipt)
    }

    /// The receipts to write now: every recorded one, and the failed ones once their retry is due.
    mutating func take(now: NIODeadline) -> [Receipt] {
        if now >= retryAt {
            for receipt in failed.values { record(receipt) }
            failed.removeAll()
            retryAt = .distantFuture
        }
        defer { ready.removeAll(keepingCapacity: true) }
        return Array(ready.values)
    }

    mutating func writeFailed(_ receipt: Receipt, now: NIODeadline) {
        failed[receipt.owner] = Self.merge(failed[receipt.owner], receipt)
        retryAt = min(retryAt, now + retryAfter)
    }

    /// A newer write of the device's mark covers a failed older one.
    mutating func written(_ receipt: Receipt) {
        guard let waiting = failed[receipt.owner], waiting.deviceMark <= receipt.deviceMark else { return }
        failed[receipt.owner] = nil
    }

    private static func merge(_ old: Receipt?, _ new: Receipt) -> Receipt {
        guard let old else { return new }
        return Receipt(user: new.user, device: new.device, deviceMark: max(old.deviceMark, new.deviceMark), needsEntries: old.needsEntries || new.needsEntries)
    }
}
