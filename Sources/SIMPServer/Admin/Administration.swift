import Foundation
import SIMPCore
import SIMPRedis

/// A session with a datagram address, as its node records it in Redis (presence).
public struct OnlineSession: Codable, Sendable, Equatable {
    public var user: String
    public var device: String
    public var node: String
    public var address: String
    public var session: UInt64
    /// Whether the node still renews its record (`NodeRecord`); a killed node's sessions stay
    /// listed until their presence expires.
    public var nodeAlive: Bool
    /// Seconds until the record expires unless the node renews it (it does while the client
    /// sends keepalives).
    public var expiresInSeconds: Int64
}

/// A recipient's inbox: what it holds that the recipient has not confirmed.
public struct InboxDepth: Codable, Sendable, Equatable {
    public var user: String
    public var unconfirmed: Int
    /// The last seq given to a message for this user, and the highest it confirmed.
    public var lastSeq: UInt64
    public var confirmedSeq: UInt64
    /// The oldest unconfirmed message: its seq, sender and the sender's clock (ms since 1970).
    public var oldestSeq: UInt64?
    public var oldestFrom: String?
    public var oldestSentAtMillis: Int64?
}

/// A user's entry in the key directory as `simp-admin keypackages` shows it (docs/E2EE.md,
/// Part 2): whether an identity is published, and per device its certificate and how many
/// KeyPackages its pool holds. Counts only: no key or package leaves Redis.
public struct KeyPackageReport: Codable, Sendable, Equatable {
    public struct Device: Codable, Sendable, Equatable {
        public var device: String
        /// The device has a certificate by the current identity.
        public var certified: Bool
        public var oneTime: Int
        public var lastResort: Bool
    }

    public var user: String
    public var identity: Bool
    /// When the identity was published (ms since 1970, the server's clock); 0 without one.
    public var identitySinceMillis: Int64
    public var devices: [Device]
}

public enum DisconnectOutcome: Sendable, Equatable {
    /// The sessions closed (their presence entries are gone or name other sessions now).
    case closed([OnlineSession])
    /// No session of the user had a datagram address; the nodes were asked anyway (a session
    /// still logging in would be closed too).
    case notOnline(nodesAsked: Int)
}

public struct AdminError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case unknownUser, noNodeListening, notClosed, badPassword }
    public var kind: Kind
    public var description: String
}

/// What `simp-admin` does, on Redis: the state every node shares, and the admin channel every
/// node listens on (`AdminRequest`) for what only a node can do, closing a session.
public struct Administration: Sendable {
    let redis: any RedisClient
    let keys: Keys

    public init(redis: any RedisClient, namespace: String = "simp") {
        self.redis = redis
        self.keys = Keys(prefix: namespace)
    }

    public func sessions() async throws(RedisError) -> [OnlineSession] {
        let users = try await redis.scan(matching: keys.presence("*")).compactMap(keys.owner(of:))
        return try await sessions(of: users).sorted { ($0.user, $0.device, $0.session) < ($1.user, $1.device, $1.session) }
    }

    /// The user's sessions, one per connected device.
    public func sessions(of user: String) async throws(RedisError) -> [OnlineSession] {
        try await sessions(of: [user]).sorted { $0.device < $1.device }
    }

    /// Asks every node to close the user's sessions (only `session`, when given), and waits up
    /// to `wait` for them to close.
    public func disconnect(user: String, session: UInt64? = nil, wait: Duration = .seconds(5)) async throws -> DisconnectOutcome {
        try await requireUser(user)
        let online = try await sessions(of: user).filter { session == nil || $0.session == session }
        let nodes = try await redis.run(RedisCommand("SPUBLISH", [keys.adminChannel, AdminRequest.disconnect(user: user, session: session).text]))
        guard let nodes = nodes.int, nodes > 0 else {
            throw AdminError(kind: .noNodeListening, description: "no simp-server is listening on Redis channel \(keys.adminChannel) (is one running against this Redis and namespace?)")
        }
        guard !online.isEmpty else { return .notOnline(nodesAsked: Int(nodes)) }
        let closing = Set(online.map(\.session))
        let deadline = ContinuousClock.now + wait
        while ContinuousClock.now < deadline {
            if try await sessions(of: user).allSatisfy({ !closing.contains($0.session) }) { return .closed(online) }
            try await Task.sleep(for: .milliseconds(20))
        }
        let left = try await sessions(of: user).filter { closing.contains($0.session) }
        let named = left.map { "session \($0.session) (device \($0.device)) on node \($0.node)" }.joined(separator: ", ")
        throw AdminError(kind: .notClosed, description: "\(named) of \(user) did not close within \(wait)")
    }

