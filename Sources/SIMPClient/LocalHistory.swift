import Foundation
import SIMPCore

/// A message of the local history (`SIMPClient.messages(in:before:limit:)`): received, or sent
/// by the user (from this device or, as its copy, from another), as the data directory keeps it.
public struct LocalMessage: Sendable, Equatable {
    public var id: String
    /// The other user, or `#NAME` for a group.
    public var conversation: String
    public var from: String
    /// The user sent it (from this device or another).
    public var isOutgoing: Bool
    public var text: String
    /// An image message's image; nil for others.
    public var imageURL: URL? {
        get { imageLink.flatMap(URL.init(string:)) }
        set { imageLink = newValue?.absoluteString }
    }
    /// When its sender sent it, by the sender's clock.
    public var sentAt: Date {
        get { Date(millis: sentMillis) }
        set { sentMillis = newValue.millis }
    }
    /// As the store keeps them.
    var imageLink: String?
    var sentMillis: Int64
    /// Its place in the user's inbox (received), or the recipient's (sent, once accepted); 0 before.
    public var seq: UInt64
    /// Its place in the local order, for paging (`before:`): the order this device learnt of
    /// the messages (its own sends when sent, others' when received).
    public var position: Int64
    /// A message the user sent: where it stands, as far as this device heard. Nil for a received one.
    public var status: MessageStatus?
    /// A received message the application has not marked shown (`markShown`).
    public var unread: Bool
    /// How many parts a long message came in; 1 for others.
    public var parts = 1
    /// A received group message: its place in the group's order (what its read mark names);
    /// 0 for others, and for one kept before the history recorded it.
    var groupSeq: UInt64 = 0

    /// The id a read mark names: a long message's last part (the entry at `seq`).
    var markID: String {
        parts > 1 ? LongText.PartID(base: id, index: parts, count: parts).description : id
    }

    /// The read marks that tell senders what was shown: one per received, numbered message; a
    /// group message's names its group and place in the group's order (one kept without its
    /// place, before the history recorded it, is left out).
    static func readMarks(_ shown: [LocalMessage]) -> [Simp_ReadMark] {
        shown.compactMap { message in
            guard !message.isOutgoing, message.seq > 0 else { return nil }
            let group = GroupName.addressed(by: message.conversation)
            guard group == nil || message.groupSeq > 0 else { return nil }
            return Simp_ReadMark(from: message.from, id: message.markID, seq: message.seq, group: group, groupSeq: message.groupSeq)
        }
    }
}

extension IncomingMessage {
    /// The read mark of a message another user sent `reader`, one to one or in a group; nil for
    /// notices, group changes, the user's own (a copy from another device) and messages handed
    /// over early and never numbered (`seq` 0). Every group message carries its sender's
    /// device, so a group's own are told apart by their sender.
    func readMark(reader: String?) -> Simp_ReadMark? {
        guard kind == .message, groupChange == nil, seq > 0 else { return nil }
        if let group {
            guard groupSeq > 0, let reader, from != reader else { return nil }
            return Simp_ReadMark(from: from, id: markID, seq: seq, group: group, groupSeq: groupSeq)
        }
        guard fromDevice.isEmpty else { return nil }
        return Simp_ReadMark(from: from, id: markID, seq: seq, group: nil, groupSeq: 0)
    }
}

extension Simp_ReadMark {
    /// The mark of the message `id` from `from` at `seq` in the reader's inbox, and for a group
    /// message its group and place in the group's order.
    init(from: String, id: String, seq: UInt64, group: String?, groupSeq: UInt64) {
        self.init()
        fromUser = from
        messageID = id
        self.seq = seq
        if let group {
            self.group = group
            self.groupSeq = groupSeq
        }
    }
}

/// One conversation of the local history (`SIMPClient.conversations()`).
public struct ConversationSummary: Sendable, Equatable {
    /// The other user, or `#NAME` for a group.
    public var conversation: String
    public var lastMessage: LocalMessage
    /// Received messages not marked shown.
    public var unreadCount: Int
}

/// What the local history keeps of a message, decided here and only stored by `ClientStore`:
/// which conversation it belongs to, whether it is the user's own, and whether it counts as
/// unread. Pure.
struct HistoryEntry: Sendable, Equatable {
    var id: String
    var conversation: String
    var from: String
    var outgoing: Bool
    var text: String
    var imageURL: String?
    var sentAt: Int64
    var seq: UInt64
    /// Counts as unread until the application marks it shown.
    var unread: Bool
    /// A received group message's place in the group's order (`LocalMessage.groupSeq`).
    var groupSeq: UInt64 = 0
    /// For the user's own: where it stands when written.
    var stage: MessageStatus.Stage?
    /// False for a long message of which only some parts came: it takes its place in the
    /// order when its first part comes, and is shown once whole (`complete`).
    var complete = true
    var parts = 1

    /// A received message as the history keeps it; nil for what is not a conversation's
    /// message (notices, group changes). A part of a long message is its message's incomplete entry.
    static func received(_ message: IncomingMessage, user: String) -> HistoryEntry? {
        guard message.kind == .message, message.groupChange == nil, !message.sealed, !message.keysChanged, !message.unknownType else {
            return nil
        }
        let own = message.from == user
        let conversation = message.group.map(GroupName.address) ?? (own ? message.to : message.from)
        // A part holds its message's place (the first part to come), without text until it is whole.
        return HistoryEntry(id: message.part?.base ?? message.id, conversation: conversation, from: message.from, outgoing: own,
                            text: message.part == nil ? message.text : "", imageURL: message.imageLink, sentAt: message.sentMillis,
                            seq: message.seq,
                            // A copy of the user's own, sent from another device: accepted, its delivery still to come.
                            unread: !own, groupSeq: own ? 0 : message.groupSeq, stage: own ? .accepted : nil, complete: message.part == nil,
                            parts: message.parts)
    }

    /// A message this device sends, as `send` writes it (the whole of a long text).
    static func sent(_ item: Outgoing, user: String) -> HistoryEntry {
        HistoryEntry(id: item.message.messageID, conversation: item.to, from: user, outgoing: true,
                     text: item.message.content, imageURL: item.message.imageURL.isEmpty ? nil : item.message.imageURL,
                     sentAt: item.message.time, seq: 0, unread: false, stage: .sending)
    }
}
