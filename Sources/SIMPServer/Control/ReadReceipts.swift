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
        return nil
    }

    /// Why a mark is not told, counted in `simp_read_marks_left_out_total{reason}`. A client
    /// that follows docs/PROTOCOL.md (its receipt before its marks, on the same connection)
    /// never sees `unconfirmed`; `unknown` is a mark of no message of the reader's inbox.
    enum LeftOut: String, CaseIterable, Sendable {
        /// Above the reading session's confirmed mark: not delivered (yet), so not read.
        case unconfirmed
        /// Not the sender's message at that seq in the reader's inbox.
        case unknown
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
        for mark in request.reads where seen.insert("\(mark.fromUser) \(mark.messageID)").inserted {
            if mark.seq <= reader.deviceMark { out.delivered.append(mark) } else { out.unconfirmed += 1 }
        }
        return out
    }

    /// The marks of messages the session has confirmed, each once.
    static func delivered(_ request: Simp_ReadRequest, reader: Reader) -> [Simp_ReadMark] {
        sorted(request, reader: reader).delivered
    }

    /// The notices for marks the store found genuine (`Scripts.readMarks`), by sender: one in
    /// each sender's inbox whose user takes read receipts, and one in the reader's own for its
    /// other devices.
    static func notices(_ marks: [Simp_ReadMark], reader: Reader, sendersTakingReceipts: Set<String>,
                        ids: () -> UInt64, nowMillis: Int64) -> [StoreRequest] {
        var bySender: [String: [String]] = [:]
        var order: [String] = []
        for mark in marks {
            if bySender[mark.fromUser] == nil { order.append(mark.fromUser) }
            bySender[mark.fromUser, default: []].append(mark.messageID)
        }
        return order.flatMap { sender -> [StoreRequest] in
            let content = bySender[sender]!.joined(separator: " ")
            var out: [StoreRequest] = []
            if sendersTakingReceipts.contains(sender) {
                out.append(notice(from: reader.user, to: sender, owner: sender, content: content, device: "", id: ids(), nowMillis: nowMillis))
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
        var request = StoreRequest(from: from, id: message.messageID, to: owner, bytes: (try? message.serializedBytes()) ?? [])
        request.notice = true
        // No device of the user's: tracked apart from what its devices send.
        request.device = ""
        return request
    }
}