    /// Sets a new password, makes every token issued before now invalid, lifts the name's login
    /// waits, and closes the user's session: the next login needs the new password.
    public func resetPassword(user: String, to password: String) async throws {
        guard !password.isEmpty, password.utf8.count <= 1024 else {
            throw AdminError(kind: .badPassword, description: "password must be 1-1024 bytes")
        }
        try await requireUser(user)
        let hasher = PasswordHasher()
        let salt = PasswordHasher.newSalt()
        let hash = try hasher.hash(password, salt: salt)
        // Tokens carry their issue time in ms; one issued in this very ms must not survive.
        let validFrom = Int64(Date().timeIntervalSince1970 * 1000) + 1
        _ = try await redis.run([
            RedisCommand("HSET", [keys.user(user), "salt", salt, "hash", hash, "kdf", hasher.kdfName, "tokensFrom", validFrom]),
            RedisCommand("DEL", [keys.loginFailures(user), keys.loginLock(user)]),
        ]).map { try $0.checked() }
        if try await !sessions(of: user).isEmpty { _ = try await disconnect(user: user) }
    }

    /// The user's devices: name, online, last seen, confirmed mark. `presenceTTLSeconds`: the
    /// servers' (`--presence-ttl`), past which a presence entry no node rewrote is a dead node's.
    public func devices(of user: String, presenceTTLSeconds: Int = 90) async throws -> [Simp_Device] {
        try await requireUser(user)
        let replies = try await redis.run(MessageStore.deviceReads(of: user, keys: keys))
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        return try MessageStore.devices(from: replies, liveSince: now - Int64(presenceTTLSeconds) * 1000)
    }

    /// What the key directory holds for `user`: every certified device and every device with a
    /// last-resort package, each with its pool's one-time count (a range count per device, in
    /// the user's slot).
    public func keyPackages(of user: String) async throws -> KeyPackageReport {
        try await requireUser(user)
        let replies = try await redis.run([
            RedisCommand("HGET", [keys.identity(user), "since"]),
            RedisCommand("HKEYS", [keys.deviceCertificates(user)]),
            RedisCommand("HKEYS", [keys.lastResortKeyPackages(user)]),
        ]).map { try $0.checked() }
        let certified = Set((replies[1].array ?? []).compactMap(\.string))
        let lastResort = Set((replies[2].array ?? []).compactMap(\.string))
        let devices = certified.union(lastResort).sorted()
        // A device's one-time packages are the members "DEVICE\0PACKAGE": one lexicographic range.
        let counts = devices.isEmpty ? [] : try await redis.run(devices.map { device in
            RedisCommand("ZLEXCOUNT", [keys.keyPackages(user), "[" + device + "\0", "(" + device + "\u{1}"])
        }).map { try $0.checked().int ?? 0 }
        let since = replies[0].string.flatMap { Int64($0) }
        return KeyPackageReport(user: user, identity: since != nil, identitySinceMillis: since ?? 0,
                                devices: zip(devices, counts).map { device, count in
                                    .init(device: device, certified: certified.contains(device), oneTime: Int(count),
                                          lastResort: lastResort.contains(device))
                                })
    }

    public func inbox(of user: String) async throws -> InboxDepth {
        try await requireUser(user)
        let replies = try await redis.run([
            RedisCommand("ZCARD", [keys.inbox(user)]),
            RedisCommand("GET", [keys.seq(user)]),
            RedisCommand("GET", [keys.deliveredMark(user)]),
            RedisCommand("ZRANGE", [keys.inbox(user), 0, 0, "WITHSCORES"]),
        ]).map { try $0.checked() }
        var depth = InboxDepth(user: user, unconfirmed: Int(replies[0].int ?? 0), lastSeq: UInt64(replies[1].int ?? 0),
                               confirmedSeq: UInt64(replies[2].int ?? 0))
        if let oldest = replies[3].array, oldest.count == 2, let bytes = oldest[0].bytes, let seq = oldest[1].int {
            depth.oldestSeq = UInt64(seq)
            let message = try? Simp_Message(serializedBytes: bytes)
            depth.oldestFrom = message?.fromUser
            depth.oldestSentAtMillis = message?.time
        }
        return depth
    }

    /// The deepest inboxes, deepest first.
    public func deepestInboxes(top: Int) async throws -> [InboxDepth] {
        let names = try await redis.scan(matching: keys.inbox("*"))
        guard !names.isEmpty else { return [] }
        let counts = try await redis.run(names.map { RedisCommand("ZCARD", [$0]) })
        var sized: [(user: String, count: Int64)] = []
        for (name, count) in zip(names, counts) where (count.int ?? 0) > 0 {
            guard let user = keys.owner(of: name) else { continue }
            sized.append((user, count.int ?? 0))
        }
        sized.sort { $0.count != $1.count ? $0.count > $1.count : $0.user < $1.user }
        var depths: [InboxDepth] = []
        for entry in sized.prefix(top) { depths.append(try await inbox(of: entry.user)) }
        return depths
    }

