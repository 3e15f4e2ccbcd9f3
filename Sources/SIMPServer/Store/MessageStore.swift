import NIOCore
import SIMPCore
import SIMPRedis

/// One message to store: who sent it (from the session), its id, its recipient, its bytes.
struct StoreRequest: Sendable {
    var from: String
    var id: String
    var to: String
    var bytes: [UInt8]
    /// Set when an attempt may have run in Redis without us seeing the answer.
    var ambiguousSince: NIODeadline?
}

struct StoredCredentials: Sendable {
    var salt: [UInt8]
    var hash: [UInt8]
    var kdf: String
}

/// How long failed logins still lock a user out (0 or less: not locked).
struct LoginLock: Sendable {
    var sourceMillis: Int64
    var userMillis: Int64
}

enum StoreOutcome: Sendable {
    case stored(seq: UInt64, bytes: [UInt8])
    /// Stored before; `delivered` when the recipient has already confirmed it.
    case duplicate(seq: UInt64, delivered: Bool)
    case unknownRecipient
    case inboxFull
    case unavailable(RedisError)
}

struct StoreSettings: Sendable {
    var namespace = "simp"
    /// How long a sender's message id is remembered for de-duplication.
    var messageIDTTLSeconds = 86_400
    var historyCap = 1000
    var inboxLimit = 10_000
    var presenceTTLSeconds = 90
}

/// SIMP's data in Redis: accounts, inboxes, sequence numbers, receipts, presence, history.
/// Every call goes through the pool, so none blocks an event loop.
final class MessageStore: Sendable {
    let redis: RedisPool
    let keys: Keys
    let settings: StoreSettings

    init(redis: RedisPool, settings: StoreSettings) {
        self.redis = redis
        self.keys = Keys(prefix: settings.namespace)
        self.settings = settings
    }

    /// Stores a batch in one pipelined round trip, one script call per recipient; outcomes
    /// come back in batch order. Never fails as a whole: a Redis outage becomes
    /// `.unavailable` for each request.
    func store(_ batch: [StoreRequest], on loop: any EventLoop) -> EventLoopFuture<[StoreOutcome]> {
        let groups = Self.byRecipient(batch)
        let commands = groups.map { indices in storeCommand(indices.map { batch[$0] }) }
        return redis.run(commands, on: loop).map { replies in
            var outcomes = [StoreOutcome](repeating: .unavailable(RedisError(.protocolViolation, "no reply")), count: batch.count)
            for (indices, reply) in zip(groups, replies) {
                let parts = Self.outcomes(reply, count: indices.count)
                for (index, outcome) in zip(indices, parts) { outcomes[index] = Self.withStoredBytes(outcome, batch[index]) }
            }
            return outcomes
        }.recover { error in
            let failure = error as? RedisError ?? RedisError(.io, "\(error)")
            return batch.map { _ in .unavailable(failure) }
        }
    }

    /// Positions of the batch's requests, grouped by recipient, each group in batch order.
    static func byRecipient(_ batch: [StoreRequest]) -> [[Int]] {
        var groups: [String: Int] = [:]
        var result: [[Int]] = []
        for (index, request) in batch.enumerated() {
            if let group = groups[request.to] {
                result[group].append(index)
            } else {
                groups[request.to] = result.count
                result.append([index])
            }
        }
        return result
    }

    private func storeCommand(_ requests: [StoreRequest]) -> RedisCommand {
        let to = requests[0].to
        var keys: [any RedisArgument] = [keys.user(to), keys.seq(to), keys.inbox(to), keys.acked(to)]
        for request in requests {
            keys.append(self.keys.messageID(request.from, request.id))
            keys.append(self.keys.history(request.from, to))
        }
        let args: [any RedisArgument] = [settings.messageIDTTLSeconds, settings.historyCap, settings.inboxLimit] + requests.map(\.bytes)
        return RedisCommand.script(Scripts.store, keys: keys, args: args)
    }

    private static func outcomes(_ reply: RedisValue, count: Int) -> [StoreOutcome] {
        if case .error(let message) = reply { return Array(repeating: .unavailable(RedisError.reply(message)), count: count) }
        guard let parts = reply.array, parts.count == count else {
            return Array(repeating: .unavailable(RedisError(.protocolViolation, "store script returned \(reply)")), count: count)
        }
        return parts.map(outcome)
    }

    private static func outcome(_ reply: RedisValue) -> StoreOutcome {
        guard let parts = reply.array, let status = parts.first?.int else {
            return .unavailable(RedisError(.protocolViolation, "store script returned \(reply)"))
        }
        switch status {
        case 1:
            guard parts.count == 2, let seq = parts[1].int else { break }
            return .stored(seq: UInt64(seq), bytes: [])
        case 0:
            guard parts.count == 3, let seq = parts[1].int, let confirmed = parts[2].int else { break }
            return .duplicate(seq: UInt64(seq), delivered: confirmed >= seq)
        case -1: return .unknownRecipient
        case -2: return .inboxFull
        default: break
        }
        return .unavailable(RedisError(.protocolViolation, "store script returned \(reply)"))
    }

