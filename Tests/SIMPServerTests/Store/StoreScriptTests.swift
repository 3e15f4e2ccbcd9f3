import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// The store script on a real Redis: how it finds a message stored before, and how many of a
/// sender's ids it keeps.
@Suite(.serialized) struct StoreScriptTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()

    func request(_ id: String) -> StoreRequest {
        StoreRequest(from: "ann", id: id, to: "bob", bytes: Array("message \(id)".utf8))
    }

    func store(_ store: MessageStore, _ ids: [String]) async throws -> [StoreOutcome] {
        try await store.store(ids.map(request), on: loop).get()
    }

    /// A second copy in the same call and a resend in a later call are duplicates with the
    /// first copy's seq; what the recipient confirmed is reported as delivered.
    @Test func aMessageIdIsStoredOnce() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        let messages = MessageStore(redis: pool, settings: StoreSettings())
        #expect(try await messages.createAccount(user: "bob", salt: [1], hash: [2], kdf: "test", on: loop).get())

        let first = try await store(messages, ["a", "b", "a"])
        #expect(summary(first) == ["stored 1", "stored 2", "duplicate 1"])
        _ = try await messages.acknowledge([.init(user: "bob", upTo: 1, needsEntries: false)], on: loop).get()
        #expect(summary(try await store(messages, ["b", "a", "c"])) == ["duplicate 2", "delivered 1", "stored 3"])
        await pool.shutdown()
    }

    /// A sender's ids grow 10% past their cap (the larger of `idsPerSender` and the sender's
    /// share) before the oldest are trimmed: never fewer than the cap are remembered.
    @Test func aSendersIdsAreTrimmedToTheirCapWithSlack() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        var settings = StoreSettings()
        settings.idsPerSender = 20
        settings.inboxShare = 20
        let messages = MessageStore(redis: pool, settings: settings)
        _ = try await messages.createAccount(user: "bob", salt: [1], hash: [2], kdf: "test", on: loop).get()
        func remembered() async throws -> Int64 {
            try await pool.run(RedisCommand("ZCARD", [messages.keys.messageIDs(to: "bob", from: "ann")])).int ?? -1
        }

        #expect(summary(try await store(messages, (1...20).map { "m\($0)" })).allSatisfy { $0.hasPrefix("stored") })
        _ = try await messages.acknowledge([.init(user: "bob", upTo: 20, needsEntries: false)], on: loop).get()
        var counts = [try await remembered()]
        for n in 21...23 {
            #expect(summary(try await store(messages, ["m\(n)"])) == ["stored \(n)"])
            counts.append(try await remembered())
        }
        // Kept up to 22 (20 and 10%), then trimmed back to the newest 20.
        #expect(counts == [20, 21, 22, 20])
        #expect(summary(try await store(messages, ["m4", "m3"])) == ["delivered 4", "stored 24"],
                "m4 is among the newest 20; m3 was trimmed, so it counts as new")
        await pool.shutdown()
    }

    /// A failure for good is kept with the id: a resend whose sender never heard of it (its
    /// session gone) is answered with the same failure, not stored after later messages. A
    /// failure the router decides (replicas that never came) is kept the same way, and never
    /// over a stored id; a kept failure is not a confirmed message.
    @Test func aFailureForGoodIsKeptAndAnsweredTheSame() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        var settings = StoreSettings()
        settings.inboxLimit = 1
        let messages = MessageStore(redis: pool, settings: settings)
        _ = try await messages.createAccount(user: "bob", salt: [1], hash: [2], kdf: "test", on: loop).get()

        #expect(summary(try await store(messages, ["a", "b", "b"])) == ["stored 1", "inboxFull", "failedBefore(code: SIMPCore.Simp_ErrorCode.inboxFull)"])
        _ = try await messages.acknowledge([.init(user: "bob", upTo: 1, needsEntries: false)], on: loop).get()
        #expect(summary(try await store(messages, ["b", "c"])) == ["failedBefore(code: SIMPCore.Simp_ErrorCode.inboxFull)", "stored 2"])

        try await messages.markFailed(request("d"), code: .replicasUnavailable, on: loop).get()
        try await messages.markFailed(request("c"), code: .replicasUnavailable, on: loop).get()
        _ = try await messages.acknowledge([.init(user: "bob", upTo: 2, needsEntries: false)], on: loop).get()
        #expect(summary(try await store(messages, ["d", "c"])) == ["failedBefore(code: SIMPCore.Simp_ErrorCode.replicasUnavailable)", "delivered 2"])
        let ttl = try await pool.run(RedisCommand("TTL", [messages.keys.messageIDs(to: "bob", from: "ann")])).int ?? -1
        #expect(ttl > 0, "kept failures expire with the ids")

        let asked = ["b", "c", "d"].map { id in
            var item = Simp_Accepted()
            item.messageID = id
            item.toUser = "bob"
            item.seq = 2
            return item
        }
        #expect(try await messages.confirmedOf("ann", asked, on: loop).get().map(\.messageID) == ["c"])
        await pool.shutdown()
    }

    private func summary(_ outcomes: [StoreOutcome]) -> [String] {
        outcomes.map { outcome in
            switch outcome {
            case .stored(let seq, _): return "stored \(seq)"
            case .duplicate(let seq, let delivered): return "\(delivered ? "delivered" : "duplicate") \(seq)"
            default: return "\(outcome)"
            }
        }
    }
}
