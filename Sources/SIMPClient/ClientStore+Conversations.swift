import Foundation
import GRDB

/// What the data directory keeps for end-to-end encrypted conversations (docs/E2EE.md, Part 4):
/// each conversation's MLS group state, this device's KeyPackages, and what sealed messages
/// opened to. All of it is secret: the file is the user's alone (`ClientStore.init`).
extension ClientStore {
    /// One of this device's KeyPackages: the `MLSMessage` as uploaded, and the seeds its init
    /// and leaf encryption private keys derive from (RFC 9420 section 5.1.1, DeriveKeyPair).
    struct StoredKeyPackage: Sendable, Equatable {
        var reference: [UInt8]
        var package: [UInt8]
        var initSeed: [UInt8]
        var encryptionSeed: [UInt8]
        var lastResort: Bool
    }

    /// What a sealed message opened to, kept by its seq.
    struct Opened: Sendable, Equatable {
        var id: String
        var inner: [UInt8]
    }

    /// Every conversation this device has a group for.
    func conversationsWithGroups() throws -> [String] {
        try lookUp { db in try String.fetchAll(db, sql: "SELECT conversation FROM mls_groups ORDER BY conversation") }
    }

    func groupState(of conversation: String) throws -> [UInt8]? {
        try lookUp { db in
            try Data.fetchOne(try db.cachedStatement(sql: "SELECT state FROM mls_groups WHERE conversation = ?"), arguments: [conversation]).map { [UInt8]($0) }
        }
    }

    /// Keeps a group's state; with `opened`, what a message opened to, in the same transaction:
    /// a state that used a message's key is never kept without the message. `sealed`: messages
    /// this state sealed; `renewedAt` (ms): the state comes from a commit of this device's own,
    /// whose path gave its leaf new keys (or from joining with a fresh KeyPackage).
    func saveGroup(_ conversation: String, state: [UInt8], opened: (seq: UInt64, Opened)? = nil, sealed: Int = 0,
                   renewedAt: Int64? = nil, keys generation: Int) throws {
        try db.write { db in
            try checkKeys(generation)
            try checkOpeningsKept(conversation)
            try Self.writeGroup(conversation, state: state, opened: opened, sealed: sealed, renewedAt: renewedAt, db)
            renewals.withLock { $0[conversation] = nil }
        }
    }

    /// `saveGroup` of what a seal made, queued with the client's other writes (`enqueue`, a group
    /// commit), not awaited: a write that rests on it is queued after it with it as `after`
    /// (`add`, `written`), and fails if it failed. Queued in the order the seals were made, so
    /// the state on disk never goes back.
    func queueSealed(_ conversation: String, state: [UInt8], sealed: Int, keys generation: Int) -> QueuedWrite {
        // Counted when queued: a batch that fails (a full disk) leaves the count a few ahead of
        // the file's, which only brings the next Update forward.
        renewals.withLock { if let known = $0[conversation], let renewal = known { $0[conversation] = .some(Renewal(sealed: renewal.sealed + sealed, at: renewal.at)) } }
        let queued = QueuedWrite()
        // Refused at once when stale, so as not to fail the other writes of its batch; the check
        // inside the write covers a new key kept meanwhile.
        guard keysGeneration.value == generation else {
            queued.failure.value = StoreWriteError(path: path, StaleKeys())
            return queued
        }
        enqueue({ if case .failure(let error) = $0 { queued.failure.value = error } }) { [self] db in
            try checkKeys(generation)
            try checkOpeningsKept(conversation)
            try Self.writeGroup(conversation, state: state, opened: nil, sealed: sealed, renewedAt: nil, db)
        }
        return queued
    }

    /// A commit this device made on `epoch` and the state it leads to, kept before the commit is
    /// submitted (replacing any earlier one of the conversation).
    func keepPending(_ conversation: String, epoch: UInt64, commit: [UInt8], state: [UInt8], keys generation: Int) throws {
        try db.write { db in
            try checkKeys(generation)
            try checkOpeningsKept(conversation)
            try db.run(sql: "INSERT OR REPLACE INTO mls_pending (conversation, epoch, message, state) VALUES (?, ?, ?, ?)",
                           arguments: [conversation, Int64(epoch), Data(commit), Data(state)])
            pendingCommits.withLock { $0[conversation] = nil }
        }
    }

    typealias PendingCommit = (epoch: UInt64, commit: [UInt8], state: [UInt8])

