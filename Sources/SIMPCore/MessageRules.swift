/// What the server accepts in a data datagram's message. Pure, so the fuzzer reaches it.
public enum MessageRules {
    public static let maxMessageIDBytes = 64
    /// The most a message may hold as the server stores it, its sender and time set: its seq
    /// (a field of at most 11 bytes) is appended for the push, which must fit one datagram.
    public static let maxStoredBytes = DatagramHeader.maxPayload - 11
    /// The most a message may hold as a client builds it (no fromUser, clientSeq or seq): the
    /// server adds its sender (at most 34 bytes) and time (at most 11) to store it, and the
    /// sender's device (at most 18) to the copy its sender's other devices get, and to a group
    /// message its place in the group's order (at most 12) and the `#` of its address (1).
    public static let maxMessageBytes = maxStoredBytes - 34 - 11 - (DeviceName.maxBytes + 2) - groupOverhead
    /// What a group message's entry holds beyond a message to a user: `Message.groupSeq`.
    public static let groupSeqBytes = 12
    static let groupOverhead = groupSeqBytes + 1

    /// The error code and reason the sender gets, or nil when the message may be stored.
    /// `maxTextBytes`: the longest text the server takes (`--max-message-bytes`), whole or in parts.
    /// `sealedOnly` (`--e2e required`): a message to a user or a group must be SEALED.
    public static func problem(in message: Simp_Message, maxTextBytes: Int = LongText.defaultMaxBytes, sealedOnly: Bool = false)
        -> (code: Simp_ErrorCode, reason: String)? {
        if message.messageID.isEmpty || message.messageID.utf8.count > maxMessageIDBytes {
            return (.badRequest, "messageId must be 1-\(maxMessageIDBytes) bytes")
        }
        if message.toUser.first == GroupName.marker {
            if GroupName.addressed(by: message.toUser) == nil {
                return (.noSuchGroup, "no such group: \(message.toUser)")
            }
        } else if message.type == .sealedRead, message.toUser.contains(GroupName.marker) {
            // A group's sealed read receipt (`SENDER#NAME`): its address is checked with its form.
        } else if !UserName.isValid(message.toUser) {
            return (.unknownUser, "no such user: \(message.toUser)")
        }
        if !message.imageURL.isEmpty && !isAllowedImageURL(message.imageURL) {
            return (.badRequest, imageURLReason)
        }
        if sealedOnly, message.type != .sealed, message.type != .sealedRead {
            return (.e2ERequired, "this server takes only end-to-end encrypted messages (--e2e required): use a client that encrypts")
        }
        switch message.type {
        case .text where message.content.utf8.count > maxTextBytes:
            return (.messageTooLarge, "text of \(message.content.utf8.count) bytes is over the limit of \(maxTextBytes)")
        case .text, .image, .audio: return nil
        case .textPart: return LongText.problem(inPart: message, maxBytes: maxTextBytes)
        case .sealed: return SealedText.problem(in: message, maxTextBytes: maxTextBytes)
        case .sealedRead: return SealedSignals.readProblem(in: message)
        default: return (.badRequest, "message type \(message.type) cannot be sent as data")
        }
    }

    public static let imageURLReason = "imageURL must start with http:// or https://"

    /// Only web URLs are forwarded: a recipient's application may open the link, and other
    /// schemes (file:, javascript:, data:, app-specific ones) can do more than fetch an image.
    /// Schemes are case-insensitive (RFC 3986 section 3.1).
    public static func isAllowedImageURL(_ url: String) -> Bool {
        let lower = url.prefix(8).lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }
}
