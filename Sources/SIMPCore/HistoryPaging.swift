/// How the server cuts a conversation's history into pages that each fit one control frame.
/// Positions count back from the newest stored message (0 is the newest); a page covers the
/// positions `before ..< nextBefore`. Pure, so the cut is tested without Redis.
public enum HistoryPaging {
    /// Stored messages read for one page at most. Bounds what one request costs Redis and the
    /// server (128 of the largest, ~1.3 KB each, are ~160 KB) while a page of short messages
    /// can still hold many.
    public static let maxReadPerPage = 128
    /// Frame bytes left for the rest of the envelope (request id, peer name, cursor: under
    /// 100 bytes), with room to spare.
    public static let frameMargin = 4096
    /// Cursors beyond this cannot name a stored message (history keeps about 1,100); clamped
    /// so that Redis indexes stay in range.
    public static let maxPosition = 1 << 30

    /// One page: stored messages oldest first, where the next older page starts, and whether
    /// one exists.
    public struct Page: Sendable, Equatable {
        public var items: [[UInt8]]
        public var nextBefore: UInt64
        public var more: Bool

        public init(items: [[UInt8]], nextBefore: UInt64, more: Bool) {
            self.items = items
            self.nextBefore = nextBefore
            self.more = more
        }
    }

    /// Bytes a page's messages may take in a frame of `maxFrameLength`.
    public static func budget(maxFrameLength: Int = Frame.defaultMaxLength) -> Int {
        maxFrameLength - frameMargin
    }

    /// The page of `read` (the stored messages ending at position `before`, oldest first, as
    /// LRANGE returns them) that fits `budget`: the longest run from the newest back. `stored`
    /// is how many messages the conversation holds. A message too large for any page is
    /// skipped rather than left to block every later request.
    public static func page(oldestFirst read: [[UInt8]], before: Int, stored: Int, budget: Int) -> Page {
        var taken: [[UInt8]] = []
        var used = 0
        var covered = 0
        for item in read.reversed() {
            let cost = fieldCost(item.count)
            if cost <= budget {
                guard used + cost <= budget else { break }
                used += cost
                taken.append(item)
            }
            covered += 1
        }
        let next = before + covered
        return Page(items: taken.reversed(), nextBefore: UInt64(next), more: stored > next)
    }

    /// What a message of `length` bytes costs in a repeated field: tag, length varint, body.
    public static func fieldCost(_ length: Int) -> Int {
        var varint = 1
        var rest = length >> 7
        while rest > 0 {
            varint += 1
            rest >>= 7
        }
        return 1 + varint + length
    }
}
