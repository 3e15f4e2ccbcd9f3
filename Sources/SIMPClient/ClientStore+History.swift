import Foundation
import GRDB
import SIMPCore

/// The local history in the data directory (the `history` table): what the application reads
/// offline. What goes in, and each sent message's status, is decided elsewhere
/// (`HistoryEntry`, `StatusBook`); this only stores and reads.
extension ClientStore {
    static func insert(_ entry: HistoryEntry, recipient: String?, _ db: Database) throws {
        // Once: a message received again changes nothing; only a long message's whole fills its
        // place, which its first part took.
        try db.run(sql: """
            INSERT INTO history (id, conversation, sender, outgoing, text, imageURL, sentAt, seq, unread, stage, recipient, complete, parts,
                groupSeq)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (sender, id) DO UPDATE SET text = excluded.text, seq = excluded.seq, parts = excluded.parts, complete = 1,
                groupSeq = excluded.groupSeq
            WHERE excluded.complete = 1 AND history.complete = 0
            """, arguments: [entry.id, entry.conversation, entry.from, entry.outgoing, entry.text, entry.imageURL, entry.sentAt,
                             Int64(entry.seq), entry.unread, entry.stage?.name, recipient ?? (entry.outgoing ? entry.conversation : nil),
                             entry.complete, entry.parts, Int64(entry.groupSeq)])
    }

    /// Records where a message the user sent stands (the user's own, from any of its devices).
    func setStatus(_ status: MessageStatus, done: @escaping @Sendable (Result<Void, StoreWriteError>) -> Void) {
        let user = user
        enqueue(done) { db in try Self.update(status, user: user, db) }
    }

    static func update(_ status: MessageStatus, user: String, _ db: Database) throws {
        try db.run(sql: """
            UPDATE history SET stage = ?, seq = CASE WHEN ? > 0 THEN ? ELSE seq END, failureCode = ?, failureReason = ?,
                recipients = ?, members = ?
            WHERE sender = ? AND id = ?
            """, arguments: [status.stage.name, Int64(status.seq), Int64(status.seq), status.failure?.code.rawValue,
                             status.failure?.reason, status.recipients, status.storedMembers, user, status.id])
    }

    func record(_ change: ClientEngine.HistoryChange, done: @escaping @Sendable (Result<Void, StoreWriteError>) -> Void) {
        enqueue(done) { db in
            switch change {
            case .add(let entry): try Self.insert(entry, recipient: nil, db)
            case .readElsewhere(let id, let from):
                try db.run(sql: "UPDATE history SET unread = 0 WHERE sender = ? AND id = ? AND unread = 1", arguments: [from, id])
            }
        }
    }

    /// A conversation's messages before `position` (all when nil), the latest `limit`, oldest first.
    func messages(in conversation: String, before position: Int64?, limit: Int) async throws -> [LocalMessage] {
        try await db.read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT * FROM history WHERE conversation = ? AND complete = 1 AND position < ? ORDER BY position DESC LIMIT ?
                """, arguments: [conversation, position ?? Int64.max, max(limit, 0)])
            return rows.reversed().map(Self.message)
        }
    }

    /// Every conversation with its last message and unread count, the latest first.
    func conversations() async throws -> [ConversationSummary] {
        try await db.read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT h.*, c.unreadCount FROM history h
                JOIN (SELECT conversation, MAX(position) AS last, SUM(unread) AS unreadCount FROM history WHERE complete = 1 GROUP BY conversation) c
                ON h.position = c.last ORDER BY h.position DESC
                """)
            return rows.map { row in
                ConversationSummary(conversation: row["conversation"], lastMessage: Self.message(row), unreadCount: row["unreadCount"])
            }
        }
    }

    /// Marks a conversation's received messages up to `position` (all when nil) shown; returns them.
    func markShown(in conversation: String, upTo position: Int64?) async throws(StoreWriteError) -> [LocalMessage] {
        do {
            return try await db.write { db in
                let rows = try Row.fetchAll(db, sql: "SELECT * FROM history WHERE conversation = ? AND unread = 1 AND complete = 1 AND position <= ?",
                                            arguments: [conversation, position ?? Int64.max])
                try db.run(sql: "UPDATE history SET unread = 0 WHERE conversation = ? AND unread = 1 AND complete = 1 AND position <= ?",
                               arguments: [conversation, position ?? Int64.max])
                return rows.map(Self.message)
            }
        } catch {
            throw StoreWriteError(path: path, error)
        }
    }

    static func message(_ row: Row) -> LocalMessage {
        let outgoing: Bool = row["outgoing"]
        var status: MessageStatus?
        if outgoing {
            let recipient: String = row["recipient"] ?? row["conversation"]
            var known = MessageStatus(id: row["id"], to: recipient, stage: MessageStatus.Stage(name: row["stage"] ?? "") ?? .sending)
            known.seq = UInt64(row["seq"] as Int64)
            if let code: String = row["failureCode"] {
                known.failure = .init(code: ErrorCode(rawValue: code) ?? .unspecified, reason: row["failureReason"] ?? "")
            }
            known.recipients = row["recipients"]
            known.restoreMembers(row["members"])
            status = known
        }
        return LocalMessage(id: row["id"], conversation: row["conversation"], from: row["sender"], isOutgoing: outgoing,
                            text: row["text"], imageLink: row["imageURL"], sentMillis: row["sentAt"], seq: UInt64(row["seq"] as Int64), position: row["position"],
                            status: status, unread: row["unread"], parts: row["parts"], groupSeq: UInt64(row["groupSeq"] as Int64))
    }
}
