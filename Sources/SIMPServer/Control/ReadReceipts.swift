import SIMPCore

/// Read receipts (docs/PROTOCOL.md, Read receipts), pure: which marks of a `markRead` may be
/// told, and the notices that tell them.
enum ReadReceipts {
    /// Marks one request may carry.
    static let maxMarks = 256

    /// What the reader's session knows when the request comes.
    struct Reader: Sendable, Equatable {
        var user: String
        var device: String
        /// The highest seq the session confirmed: a message above it is not delivered yet.
        var deviceMark: UInt64
        /// The user has other devices, which learn of the read too.
        var otherDevices: Bool
    }

    static func problem(in request: Simp_ReadRequest, from user: String) -> String? {
        if request.reads.count > maxMarks { return "at most \(maxMarks) marks in one request" }
        if let bad = request.reads.first(where: { !UserName.isValid($0.fromUser) || $0.fromUser == user || $0.seq == 0 || $0.messageID.isEmpty }) {
            return "not a message of another user's in your inbox: \(bad.fromUser) \(bad.messageID) at seq \(bad.seq)"
        }
        if let bad = request.reads.first(where: { $0.group.isEmpty != ($0.groupSeq == 0) || (!$0.group.isEmpty && !GroupName.isValid($0.group)) }) {
            return "a group message's mark names its group and its place in the group's order, a one-to-one mark neither: "
                + "group '\(bad.group)' at \(bad.groupSeq)"
        }
        return nil
    }

    /// Under `--e2e required` every conversation, one-to-one or group, is encrypted, so a mark
    /// sent in the clear would tell the server what its reader read: it goes sealed
    /// (`SEALED_READ`, a group's to `SENDER#NAME`, docs/E2EE.md, Part 7), and a request naming
    /// any mark is refused, nothing told.
    static func sealedOnlyProblem(in request: Simp_ReadRequest, sealedOnly: Bool) -> String? {
        guard sealedOnly, !request.reads.isEmpty else { return nil }
        return "this server takes read receipts only end-to-end encrypted (--e2e required): send them sealed"
    }

    /// Why a mark is not told, counted in `simp_read_marks_left_out_total{reason}`. A client
    /// that follows docs/PROTOCOL.md (its receipt before its marks, on the same connection)
    /// never sees `unconfirmed`; `unknown` is a mark of no message of the reader's inbox.
    enum LeftOut: String, CaseIterable, Sendable {
        /// Above the reading session's confirmed mark: not delivered (yet), so not read.
        case unconfirmed
        /// Not the sender's message at that seq in the reader's inbox (for a group mark: not
        /// the sender's entry at that place in the group's order, or one the group's copies to
        /// the reader have not reached).
        case unknown
        /// A group mark of a reader who is not a member of the group (now).
        case notMember = "not-member"
    }

    /// A request's marks: those told if genuine, and how many were above the confirmed mark.
    struct Sorted: Sendable, Equatable {
        var delivered: [Simp_ReadMark]
        var unconfirmed: Int
    }

    /// The marks of messages the session has confirmed (a read is never told before the
    /// message was delivered), each once; the others counted.
    static func sorted(_ request: Simp_ReadRequest, reader: Reader) -> Sorted {
        var seen = Set<String>()
        var out = Sorted(delivered: [], unconfirmed: 0)
        for mark in request.reads where seen.insert("\(mark.fromUser) \(mark.messageID) \(mark.group)").inserted {
            if mark.seq <= reader.deviceMark { out.delivered.append(mark) } else { out.unconfirmed += 1 }
        }
        return out
    }

    /// The marks of messages the session has confirmed, each once.
    static func delivered(_ request: Simp_ReadRequest, reader: Reader) -> [Simp_ReadMark] {
        sorted(request, reader: reader).delivered
    }

    /// Where a mark's message was sent: its sender, or `#NAME` for a group's.
    struct Conversation: Hashable, Sendable {
        var sender: String
        /// The group's name; empty for a one-to-one message.
        var group: String

        init(_ mark: Simp_ReadMark) {
            sender = mark.fromUser
            group = mark.group
        }

        /// The notice's `toUser` in the sender's inbox: the sender, or the group's address.
        var toUser: String { group.isEmpty ? sender : GroupName.address(group) }
    }

    /// The notices for marks the store found genuine (`Scripts.readMarks`,
    /// `Scripts.groupReadMarks`), by sender and conversation: one in each sender's inbox whose
    /// user takes read receipts (a group message's names the group: `toUser` `#NAME`), and one
    /// in the reader's own for its other devices (naming the sender, for a group message too:
    /// the local history knows a message by its sender and id).
    static func notices(_ marks: [Simp_ReadMark], reader: Reader, sendersTakingReceipts: Set<String>,
                        ids: () -> UInt64, nowMillis: Int64) -> [StoreRequest] {
        var byConversation: [Conversation: [String]] = [:]
        var order: [Conversation] = []
        for mark in marks {
            let conversation = Conversation(mark)
            if byConversation[conversation] == nil { order.append(conversation) }
            byConversation[conversation, default: []].append(mark.messageID)
        }
        return order.flatMap { conversation -> [StoreRequest] in
            let content = byConversation[conversation]!.joined(separator: " ")
            let sender = conversation.sender
            var out: [StoreRequest] = []
            if sendersTakingReceipts.contains(sender) {
                out.append(notice(from: reader.user, to: conversation.toUser, owner: sender, content: content, device: "", id: ids(),
                                  nowMillis: nowMillis))
            }
            if reader.otherDevices {
                out.append(notice(from: reader.user, to: sender, owner: reader.user, content: content, device: reader.device, id: ids(),
                                  nowMillis: nowMillis))
            }
            return out
        }
    }

    /// A READ notice in `owner`'s inbox, kept out of the history.
    private static func notice(from: String, to: String, owner: String, content: String, device: String,
                               id: UInt64, nowMillis: Int64) -> StoreRequest {
        var request = StoreRequest.notice(.read, from: from, to: to, owner: owner, content: content, device: device, id: id, nowMillis: nowMillis)
        request.inHistory = false
        return request
    }
}

extension StoreRequest {
    /// A notice of the server's (`notice`): a message of `type` from `from` to `to`, stored in
    /// `owner`'s inbox; `id` and the time are the driver's.
    static func notice(_ type: Simp_Message.MessageType, from: String, to: String, owner: String, content: String = "",
                       device: String = "", id: UInt64, nowMillis: Int64) -> StoreRequest {
        var message = Simp_Message()
        message.version = 1
        message.messageID = String(id)
        message.time = nowMillis
        message.serverTime = nowMillis
        message.fromUser = from
        message.toUser = to
        message.type = type
        message.content = content
        message.fromDevice = device
        // Read back from the inbox, it must tell nobody it was delivered either (`Push(stored:)`).
        assert(message.isNotice, "\(type) is not a notice type (Simp_Message.isNotice)")
        var request = StoreRequest(from: from, id: message.messageID, to: owner, bytes: (try? message.serializedBytes()) ?? [])
        request.notice = true
        // No device of the user's: tracked apart from what its devices send.
        request.device = ""
        return request
    }
}