    func pending(of conversation: String) throws -> PendingCommit? {
        if let known = pendingCommits.value[conversation] { return known }
        return try lookUp { db in
            let read = try Row.fetchOne(try db.cachedStatement(sql: "SELECT epoch, message, state FROM mls_pending WHERE conversation = ?"),
                                        arguments: [conversation])
                .map { PendingCommit(UInt64($0["epoch"] as Int64), [UInt8]($0["message"] as Data), [UInt8]($0["state"] as Data)) }
            pendingCommits.withLock { $0[conversation] = .some(read) }
            return read
        }
    }

    func dropPending(_ conversation: String, keys generation: Int) throws {
        try db.write { db in
            try checkKeys(generation)
            try db.run(sql: "DELETE FROM mls_pending WHERE conversation = ?", arguments: [conversation])
            pendingCommits.withLock { $0[conversation] = nil }
        }
    }

    /// The state a stored commit of this device's leads to, kept in place of its pending entry
    /// (one transaction).
    func saveCommitted(_ conversation: String, state: [UInt8], renewedAt: Int64, keys generation: Int) throws {
        try db.write { db in
            try checkKeys(generation)
            try checkOpeningsKept(conversation)
            try Self.writeGroup(conversation, state: state, opened: nil, sealed: 0, renewedAt: renewedAt, db)
            try db.run(sql: "DELETE FROM mls_pending WHERE conversation = ?", arguments: [conversation])
            pendingCommits.withLock { $0[conversation] = nil }
            renewals.withLock { $0[conversation] = nil }
        }
    }

    /// A group's state after it opened a message, with what the message opened to, queued with
    /// the client's other writes (a group commit); `done` says whether it is on disk.
    func queueOpened(_ conversation: String, state: [UInt8], opened: (seq: UInt64, Opened), keys generation: Int,
                     done: @escaping @Sendable (Result<Void, StoreWriteError>) -> Void) {
        guard keysGeneration.value == generation else { return done(.failure(StoreWriteError(path: path, StaleKeys()))) }
        // Not deferred: its commit overlaps the opening of the batch's next messages. The opened
        // messages' write rests on it (`receive(after:)`), in its commit when the writer has not
        // taken it yet. (Deferred to that commit, a batch's openings and its write took 1.85 syncs
        // a message at 8 x 32 encrypted instead of 2.3, and delivered 5% less: the writer waited
        // for the whole batch to be opened.) Failed, the conversation's states wait
        // (`unkeptOpenings`): known before any write queued after it runs.
        let unkept = unkeptOpenings
        enqueue({ result in
            if case .failure = result { unkept.withLock { _ = $0.insert(conversation) } }
            done(result)
        }) { [self] db in
            try checkKeys(generation)
            try checkOpeningsKept(conversation)
            try Self.writeGroup(conversation, state: state, opened: opened, sealed: 0, renewedAt: nil, db)
        }
    }

    /// The groups of `conversations` were dropped from memory after an opening of theirs was
    /// not kept: their states may be written again, once every write queued or made before
    /// this call ran (each made from the dropped state, refused).
    func forgetUnkeptOpenings(of conversations: Set<String>) {
        guard !conversations.isDisjoint(with: unkeptOpenings.value) else { return }
        // The writer's queue runs in order: a read made now runs after all of those.
        _ = try? lookUp { _ in }
        unkeptOpenings.withLock { $0.subtract(conversations) }
    }

    /// Returns once every write queued before it is on disk (or failed): batches commit in order.
    func queuedWritesDone() async {
        try? await write { _ in }
    }

    private static func writeGroup(_ conversation: String, state: [UInt8], opened: (seq: UInt64, Opened)?, sealed: Int,
                                   renewedAt: Int64?, _ db: Database) throws {
        try db.run(sql: """
            INSERT INTO mls_groups (conversation, state, sealed, updatedAt) VALUES (?, ?, ?, ?)
            ON CONFLICT(conversation) DO UPDATE SET state = excluded.state, sealed = sealed + excluded.sealed
            """, arguments: [conversation, Data(state), sealed, renewedAt ?? 0])
        if let renewedAt {
            try db.run(sql: "UPDATE mls_groups SET sealed = 0, updatedAt = ? WHERE conversation = ?",
                           arguments: [renewedAt, conversation])
        }
        if let (seq, message) = opened {
            try db.run(sql: "INSERT OR REPLACE INTO mls_opened (seq, id, inner) VALUES (?, ?, ?)",
                           arguments: [Int64(seq), message.id, Data(message.inner)])
        }
    }

    typealias Renewal = (sealed: Int, at: Int64)

