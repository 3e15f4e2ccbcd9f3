/// With `ClientConfiguration.confirmWhenShown`: the messages handed to the application that it
/// has not said it showed (`markShown`, `markRead`). Receipts confirm only below the lowest
/// of them, so a sender hears **delivered** once its message was shown; what arrived above is
/// reported as received (`Receipt.receivedUpToSeq`), so the server stops pushing it.
/// Pure: seqs in, a mark out.
struct ShownLedger: Sendable, Equatable {
    /// Handed over and not shown, ascending (seqs come in order, so inserts append).
    private var waiting: [UInt64] = []
    /// Said shown before they were handed over (the application marked a conversation while
    /// the message was on its way from the disk): never waited for.
    private var shownAhead: Set<UInt64> = []

    init(waiting: [UInt64] = []) {
        self.waiting = Array(Set(waiting)).sorted()
    }

    var isEmpty: Bool { waiting.isEmpty }

    /// The seq of a message the application was handed.
    mutating func handedOver(_ seq: UInt64) {
        guard seq > 0, shownAhead.remove(seq) == nil else { return }
        if let last = waiting.last, seq <= last {
            let at = Self.index(of: seq, in: waiting)
            if at < waiting.count, waiting[at] == seq { return }
            waiting.insert(seq, at: at)
        } else {
            waiting.append(seq)
        }
    }

    /// The application showed these; returns whether the confirmable mark may have risen.
    @discardableResult
    mutating func shown(_ seqs: [UInt64]) -> Bool {
        let lowest = waiting.first
        for seq in seqs where seq > 0 {
            let at = Self.index(of: seq, in: waiting)
            if at < waiting.count, waiting[at] == seq {
                waiting.remove(at: at)
            } else if shownAhead.count < Self.maxShownAhead {
                shownAhead.insert(seq)
            }
        }
        return waiting.first != lowest
    }

    /// What a receipt may confirm when `received` is everything the client holds in order.
    func confirmable(received: UInt64) -> UInt64 {
        guard let lowest = waiting.first else { return received }
        return min(received, lowest - 1)
    }

    /// Seqs marked ahead are kept only until their messages come; a bound, since an
    /// application may name seqs that never come (a message of another device's inbox).
    static let maxShownAhead = 4_096

    private static func index(of seq: UInt64, in sorted: [UInt64]) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid] < seq { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
