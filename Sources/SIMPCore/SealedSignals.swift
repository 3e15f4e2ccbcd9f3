/// Read receipts and typing between encrypting users (docs/E2EE.md, Part 7; docs/PROTOCOL.md,
/// TYPING and Read receipts): the wire forms the server routes without reading them.
public enum SealedSignals {
    /// A TYPING datagram's body: a user name (the typed-to user from a client, the typer from
    /// the server), and for a sealed one a zero byte then an MLS PrivateMessage of the two users'
    /// conversation, which the server relays unread. No user name holds a zero byte, so a client
    /// or server that knows only the plain form drops the sealed one as not a user name.
    public struct TypingBody: Equatable, Sendable {
        public var user: String
        /// The MLSMessage (mls_private_message) bytes; nil for the plain form.
        public var sealed: [UInt8]?

        public init(user: String, sealed: [UInt8]? = nil) {
            self.user = user
            self.sealed = sealed
        }

        /// Parses a body; nil unless it names a valid user and, when sealed, the rest starts
        /// as an MLS PrivateMessage (`SealedText.privateMessagePrefix`) and holds more than that.
        public init?(_ payload: some Collection<UInt8>) {
            let bytes = Array(payload)
            guard let zero = bytes.firstIndex(of: 0) else {
                let name = String(decoding: bytes, as: UTF8.self)
                guard UserName.isValid(name) else { return nil }
                self.init(user: name)
                return
            }
            let name = String(decoding: bytes[..<zero], as: UTF8.self)
            let rest = Array(bytes[(zero + 1)...])
            guard UserName.isValid(name), rest.count > SealedText.privateMessagePrefix.count,
                  rest.starts(with: SealedText.privateMessagePrefix) else { return nil }
            self.init(user: name, sealed: rest)
        }

        public var bytes: [UInt8] {
            guard let sealed else { return Array(user.utf8) }
            return Array(user.utf8) + [0] + sealed
        }

        /// The same body naming another user (the server names the typer where the client named
        /// the typed-to user).
        public func naming(_ other: String) -> TypingBody { TypingBody(user: other, sealed: sealed) }
    }

    /// Where a SEALED_READ goes (its `toUser`): the sender of the messages read, `SENDER` for a
    /// one-to-one conversation's, `SENDER#NAME` for messages SENDER sent to the group `#NAME`
    /// (sealed in that group's MLS group, told to SENDER alone, never fanned out to the group).
    /// No user or group name holds a `#`, so the two forms, a user and a group's address never
    /// meet.
    public struct ReadAddress: Equatable, Sendable {
        /// The user whose messages were read: the inbox it is stored in.
        public var sender: String
        /// The group the messages were sent to (its name, without `#`); nil one to one.
        public var group: String?

        public init(sender: String, group: String? = nil) {
            self.sender = sender
            self.group = group
        }

        /// Parses a SEALED_READ's `toUser`; nil unless it is a valid user name, or one followed by
        /// a group's address.
        public init?(_ toUser: String) {
            guard let marker = toUser.firstIndex(of: GroupName.marker) else {
                guard UserName.isValid(toUser) else { return nil }
                self.init(sender: toUser)
                return
            }
            let sender = String(toUser[..<marker])
            guard UserName.isValid(sender), let group = GroupName.addressed(by: String(toUser[marker...])) else { return nil }
            self.init(sender: sender, group: group)
        }

        public var toUser: String { group.map { sender + GroupName.address($0) } ?? sender }
        /// The conversation whose MLS group seals it: the sender's (one to one), or `#NAME`.
        public var conversation: String { group.map(GroupName.address) ?? sender }
    }

    /// The user whose inbox a message to a user goes to: its `toUser`, but for a group's sealed
    /// read receipt (`SENDER#NAME`) SENDER.
    public static func inboxOwner(of message: Simp_Message) -> String {
        guard message.type == .sealedRead, let address = ReadAddress(message.toUser) else { return message.toUser }
        return address.sender
    }

    /// The error code and reason the sender of a SEALED_READ gets, or nil: it goes to a user, or
    /// to a user in a group (`ReadAddress`), never to a whole group, under a plain id, with no
    /// image, its content an MLS PrivateMessage in base64.
    public static func readProblem(in message: Simp_Message) -> (code: Simp_ErrorCode, reason: String)? {
        if GroupName.addressed(by: message.toUser) != nil {
            return (.badRequest, "a sealed read receipt goes to the sender of the messages read (SENDER, or SENDER#GROUP), not to a group")
        }
        if ReadAddress(message.toUser) == nil { return (.unknownUser, "no such user: \(message.toUser)") }
        if message.messageID.utf8.contains(UInt8(ascii: "/")) {
            return (.badRequest, "a sealed read receipt has a plain messageId, never a part's")
        }
        if !message.imageURL.isEmpty { return (.badRequest, "a sealed read receipt carries no imageURL") }
        if SealedText.mlsBytes(of: message.content) == nil {
            return (.badRequest, "a sealed read receipt's content must be the base64 of an MLS PrivateMessage")
        }
        return nil
    }

    /// What an encrypting client's sealed content may hold under each outer form: a SEALED
    /// message holds a text, image or part; a SEALED_READ a READ; a sealed TYPING a TYPING. Any
    /// other pairing is refused (a server that moved an MLS message into another form).
    public static func innerFits(outer: Simp_Message.MessageType?, inner: Simp_Message.MessageType) -> Bool {
        switch outer {
        case .sealed?: [.text, .image, .textPart].contains(inner)
        case .sealedRead?: inner == .read
        case nil: inner == .typing
        default: false
        }
    }
}
