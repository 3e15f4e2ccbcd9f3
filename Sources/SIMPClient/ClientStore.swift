import Foundation
import GRDB
import SIMPCore

/// The client's durable state in a local SQLite file: its outbox (sent, not yet delivered or
/// failed), the highest sequence it handed to the application, and the messages it received.
/// A client killed and restarted with the same file resends what the server never accepted,
/// learns the fate of what it did accept, and shows no message twice.
///
/// Writes that follow protocol events are queued in order on GRDB's writer and never block
/// the client's event loop. Every write says whether it happened: the client confirms and
/// reports only what is on disk (a full disk must not cost a message the server was told
/// was kept).
final class ClientStore: Sendable {
    /// The file's one connection. Reached through `db` by everything but the batches, so that
    /// writes deferred until then (`enqueue(deferred:)`) are scheduled before what reads it.
    private let queue: DatabaseQueue
    let path: String

    /// The file, for a read or a write of its caller's own: the deferred writes waiting are
    /// scheduled first (GRDB's queue runs in order), so the caller sees them.
    var db: DatabaseQueue {
        scheduleDeferred()
        return queue
    }

    struct Saved: Sendable {
        /// The device this installation is (`deviceName`).
        var device: String
        var savedUpTo: UInt64
        var pending: [(id: String, to: String, message: Simp_Message)]
        var accepted: [(id: String, to: String, seq: UInt64)]
        /// The latest of the user's messages whose fate is still open, as the history recorded them.
        var statuses: [MessageStatus] = []
        /// The seqs of received messages the history counts unread (`confirmWhenShown` holds them).
        var unshown: [UInt64] = []
    }

    /// The user whose file this is: the sender of its own messages in the history.
    let user: String
    /// Writes queued for the next batch (`enqueue`), and whether that batch is scheduled (writes
    /// deferred alone wait unscheduled).
    private let waiting = Locked<Waiting>(Waiting())

    struct Waiting: Sendable {
        var writes: [Write] = []
        var scheduled = false
        /// A deferred write waits, and `scheduleDeferred` is due within `deferredBound`.
        var boundArmed = false
    }

    /// The longest a deferred write waits for a batch to take it (then it schedules one): a
    /// client that goes idle has its last marks on disk this soon, not at its next write.
    static let deferredBound: DispatchTimeInterval = .milliseconds(100)
    /// What an encrypting device reads before each seal, kept beside the file once read (this
    /// process is the file's one writer while it runs): a read is a hop to the writer's queue
    /// that waits for the batch being committed, and blocks the thread the seal runs on.
    /// Whether each peer is held (`isHeld`), each conversation's pending commit (`pending`),
    /// and each group's renewal count (`renewal`).
    let heldPeers = Locked<[String: Bool]>([:])
    let pendingCommits = Locked<[String: PendingCommit?]>([:])
    let renewals = Locked<[String: Renewal?]>([:])
    /// Conversations a message's opening was not kept for (its state's write failed): a state
    /// made since, in memory, went on from that opening and used the message's key, so none is
    /// written until the conversation's group was dropped from memory (`forgetUnkeptOpenings`).
    let unkeptOpenings = Locked<Set<String>>([])
    /// Which device key the conversations' keys on disk are made under: bumped when a new one is
    /// kept (`save`), inside that write. A group state, pending commit or KeyPackage made under
    /// an earlier key is refused by its write (`StaleKeys`): a `ConversationKeys` made before the
    /// change, still opening or sealing, cannot put the old key's state back after the drop.
    let keysGeneration = Locked<Int>(0)

    init(directory: String, user: String) throws {
        // The user's alone: the file holds private keys and login state.
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        path = (directory as NSString).appendingPathComponent("\(user).sqlite")
        self.user = user
        // A closed client's last writes may still be finishing when the next one opens the file.
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // Write-ahead logging: a transaction is durable after one fsync of the log, where the
        // rollback journal took three.
        configuration.journalMode = .wal
        queue = try DatabaseQueue(path: path, configuration: configuration)
        // `synchronous = FULL`: the log is synced at every commit, so a write the client
        // reported is on disk, power loss or not. Set once the queue is open: GRDB's WAL
        // set-up, which runs after `prepareDatabase`, sets NORMAL (synced at checkpoints only,
        // so a power loss can take back the last commits), and that stood until 2026-11-30.
        try queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        try Self.migrator(user: user).migrate(queue)
    }