    /// The stored bytes are the request's with the seq appended, as the script stored them.
    private static func withStoredBytes(_ outcome: StoreOutcome, _ request: StoreRequest) -> StoreOutcome {
        guard case .stored(let seq, _) = outcome else { return outcome }
        return .stored(seq: seq, bytes: StoredMessage.appending(seq: seq, to: request.bytes))
    }

    /// Writes confirmed marks (cumulative receipts) in one pipelined round trip. Per mark: the
    /// inbox entries it confirmed when it asked for them (else none), or why it failed.
    func acknowledge(_ marks: [ReceiptLedger.Mark], on loop: any EventLoop) -> EventLoopFuture<[Result<[[UInt8]], RedisError>]> {
        let commands = marks.map { mark in
            RedisCommand.script(Scripts.ack, keys: [keys.inbox(mark.user), keys.acked(mark.user), keys.seq(mark.user)],
                                args: [mark.upTo, mark.needsEntries ? 1 : 0])
        }
        return redis.run(commands, on: loop).map { replies in
            replies.map { reply in
                Result { () throws(RedisError) in (try reply.checked().array ?? []).compactMap(\.bytes) }
            }
        }.recover { error in
            let failure = error as? RedisError ?? RedisError(.io, "\(error)")
            return marks.map { _ in .failure(failure) }
        }
    }

