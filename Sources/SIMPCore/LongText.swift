/// Long messages (docs/PROTOCOL.md, Long messages): a text too long for one datagram goes as
/// parts, each an ordinary message of type TEXT_PART, stored, pushed, confirmed and resent like
/// any other. A part's id names the whole message, the part's place and how many there are,
/// so the recipient can put the text back together and show it once, whole.
public enum LongText {
    /// The most text one part carries. Its message (with the longest id, recipient, time and
    /// order) stays within `MessageRules.maxMessageBytes`, so every part fits one datagram.
    public static let partBytes = 960
    /// The least text a part other than the last carries: it is cut at a character's start,
    /// and a UTF-8 character is at most 4 bytes.
    public static let fullPartBytes = partBytes - 3
    /// What `--max-message-bytes` is unless set: 64 KiB of UTF-8 text.
    public static let defaultMaxBytes = 65_536

    /// The most parts a text of at most `maxBytes` is cut into; under 2 (no long message)
    /// when the limit is within one part.
    public static func maxParts(forMaxBytes maxBytes: Int) -> Int {
        max(0, maxBytes - 1) / fullPartBytes + 1
    }

    /// `text` cut into parts of at most `partBytes` bytes, each ending where a character
    /// (a Unicode scalar) ends, so each part is valid UTF-8 and the parts joined are the text.
    public static func split(_ text: String, partBytes: Int = LongText.partBytes) -> [String] {
        let bytes = Array(text.utf8)
        var parts: [String] = []
        var start = 0
        while start < bytes.count {
            var end = min(start + partBytes, bytes.count)
            while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end -= 1 }
            parts.append(String(decoding: bytes[start..<end], as: UTF8.self))
            start = end
        }
        return parts
    }

    /// A part's `messageId`: "<id>/<index>/<count>", index from 1, count at least 2.
    public struct PartID: Hashable, Sendable, CustomStringConvertible {
        /// The whole message's id.
        public var base: String
        public var index: Int
        public var count: Int

        public init(base: String, index: Int, count: Int) {
            self.base = base
            self.index = index
            self.count = count
        }

        /// Nil unless `id` has the form, with 1 <= index <= count and count >= 2, written as
        /// `description` writes it (no sign, no leading zero): one part, one id.
        public init?(_ id: String) {
            let fields = id.split(separator: "/", omittingEmptySubsequences: false)
            guard fields.count >= 3, let count = Int(fields[fields.count - 1]), let index = Int(fields[fields.count - 2]),
                  count >= 2, (1...count).contains(index) else { return nil }
            let base = fields.dropLast(2).joined(separator: "/")
            guard !base.isEmpty else { return nil }
            self.init(base: base, index: index, count: count)
            guard description == id else { return nil }
        }

        public var description: String { "\(base)/\(index)/\(count)" }
        public var isLast: Bool { index == count }
    }

    /// The id shown for the message stored under `id`: its own; for the last part of a long
    /// message, the message's (receipts are cumulative, so its confirmation covers every
    /// part); nil for any other part.
    public static func shownID(of id: String) -> String? {
        guard id.utf8.contains(UInt8(ascii: "/")), let part = PartID(id) else { return id }
        return part.isLast ? part.base : nil
    }

    /// The error code and reason for a part the server must refuse, or nil. Its id has the
    /// form; it holds 1-`partBytes` bytes, and at least `fullPartBytes` unless it is the last;
    /// so the parts before it hold at least `fullPartBytes` each, and the text up to its end
    /// at least that much more than it: that may not pass the limit. The text is then at most
    /// 3 bytes a part over the limit, however its sender cut it, and nothing need be kept.
    public static func problem(inPart message: Simp_Message, maxBytes: Int) -> (code: Simp_ErrorCode, reason: String)? {
        guard let part = PartID(message.messageID) else {
            return (.badRequest, "a TEXT_PART's messageId must be <id>/<index>/<count> with 1 <= index <= count and count >= 2")
        }
        let limit = maxParts(forMaxBytes: maxBytes)
        if part.count > limit {
            return (.messageTooLarge, "a message of \(part.count) parts is over the limit of \(maxBytes) bytes (at most \(limit) parts)")
        }
        let size = message.content.utf8.count
        if size == 0 || size > partBytes { return (.badRequest, "a part holds 1-\(partBytes) bytes of text, not \(size)") }
        if !part.isLast, size < fullPartBytes {
            return (.badRequest, "every part but the last holds at least \(fullPartBytes) bytes, not \(size)")
        }
        if (part.index - 1) * fullPartBytes + size > maxBytes {
            return (.messageTooLarge, "a message with part \(part.index) of \(size) bytes is over the limit of \(maxBytes) bytes")
        }
        return nil
    }
}