    /// The schema's versions, in order. The first is the schema before migrations existed
    /// (`IF NOT EXISTS`: a data directory made then opens and is brought up to date).
    static func migrator(user: String) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-outbox-received") { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS outbox (
                    id TEXT PRIMARY KEY, recipient TEXT NOT NULL, payload BLOB NOT NULL,
                    position INTEGER NOT NULL, seq INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE IF NOT EXISTS received (
                    seq INTEGER PRIMARY KEY, id TEXT NOT NULL, sender TEXT NOT NULL, text TEXT NOT NULL,
                    imageURL TEXT, sentAt INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
                """)
            // One installation is one device: its name is made once, at random, and kept.
            try db.execute(sql: "INSERT OR IGNORE INTO meta (key, value) VALUES ('device', ?)",
                           arguments: [Int64(UInt32.random(in: 1...UInt32.max))])
        }
        migrator.registerMigration("v2-history") { db in
            try db.execute(sql: """
                CREATE TABLE history (
                    position INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, conversation TEXT NOT NULL,
                    sender TEXT NOT NULL, outgoing INTEGER NOT NULL, text TEXT NOT NULL, imageURL TEXT,
                    sentAt INTEGER NOT NULL, seq INTEGER NOT NULL DEFAULT 0, unread INTEGER NOT NULL DEFAULT 0,
                    stage TEXT, recipient TEXT, failureCode TEXT, failureReason TEXT,
                    recipients INTEGER NOT NULL DEFAULT 0, members TEXT NOT NULL DEFAULT '', complete INTEGER NOT NULL DEFAULT 1, parts INTEGER NOT NULL DEFAULT 1,
                    UNIQUE (sender, id));
                CREATE INDEX history_by_conversation ON history (conversation, position);
                CREATE INDEX history_unread ON history (conversation) WHERE unread = 1 AND complete = 1;
                """)
            // What version 1 kept: received messages (shown already; their group or the
            // recipient of a copy was not kept, so each goes under its sender) and the outbox.
            try db.execute(sql: """
                INSERT OR IGNORE INTO history (id, conversation, sender, outgoing, text, imageURL, sentAt, seq)
                SELECT id, sender, sender, sender = ?, text, imageURL, sentAt, seq FROM received ORDER BY seq
                """, arguments: [user])
            for row in try Row.fetchAll(db, sql: "SELECT payload, seq FROM outbox ORDER BY position") {
                guard let message = try? Simp_Message(serializedBytes: [UInt8](row["payload"] as Data)),
                      message.type != .textPart else { continue }
                let seq: Int64 = row["seq"]
                try db.execute(sql: """
                    INSERT OR IGNORE INTO history (id, conversation, sender, outgoing, text, imageURL, sentAt, seq, stage, recipient)
                    VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?)
                    """, arguments: [message.messageID, message.toUser, user, message.content,
                                     message.imageURL.isEmpty ? nil : message.imageURL, message.time, seq,
                                     (seq > 0 ? MessageStatus.Stage.accepted : .sending).name, message.toUser])
            }
        }
        // A received group message's place in the group's order: what its read mark names.
        migrator.registerMigration("v3-group-seq") { db in
            try db.execute(sql: "ALTER TABLE history ADD COLUMN groupSeq INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v4-identity") { db in
            // The user's identity key (Ed25519) and this device's key, private: the file is the
            // user's alone (`ClientStore.init`). `peers`: each peer's identity key as first
            // seen, and whether the user verified it (docs/E2EE.md, "Verification").
            try db.execute(sql: """
                CREATE TABLE identity (
                    user TEXT PRIMARY KEY, identityKey BLOB NOT NULL, deviceKey BLOB NOT NULL,
                    published INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE peers (
                    user TEXT PRIMARY KEY, identityKey BLOB NOT NULL, verified INTEGER NOT NULL DEFAULT 0,
                    seenAt INTEGER NOT NULL);
                """)
        }
        migrator.registerMigration("v5-conversations") { db in
            // Each conversation's MLS group state (secret: its epoch secrets and private keys),
            // this device's KeyPackages with their private keys, and what a sealed message
            // opened to, kept with the group state that opened it: a message pushed again after a
            // crash opens from here, as its ratchet key is gone (docs/E2EE.md, Part 4).
            // `sealed`, `updatedAt`: messages this device sealed since its leaf's keys were last
            // new (a commit of its own), and when that was: what makes an Update due.
            // `peers.held`: a verified peer's identity changed; sending waits for the user.
            try db.execute(sql: """
                CREATE TABLE mls_groups (
                    conversation TEXT PRIMARY KEY, state BLOB NOT NULL,
                    sealed INTEGER NOT NULL DEFAULT 0, updatedAt INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE key_packages (
                    ref BLOB PRIMARY KEY, package BLOB NOT NULL, initKey BLOB NOT NULL, encryptionKey BLOB NOT NULL,
                    lastResort INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE mls_opened (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, inner BLOB NOT NULL);
                ALTER TABLE peers ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
                """)
        }
        migrator.registerMigration("v6-link-offers") { db in
            // The offers this device made to link a new device (docs/E2EE.md, "Linking a
            // device"): the request as it was offered to and the offer as sent. Kept here, not
            // read back from the server, which could otherwise choose the offer's nonce after
            // the fact; kept across runs, so `/device links` and `/device approve` may be two.
            try db.execute(sql: """
                CREATE TABLE link_offers (device TEXT PRIMARY KEY, request BLOB NOT NULL, offer BLOB NOT NULL);
                """)
        }
        migrator.registerMigration("v7-pending-commits") { db in
            // A commit this device made, kept with the state it leads to before it goes to the
            // server: a device killed after the server stored it, before the state was kept,
            // takes that state when the order shows its commit (it cannot process its own
            // commit: the path secrets are encrypted to the others). docs/E2EE.md, Part 3.
            try db.execute(sql: """
                CREATE TABLE mls_pending (
                    conversation TEXT PRIMARY KEY, epoch INTEGER NOT NULL, message BLOB NOT NULL, state BLOB NOT NULL);
                """)
        }
        migrator.registerMigration("v8-seen-devices") { db in
            // Each device (credential identity "USER/DEVICE" and key) this device saw certified
            // under the identity key it held or pinned for USER (`identityKey`), and when last
            // (ms; the newest `seenDevicesKept` a user): a past commit of one passes while
            // catching up, after a new identity of its user ended the directory's list
            // (docs/E2EE.md, Part 2). Verifying USER drops those under other identity keys.
            try db.execute(sql: """
                CREATE TABLE seen_devices (
                    user TEXT NOT NULL, identity BLOB NOT NULL, key BLOB NOT NULL, identityKey BLOB NOT NULL,
                    seenAt INTEGER NOT NULL, PRIMARY KEY (user, identity, key));
                """)
        }
        migrator.registerMigration("v9-identity-replaced") { db in
            // `identity.replaced`: the public key of the identity this device's own replaced (a
            // new identity made here over one it held): a device beside it still holding that one
            // may take the new one (`SiblingIdentity.mayTake`), never on the server's word alone.
            try db.execute(sql: "ALTER TABLE identity ADD COLUMN replaced BLOB")
        }
        return migrator
    }

    /// `d-` and 8 hex digits: a valid `DeviceName`.
    static func deviceName(_ number: Int64) -> String {
        let hex = String(UInt32(truncatingIfNeeded: number), radix: 16)
        return "d-" + String(repeating: "0", count: 8 - hex.count) + hex
    }

    func load() throws -> Saved {
        try db.read { db in
            let last = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'lastDelivered'") ?? 0
            let device = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'device'") ?? 0
            var saved = Saved(device: Self.deviceName(device), savedUpTo: UInt64(last), pending: [], accepted: [])
            saved.unshown = try Int64.fetchAll(db, sql: "SELECT seq FROM history WHERE outgoing = 0 AND unread = 1 AND complete = 1 AND seq > 0")
                .map { UInt64($0) }
            // Latest first, so each pending message knows whether a later one to its recipient
            // was accepted (then it may no longer be stored: `overtaken`).
            var acceptedTo: Set<String> = []
            for row in try Row.fetchAll(db, sql: "SELECT id, recipient, payload, seq FROM outbox ORDER BY position DESC") {
                let seq: Int64 = row["seq"]
                let recipient: String = row["recipient"]
                if seq > 0 {
                    saved.accepted.append((row["id"], recipient, UInt64(seq)))
                    acceptedTo.insert(recipient)
                } else if var message = try? Simp_Message(serializedBytes: [UInt8](row["payload"] as Data)) {
                    if acceptedTo.contains(recipient) { message.overtaken = true }
                    saved.pending.append((row["id"], recipient, message))
                }
            }
            saved.accepted.reverse()
            saved.pending.reverse()
            let open = try Row.fetchAll(db, sql: """
                SELECT * FROM history WHERE outgoing = 1 AND sender = ? AND stage IN ('sending', 'accepted', 'delivered')
                ORDER BY position DESC LIMIT 4096
                """, arguments: [user])
            saved.statuses = open.reversed().compactMap { Self.message($0).status }
            return saved
        }
    }

    /// Before `send` returns: the message exists on disk before anyone learns its id.
    func add(id: String, to: String, message: Simp_Message) async throws(StoreWriteError) {
        try await add([(id, to, message)])
    }

    /// Several messages together (the parts of a long message): all or none; with `shown`, the
    /// message as the history keeps it, with them.
    func add(_ items: [(id: String, to: String, message: Simp_Message)], shown: HistoryEntry? = nil,
             after queued: QueuedWrite? = nil) async throws(StoreWriteError) {
        let rows: [(String, String, Data)]
        do {
            rows = try items.map { item in (item.id, item.to, Data(try item.message.serializedBytes() as [UInt8])) }
        } catch {
            throw StoreWriteError(path: path, error)
        }
        // Sealed with keys whose state that write keeps: not kept without it.
        try await write(after: queued) { db in
            var position = (try Int64.fetchOne(try db.cachedStatement(sql: "SELECT COALESCE(MAX(position), 0) + 1 FROM outbox"))) ?? 1
            for (id, to, payload) in rows {
                try db.run(sql: "INSERT OR REPLACE INTO outbox (id, recipient, payload, position) VALUES (?, ?, ?, ?)",
                               arguments: [id, to, payload, position])
                position += 1
            }
            if let shown { try Self.insert(shown, recipient: shown.conversation, db) }
        }
    }

    /// A read of one statement, on the writer's queue after every write queued before it. Not
    /// `db.read`: on a DatabaseQueue that sets `PRAGMA query_only` around each read, and SQLite
    /// expires every prepared statement of the connection when a flag pragma changes, so each
    /// cached statement (`Database.run`) was parsed again after every read.
    func lookUp<T>(_ body: (Database) throws -> T) throws -> T {
        try db.unsafeRead(body)
    }

    /// A write queued and not awaited, that a later write may rest on (`queueSealed`): whether
    /// it failed, known before any write queued after it runs. A failure in the same batch
    /// fails the writes after it anyway (`commit`); one in an earlier batch fails the write
    /// resting on it alone (`Write.after`).
    final class QueuedWrite: Sendable {
        let failure = Locked<StoreWriteError?>(nil)
    }

    /// Returns once `queued` is on disk; throws if it failed.
    func written(_ queued: QueuedWrite) async throws(StoreWriteError) {
        try await write(after: queued) { _ in }
    }

    /// `enqueue` for a caller that waits: returns once `work` is on disk.
    func write(after queued: QueuedWrite? = nil, _ work: @escaping @Sendable (Database) throws -> Void) async throws(StoreWriteError) {
        let written = await withCheckedContinuation { (written: CheckedContinuation<Result<Void, StoreWriteError>, Never>) in
            enqueue({ written.resume(returning: $0) }, after: queued, work)
        }
        try written.get()
    }

    /// With `status`, the history records it in the same transaction.
    func markAccepted(id: String, seq: UInt64, status: MessageStatus? = nil, done: @escaping @Sendable (Result<Void, StoreWriteError>) -> Void) {
        let user = user
        enqueue(done, deferred: true) { db in
            try db.run(sql: "UPDATE outbox SET seq = ? WHERE id = ?", arguments: [Int64(seq), id])
            if let status { try Self.update(status, user: user, db) }
        }
    }

    func remove(id: String, status: MessageStatus? = nil, done: @escaping @Sendable (Result<Void, StoreWriteError>) -> Void) {
        let user = user
        enqueue(done, deferred: true) { db in
            try db.run(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id])
            if let status { try Self.update(status, user: user, db) }
        }
    }

    /// Records received messages and the new saved mark in one transaction, then calls `done` (on
    /// GRDB's queue) with whether they are on disk: only then may they be shown and confirmed.
    /// `after`: the group states their openings queued, which it fails without.
    func receive(_ messages: [IncomingMessage], savedUpTo: UInt64, after queued: QueuedWrite? = nil,
                 done: @escaping @Sendable (Result<Void, StoreWriteError>) -> Void) {
        let user = user
        let entries = messages.compactMap { HistoryEntry.received($0, user: user) }
        enqueue(done, after: queued) { db in
            for m in messages {
                try db.run(sql: "INSERT OR IGNORE INTO received (seq, id, sender, text, imageURL, sentAt) VALUES (?, ?, ?, ?, ?, ?)",
                               arguments: [Int64(m.seq), m.id, m.from, m.text, m.imageLink, m.sentMillis])
            }
            for entry in entries { try Self.insert(entry, recipient: nil, db) }
            try db.run(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('lastDelivered', ?)", arguments: [Int64(savedUpTo)])
            // What sealed messages up to the mark opened to is now in the history: none of them
            // is taken again (ConversationKeys keeps it only until then).
            try db.run(sql: "DELETE FROM mls_opened WHERE seq <= ?", arguments: [Int64(savedUpTo)])
        }
    }

    /// A write waiting for the writer, and whom to tell whether it is on disk.
    struct Write: Sendable {
        var work: @Sendable (Database) throws -> Void
        var done: @Sendable (Result<Void, StoreWriteError>) -> Void
        /// The queued write it rests on: failed, this one fails too, without running.
        var after: QueuedWrite?
    }

    /// Queues `work` after every write queued before it; `done` is called (on GRDB's queue)
    /// once it is on disk, or with why not. The writes that queue while the writer is busy go
    /// in one transaction, made durable by one fsync: a group commit. A client with many
    /// messages in flight pays one sync per batch instead of one per message.
    ///
    /// `deferred`: nothing waits for this write (an outbox mark after a receipt, whose loss a
    /// restart repairs: `ClientEngine.OutboxWrite.consequence`), so it schedules no batch of
    /// its own: it goes with the next write that does, or before the next read or write of the
    /// file through `db`, or at the latest `deferredBound` later, or at the client's close,
    /// which waits for it. Each message's `accepted` and `delivered` marks were a sync each
    /// (2.7 commits a message at 8 x 32, with the log synced at every commit:
    /// docs/PERFORMANCE.md). A process killed in that window repeats as a failed write does
    /// (docs/GUARANTEES.md): the message is sent again, which the server knows by its id.
    func enqueue(_ done: @escaping @Sendable (Result<Void, StoreWriteError>) -> Void, after queued: QueuedWrite? = nil,
                 deferred: Bool = false, _ work: @escaping @Sendable (Database) throws -> Void) {
        let arm = waiting.withLock { pending in
            pending.writes.append(Write(work: work, done: done, after: queued))
            if !deferred {
                schedule(&pending)
                return false
            }
            guard !pending.scheduled, !pending.boundArmed else { return false }
            pending.boundArmed = true
            return true
        }
        // A bound, not a decision: the write is deferred at most this long (GRDB's busy timeout
        // is the same kind of bound).
        if arm { DispatchQueue.global().asyncAfter(deadline: .now() + Self.deferredBound) { [self] in scheduleDeferred() } }
    }

    /// Schedules the writes deferred and waiting, if no batch is scheduled to take them.
    func scheduleDeferred() {
        waiting.withLock { pending in
            pending.boundArmed = false
            if !pending.writes.isEmpty { schedule(&pending) }
        }
    }

    /// Schedules a batch unless one is (it has not yet taken what waits). Called under the lock:
    /// a direct write (`db.write`) made after this returns runs after this batch, as it was
    /// queued after it. The batch is taken when it runs, before the transaction begins: a BEGIN
    /// that fails (the file busy past its timeout) fails this batch, and the next write
    /// schedules the next one.
    private func schedule(_ pending: inout Waiting) {
        guard !pending.scheduled else { return }
        pending.scheduled = true
        let (path, waiting) = (path, waiting)
        queue.asyncWriteWithoutTransaction { db in
            let batch = waiting.withLock { pending in
                // The bound's timer, if armed, stays armed: at most one waits at a time.
                defer { pending = Waiting(boundArmed: pending.boundArmed) }
                return pending.writes
            }
            for (write, result) in zip(batch, Self.commit(batch, in: db, path: path)) { write.done(result) }
        }
    }

    /// Runs `batch` in one transaction and says, write by write, whether it is on disk. A write
    /// that throws fails, and so do the writes after it (a later write may rest on it: a group's
    /// state that used the keys of a message an earlier write kept); the transaction is rolled
    /// back and the writes before it run again in one of their own, so none lands half done or
    /// without those before it. Failures are rare (a full disk), so the common path has no
    /// savepoint per write: each cost two statements SQLite parsed afresh.
    private static func commit(_ all: [Write], in db: Database, path: String) -> [Result<Void, StoreWriteError>] {
        // A write resting on one that failed in an earlier batch fails alone: it writes nothing,
        // and the batch goes on without it.
        let restingOnFailed = all.map { $0.after?.failure.value }
        let batch = all.indices.filter { restingOnFailed[$0] == nil }.map { all[$0] }
        var results = commitRunnable(batch, in: db, path: path)[...]
        return restingOnFailed.map { failure in failure.map { .failure($0) } ?? results.popFirst()! }
    }

    private static func commitRunnable(_ batch: [Write], in db: Database, path: String) -> [Result<Void, StoreWriteError>] {
        var kept = batch.count
        var failed: (index: Int, error: StoreWriteError)?
        while true {
            do {
                try db.inTransaction {
                    for (index, write) in batch.prefix(kept).enumerated() {
                        do {
                            try write.work(db)
                        } catch {
                            failed = (index, StoreWriteError(path: path, error))
                            throw error
                        }
                    }
                    return .commit
                }
                break
            } catch {
                if let failed, failed.index < kept {
                    kept = failed.index
                    continue
                }
                // BEGIN or COMMIT failed: none of the batch is on disk.
                return batch.map { _ in .failure(StoreWriteError(path: path, error)) }
            }
        }
        return batch.indices.map { index in
            guard let failed, index >= kept else { return .success(()) }
            if index == failed.index { return .failure(failed.error) }
            return .failure(StoreWriteError(path: path, reason: "an earlier write of its batch failed (\(failed.error.reason))"))
        }
    }
}

extension Database {
    /// Runs one statement from this connection's statement cache: SQLite parses, and GRDB
    /// authorizes, each SQL text once rather than at every write (parsing and authorizing were
    /// 11-16% of a data directory's cost per message, `simp-bench --api async --data-dir`).
    func run(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}

/// A write to the data directory that did not happen (a full disk, say): none of it is on disk.
struct StoreWriteError: Error, Sendable, CustomStringConvertible {
    var path: String
    /// SQLite's own words ("database or disk is full"), without the statement.
    var reason: String

    init(path: String, _ error: any Error) {
        // A write that rested on a failed one fails with its words.
        if let failed = error as? StoreWriteError {
            self = failed
            return
        }
        self.path = path
        reason = (error as? DatabaseError)?.message ?? "\(error)"
    }

    init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    var description: String { "cannot write \(path): \(reason)" }
}
