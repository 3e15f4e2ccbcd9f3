/// What the server accepts in a data datagram's message. Pure, so the fuzzer reaches it.
public enum MessageRules {
    public static let maxMessageIDBytes = 64

    /// The error code and reason the sender gets, or nil when the message may be stored.
    public static func problem(in message: Simp_Message) -> (code: Simp_ErrorCode, reason: String)? {
        if message.messageID.isEmpty || message.messageID.utf8.count > maxMessageIDBytes {
            return (.badRequest, "messageId must be 1-\(maxMessageIDBytes) bytes")
        }
        if !UserName.isValid(message.toUser) {
            return (.unknownUser, "no such user: \(message.toUser)")
        }
        switch message.type {
        case .text, .image, .audio: return nil
        default: return (.badRequest, "message type \(message.type) cannot be sent as data")
        }
    }
}
