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

    /// The error code and reason the sender of a SEALED_READ gets, or nil: it goes to a user (a
    /// group's reads are not sealed yet), under a plain id, with no image, its content an MLS
    /// PrivateMessage in base64.
    public static func readProblem(in message: Simp_Message) -> (code: Simp_ErrorCode, reason: String)? {
        if GroupName.addressed(by: message.toUser) != nil {
            return (.badRequest, "a sealed read receipt goes to the sender of the messages read, not to a group")
        }
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