    /// Messages sealed since this device's leaf was last renewed in the conversation, and when (ms).
    func renewal(of conversation: String) throws -> Renewal? {
        if let known = renewals.value[conversation] { return known }
        return try lookUp { db in
            let read = try Row.fetchOne(try db.cachedStatement(sql: "SELECT sealed, updatedAt FROM mls_groups WHERE conversation = ?"),
                                        arguments: [conversation])
                .map { Renewal(sealed: $0["sealed"], at: $0["updatedAt"]) }
            renewals.withLock { $0[conversation] = .some(read) }
            return read
        }
    }

    /// What the messages at `seqs` opened to, of those kept (`mls_opened`), by seq: one read for
    /// a batch.
    func opened(seqs: [UInt64]) throws -> [UInt64: Opened] {
        guard !seqs.isEmpty else { return [:] }
        return try lookUp { db in
            let marks = Array(repeating: "?", count: seqs.count).joined(separator: ",")
            let rows = try Row.fetchAll(db, sql: "SELECT seq, id, inner FROM mls_opened WHERE seq IN (\(marks))",
                                        arguments: StatementArguments(seqs.map { Int64($0) }))
            var kept: [UInt64: Opened] = [:]
            for row in rows { kept[UInt64(row["seq"] as Int64)] = Opened(id: row["id"], inner: [UInt8](row["inner"] as Data)) }
            return kept
        }
    }

    func keyPackages() throws -> [StoredKeyPackage] {
        try lookUp { db in
            try Row.fetchAll(db, sql: "SELECT * FROM key_packages ORDER BY lastResort").map { row in
                let keys = [UInt8](row["encryptionKey"] as Data)
                return StoredKeyPackage(reference: [UInt8](row["ref"] as Data), package: [UInt8](row["package"] as Data),
                                        initSeed: [UInt8](row["initKey"] as Data), encryptionSeed: keys, lastResort: row["lastResort"])
            }
        }
    }

    func addKeyPackages(_ packages: [StoredKeyPackage], keys generation: Int) throws {
        try db.write { db in
            try checkKeys(generation)
            for p in packages {
                try db.run(sql: """
                    INSERT OR REPLACE INTO key_packages (ref, package, initKey, encryptionKey, lastResort) VALUES (?, ?, ?, ?, ?)
                    """, arguments: [Data(p.reference), Data(p.package), Data(p.initSeed), Data(p.encryptionSeed), p.lastResort])
            }
        }
    }

    /// A one-time KeyPackage a Welcome used: its private keys go (RFC 9420 section 16.8).
    func removeKeyPackage(_ reference: [UInt8]) throws {
        try db.write { db in
            try db.run(sql: "DELETE FROM key_packages WHERE ref = ? AND lastResort = 0", arguments: [Data(reference)])
        }
    }

    /// A device this device saw certified: its credential identity ("USER/DEVICE"), key, and
    /// the identity key its certificate verified under.
    struct SeenDevice: Sendable, Hashable {
        let identity: [UInt8]
        let key: [UInt8]
        let identityKey: [UInt8]
    }

    /// The devices seen certified kept a user: a user's own devices over years, with room.
    static let seenDevicesKept = 64

    /// Records that `devices` of `user` were seen certified at `millis` (the newest
    /// `seenDevicesKept` of the user are kept).
    func recordSeen(_ devices: [SeenDevice], of user: String, at millis: Int64) throws {
        try db.write { db in
            for device in devices {
                try db.run(sql: """
                    INSERT INTO seen_devices (user, identity, key, identityKey, seenAt) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(user, identity, key) DO UPDATE SET identityKey = excluded.identityKey, seenAt = excluded.seenAt
                    """, arguments: [user, Data(device.identity), Data(device.key), Data(device.identityKey), millis])
            }
            try db.run(sql: """
                DELETE FROM seen_devices WHERE user = ? AND rowid NOT IN
                    (SELECT rowid FROM seen_devices WHERE user = ? ORDER BY seenAt DESC, rowid DESC LIMIT ?)
                """, arguments: [user, user, Self.seenDevicesKept])
        }
    }

    /// The devices of `user` this device saw certified (`recordSeen`).
    func seenDevices(of user: String) throws -> [SeenDevice] {
        try lookUp { db in
            try Row.fetchAll(try db.cachedStatement(sql: "SELECT identity, key, identityKey FROM seen_devices WHERE user = ?"),
                             arguments: [user]).map {
                SeenDevice(identity: [UInt8]($0["identity"] as Data), key: [UInt8]($0["key"] as Data),
                           identityKey: [UInt8]($0["identityKey"] as Data))
            }
        }
    }
}