    /// The confirmed mark and the unconfirmed inbox entries after `after`, oldest first.
    func pending(user: String, after: UInt64, limit: Int, on loop: any EventLoop) -> EventLoopFuture<(confirmed: UInt64, items: [[UInt8]])> {
        let commands = [
            RedisCommand("GET", [keys.acked(user)]),
            RedisCommand("ZRANGEBYSCORE", [keys.inbox(user), "(\(after)", "+inf", "LIMIT", "0", limit]),
        ]
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            let confirmed = UInt64(try replies[0].checked().int ?? 0)
            let items = try (replies[1].checked().array ?? []).compactMap(\.bytes)
            return (confirmed, items)
        }
    }

    /// Specific unconfirmed inbox entries, by seq (those still in the inbox).
    func inboxEntries(user: String, seqs: [UInt64], on loop: any EventLoop) -> EventLoopFuture<[[UInt8]]> {
        let commands = seqs.map { RedisCommand("ZRANGEBYSCORE", [keys.inbox(user), $0, $0]) }
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            try replies.flatMap { try ($0.checked().array ?? []).compactMap(\.bytes) }
        }
    }

    /// One page of the conversation's history (`HistoryPaging`): at most `limit` stored
    /// messages from position `before` back, cut to `budget` bytes. The list grows at its
    /// newest end and is trimmed at its oldest, so a position counted from the newest moves
    /// only when a message arrives: a later page may then repeat one, never skip one.
    func history(between a: String, and b: String, before: UInt64, limit: Int, budget: Int,
                 on loop: any EventLoop) -> EventLoopFuture<HistoryPaging.Page> {
        let key = keys.history(a, b)
        let skip = Int(min(before, UInt64(HistoryPaging.maxPosition)))
        let read = min(limit, HistoryPaging.maxReadPerPage)
        let commands = [RedisCommand("LRANGE", [key, -(skip + read), -(skip + 1)]), RedisCommand("LLEN", [key])]
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            let items = try (replies[0].checked().array ?? []).compactMap(\.bytes)
            let stored = try Int(replies[1].checked().int ?? 0)
            return HistoryPaging.page(oldestFirst: items, before: skip, stored: stored, budget: budget)
        }
    }

    func userExists(_ user: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        redis.run([RedisCommand("EXISTS", [keys.user(user)])], on: loop).flatMapThrowing { replies in
            try replies[0].checked().int == 1
        }
    }

    struct Presence {
        var user: String
        var address: String
        var session: UInt64
    }

    /// Writes the presence of several sessions of `node` in one round trip.
    func setPresence(_ entries: [Presence], node: String, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let commands = entries.flatMap { entry in
            let key = keys.presence(entry.user)
            return [RedisCommand("HSET", [key, "node", node, "addr", entry.address, "session", entry.session]),
                    RedisCommand("EXPIRE", [key, settings.presenceTTLSeconds])]
        }
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            for reply in replies { _ = try reply.checked() }
        }
    }

    func clearPresence(user: String, session: UInt64, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let command = RedisCommand.script(Scripts.clearPresence, keys: [keys.presence(user)], args: [session])
        return redis.run([command], on: loop).flatMapThrowing { _ = try $0[0].checked() }
    }

    /// The highest confirmed seq of each user.
    func confirmedMarks(_ users: [String], on loop: any EventLoop) -> EventLoopFuture<[String: UInt64]> {
        guard !users.isEmpty else { return loop.makeSucceededFuture([:]) }
        return redis.run([RedisCommand("MGET", users.map { keys.acked($0) })], on: loop).flatMapThrowing { replies in
            let values = try replies[0].checked().array ?? []
            var marks: [String: UInt64] = [:]
            for (user, value) in zip(users, values) { marks[user] = UInt64(value.int ?? 0) }
            return marks
        }
    }

    // MARK: accounts

    /// Succeeds with false when the name is taken.
    func createAccount(user: String, salt: [UInt8], hash: [UInt8], kdf: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        let command = RedisCommand.script(Scripts.register, keys: [keys.user(user)], args: [salt, hash, kdf])
        return redis.run([command], on: loop).flatMapThrowing { try $0[0].checked().int == 1 }
    }

    /// The user's credentials (nil: no such user) and how long failed logins still lock them
    /// out, from this source and from every source.
    func loginState(user: String, source: String, on loop: any EventLoop) -> EventLoopFuture<(StoredCredentials?, LoginLock)> {
        redis.run([
            RedisCommand("HMGET", [keys.user(user), "salt", "hash", "kdf"]),
            RedisCommand("PTTL", [keys.loginLock(user, from: source)]),
            RedisCommand("PTTL", [keys.loginLock(user)]),
        ], on: loop).flatMapThrowing { replies in
            let lock = LoginLock(sourceMillis: Int64(try replies[1].checked().int ?? 0),
                                 userMillis: Int64(try replies[2].checked().int ?? 0))
            guard let fields = try replies[0].checked().array, fields.count == 3,
                  let salt = fields[0].bytes, let hash = fields[1].bytes, let kdf = fields[2].string else { return (nil, lock) }
            return (StoredCredentials(salt: salt, hash: hash, kdf: kdf), lock)
        }
    }

    /// Counts a failed login (each count is forgotten `windowSeconds` after the last one) and
    /// returns the failures in a row from this source and from every source.
    func recordFailedLogin(user: String, source: String, windowSeconds: Int,
                           on loop: any EventLoop) -> EventLoopFuture<(fromSource: Int, total: Int)> {
        let bySource = keys.loginFailures(user, from: source)
        let byUser = keys.loginFailures(user)
        return redis.run([
            RedisCommand("INCR", [bySource]), RedisCommand("EXPIRE", [bySource, windowSeconds]),
            RedisCommand("INCR", [byUser]), RedisCommand("EXPIRE", [byUser, windowSeconds]),
        ], on: loop).flatMapThrowing { replies in
            (Int(try replies[0].checked().int ?? 0), Int(try replies[2].checked().int ?? 0))
        }
    }

    /// Locks the user's logins from `source` (or, with nil, from everywhere) for `amount`.
    func lockLogins(user: String, from source: String?, for amount: TimeAmount, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let millis = max(1, amount.nanoseconds / 1_000_000)
        return redis.run([RedisCommand("SET", [keys.loginLock(user, from: source), 1, "PX", millis])], on: loop)
            .flatMapThrowing { _ = try $0[0].checked() }
    }

    func clearFailedLogins(user: String, source: String, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let doomed = [keys.loginFailures(user, from: source), keys.loginLock(user, from: source),
                      keys.loginFailures(user), keys.loginLock(user)]
        return redis.run([RedisCommand("DEL", doomed)], on: loop).flatMapThrowing { _ = try $0[0].checked() }
    }

    /// Marks tokens revoked until they would have expired anyway.
    func revoke(_ tokens: [(id: String, remainingMillis: Int64)], on loop: any EventLoop) -> EventLoopFuture<Void> {
        let live = tokens.filter { $0.remainingMillis > 0 }
        guard !live.isEmpty else { return loop.makeSucceededVoidFuture() }
        return redis.run(live.map { RedisCommand("SET", [keys.revoked($0.id), 1, "PX", $0.remainingMillis]) }, on: loop)
            .flatMapThrowing { replies in for reply in replies { _ = try reply.checked() } }
    }

    func isRevoked(tokenID: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        redis.run([RedisCommand("EXISTS", [keys.revoked(tokenID)])], on: loop)
            .flatMapThrowing { try $0[0].checked().int == 1 }
    }

    /// The token-signing key every node shares; the first node to start creates it.
    func sharedSecret(candidate: [UInt8]) async throws(RedisError) -> [UInt8] {
        let replies = try await redis.run([
            RedisCommand("SET", [keys.secret, candidate, "NX"]),
            RedisCommand("GET", [keys.secret]),
        ])
        guard let secret = try replies[1].checked().bytes, !secret.isEmpty else {
            throw RedisError(.protocolViolation, "token secret missing after SET NX")
        }
        return secret
    }
}
