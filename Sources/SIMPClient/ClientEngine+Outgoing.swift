import SIMPCore

/// Messages as they will be sent, made where `send` is called (off the client's loop, so a
/// sender pays no hop): pure, with the time and the random numbers given.
extension ClientEngine {
    /// What `send` queues: the message's id, and the messages that carry it (one, or the parts
    /// of a long text in order).
    struct Made: Sendable {
        var id: String
        var items: [Outgoing]
        /// The message as the local history keeps it: the whole text of a long one, under its id.
        var whole: Outgoing
    }

    /// A text, whole when it fits one part, else in parts; over `limit` bytes, refused.
    /// `partBytes`: the most text one message carries (`SealedText.partBytes` for one to be sealed).
    static func text(_ text: String, to user: String, limit: Int, at millis: Int64, partBytes: Int = LongText.partBytes,
                     random: () -> UInt64) throws(ClientError) -> Made {
        let size = text.utf8.count
        guard size <= limit else {
            throw ClientError("message is \(size) bytes; the limit is \(limit)", code: .messageTooLarge)
        }
        guard size > partBytes else { return try message(plain(text), to: user, at: millis, random: random) }
        let parts = LongText.split(text, partBytes: partBytes)
        let base = String(messageID(random))
        var items: [Outgoing] = []
        for (index, part) in parts.enumerated() {
            let id = LongText.PartID(base: base, index: index + 1, count: parts.count)
            items.append(try outgoing(plain(part, type: .textPart), to: user, id: id.description, at: millis))
        }
        var whole = plain(text)
        whole.messageID = base
        whole.time = millis
        whole.toUser = user
        return Made(id: base, items: items, whole: Outgoing(to: user, message: whole))
    }

    /// One message with a new id.
    static func message(_ given: Simp_Message, to user: String, at millis: Int64,
                        random: () -> UInt64) throws(ClientError) -> Made {
        let item = try outgoing(given, to: user, id: String(messageID(random)), at: millis)
        return Made(id: item.message.messageID, items: [item], whole: item)
    }

    static func plain(_ text: String, type: Simp_Message.MessageType = .text) -> Simp_Message {
        var message = Simp_Message()
        message.type = type
        message.content = text
        return message
    }

    /// Never 0, which no message id is.
    private static func messageID(_ random: () -> UInt64) -> UInt64 {
        max(random(), 1)
    }

    /// The message as it will be sent; throws what the server would refuse.
    private static func outgoing(_ given: Simp_Message, to user: String, id: String, at millis: Int64) throws(ClientError) -> Outgoing {
        // A read receipt may also go to a sender in a group (`SENDER#NAME`, sealed: docs/E2EE.md, Part 7).
        guard UserName.isValid(user) || GroupName.addressed(by: user) != nil
                || (given.type == .read && SealedSignals.ReadAddress(user) != nil) else {
            throw ClientError("not a valid user name or #group: \(user)", code: .unknownUser)
        }
        guard given.imageURL.isEmpty || MessageRules.isAllowedImageURL(given.imageURL) else {
            throw ClientError("\(MessageRules.imageURLReason), got \(given.imageURL)", code: .badRequest)
        }
        var message = given
        message.version = 1
        message.messageID = id
        message.time = millis
        message.toUser = user
        // Serialized only when it may be near the limit: the usual message is far below it.
        if sizeBound(message) > MessageRules.maxMessageBytes {
            let size = ((try? message.serializedBytes()) as [UInt8]?)?.count ?? Int.max
            guard size <= MessageRules.maxMessageBytes else {
                throw ClientError("message is \(size) bytes; the limit is \(MessageRules.maxMessageBytes)", code: .messageTooLarge)
            }
        }
        return Outgoing(to: user, message: message)
    }

    /// At least the serialized size of a message as the client sends it (with its clientSeq):
    /// each of the five strings costs a tag and at most 3 length bytes besides its own, the
    /// seven scalars at most 11 bytes each with their tags.
    static func sizeBound(_ message: Simp_Message) -> Int {
        let text = message.messageID.utf8.count + message.content.utf8.count + message.imageURL.utf8.count
            + message.fromUser.utf8.count + message.toUser.utf8.count
        return text + 5 * 4 + 7 * 11
    }
}