    /// The presence records of these users, in one pipelined round trip.
    private func sessions(of users: [String]) async throws(RedisError) -> [OnlineSession] {
        guard !users.isEmpty else { return [] }
        let replies = try await redis.run(users.flatMap { user in
            [RedisCommand("HGETALL", [keys.presence(user)]), RedisCommand("TTL", [keys.presence(user)])]
        })
        let found = users.indices.flatMap { index -> [OnlineSession] in
            let flat = replies[2 * index].array ?? []
            return stride(from: 0, to: flat.count - 1, by: 2).compactMap { field -> OnlineSession? in
                guard let device = flat[field].string, let entry = flat[field + 1].string.flatMap(PresenceEntry.init) else { return nil }
                return OnlineSession(user: users[index], device: device, node: entry.node, address: entry.address, session: entry.session,
                                     nodeAlive: false, expiresInSeconds: replies[2 * index + 1].int ?? -1)
            }
        }
        let nodes = Array(Set(found.map(\.node)))
        guard !nodes.isEmpty else { return found }
        let alive = try await redis.run(nodes.map { RedisCommand("EXISTS", [keys.node($0)]) })
        let aliveNodes = Set(zip(nodes, alive).filter { $0.1.int == 1 }.map(\.0))
        return found.map { session in
            var session = session
            session.nodeAlive = aliveNodes.contains(session.node)
            return session
        }
    }

    private func requireUser(_ user: String) async throws {
        guard UserName.isValid(user), try await redis.run(RedisCommand("EXISTS", [keys.user(user)])).int == 1 else {
            throw AdminError(kind: .unknownUser, description: "no user named \(user)")
        }
    }
}

/// What `migrateKeys` did.
public struct KeyMigration: Codable, Sendable, Equatable {
    public var renamed = 0
    /// Conversation histories (one shared list before) copied into both users' lists.
    public var historiesSplit = 0
    /// Failed-login counters and waits, dropped rather than moved: they expire within minutes.
    public var dropped = 0
    /// Old keys left alone because their new name already exists.
    public var conflicts: [String] = []
}

extension Administration {
    /// Moves data written before the keys carried hash tags (`simp:inbox:bob`) to the tagged
    /// names (`simp:{bob}:inbox`). For a single Redis, with every simp-server stopped.
    public func migrateKeys() async throws -> KeyMigration {
        var result = KeyMigration()
        let p = keys.prefix
        for kind in ["user", "seq", "inbox", "acked", "numbering", "presence", "knownips"] {
            for old in try await redis.scan(matching: "\(p):\(kind):*") {
                let name = String(old.dropFirst("\(p):\(kind):".count))
                guard UserName.isValid(name) else { continue }
                try await move(old, to: keys.of(name, kind), &result)
            }
        }
        for old in try await redis.scan(matching: "\(p):mids:*") {
            let parts = old.dropFirst("\(p):mids:".count).split(separator: ":").map(String.init)
            guard parts.count == 2 else { continue }
            try await move(old, to: keys.messageIDs(to: parts[0], from: parts[1]), &result)
        }
        for old in try await redis.scan(matching: "\(p):hist:*") {
            let parts = old.dropFirst("\(p):hist:".count).split(separator: ":").map(String.init)
            guard parts.count == 2 else { continue }
            try await split(old, between: parts[0], and: parts[1], &result)
        }
        for pattern in ["\(p):loginfail:*", "\(p):loginlock:*"] {
            let old = try await redis.scan(matching: pattern)
            if !old.isEmpty { _ = try await redis.run(RedisCommand("DEL", old)) }
            result.dropped += old.count
        }
        return result
    }

    private func move(_ old: String, to new: String, _ result: inout KeyMigration) async throws {
        if try await redis.run(RedisCommand("RENAMENX", [old, new])).int == 1 {
            result.renamed += 1
        } else {
            result.conflicts.append(old)
        }
    }

    private func split(_ old: String, between a: String, and b: String, _ result: inout KeyMigration) async throws {
        let (first, second) = (keys.history(of: a, with: b), keys.history(of: b, with: a))
        let exists = try await redis.run([RedisCommand("EXISTS", [first]), RedisCommand("EXISTS", [second])])
        guard exists.allSatisfy({ $0.int == 0 }) else {
            result.conflicts.append(old)
            return
        }
        _ = try await redis.run([RedisCommand("COPY", [old, first]), RedisCommand("RENAME", [old, second])]).map { try $0.checked() }
        result.historiesSplit += 1
    }
}
