import Foundation

/// Sealed messages (docs/PROTOCOL.md, Sealed messages; docs/E2EE.md, Part 4): what the sender
/// wrote travels as an MLS application message of the conversation's group, in the `content`
/// of a message of type SEALED. The server sees who, when, the conversation and a padded
/// size; it checks the form and nothing it cannot read.
public enum SealedText {
    /// The most text one sealed message (or sealed part of a long one) carries: with its id
    /// and type inside, padded, framed and signed by MLS, then in base64, its message stays
    /// within `MessageRules.maxMessageBytes` with the longest id and recipient.
    public static let partBytes = 448
    /// The least text a sealed part other than the last carries (cut at a character's start).
    public static let fullPartBytes = partBytes - 3
    /// The sealed content is padded to a multiple of this many bytes (RFC 9420 section 6.3.1's
    /// padding): the server learns the size to within it.
    public static let paddingBlock = 64
    /// How every MLSMessage of wire format mls_private_message starts: version mls10 (1),
    /// wire format 2 (RFC 9420 section 6).
    public static let privateMessagePrefix: [UInt8] = [0, 1, 0, 2]

    /// The most sealed parts a text of at most `maxBytes` is cut into.
    public static func maxParts(forMaxBytes maxBytes: Int) -> Int {
        max(0, maxBytes - 1) / fullPartBytes + 1
    }

    /// The zero bytes of padding that bring `contentBytes` (the encrypted content before
    /// padding) to a multiple of `paddingBlock`.
    public static func padding(for contentBytes: Int) -> Int {
        (paddingBlock - contentBytes % paddingBlock) % paddingBlock
    }

    /// The MLSMessage a SEALED message's `content` holds; nil unless it is standard base64 of
    /// an mls_private_message's bytes.
    public static func mlsBytes(of content: String) -> [UInt8]? {
        guard let data = Data(base64Encoded: content), data.starts(with: privateMessagePrefix) else { return nil }
        return [UInt8](data)
    }

    /// The error code and reason the sender of a SEALED message gets, or nil: its id is a
    /// message's or a sealed part's within the limit, it has no image outside, and its content
    /// is an MLS PrivateMessage in base64.
    public static func problem(in message: Simp_Message, maxTextBytes: Int) -> (code: Simp_ErrorCode, reason: String)? {
        if message.messageID.utf8.contains(UInt8(ascii: "/")) {
            guard let part = LongText.PartID(message.messageID) else {
                return (.badRequest, "a sealed part's messageId must be <id>/<index>/<count> with 1 <= index <= count and count >= 2")
            }
            let limit = maxParts(forMaxBytes: maxTextBytes)
            if part.count > limit {
                return (.messageTooLarge, "a message of \(part.count) sealed parts is over the limit of \(maxTextBytes) bytes (at most \(limit) parts)")
            }
        }
        if !message.imageURL.isEmpty { return (.badRequest, "a sealed message carries its image inside, not in imageURL") }
        if mlsBytes(of: message.content) == nil {
            return (.badRequest, "a sealed message's content must be the base64 of an MLS PrivateMessage")
        }
        return nil
    }
}
