import NIOConcurrencyHelpers
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

    /// Bob's account, with his device `default` (receipts of an unregistered device change nothing).
    func bob(_ messages: MessageStore) async throws {
        _ = try await messages.createAccount(user: "bob", salt: [1], hash: [2], kdf: "test", on: loop).get()
        _ = try await messages.registerDevice(user: "bob", device: DeviceName.unnamed, nowMillis: 1, issuedMillis: 1, on: loop).get()
    }

    /// A Redis of its own, a pool on it, the store with `configure`'s settings, and Bob's account.
    func started(_ configure: (inout StoreSettings) -> Void = { _ in },
                 observeInboxDepth: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> (RedisServerProcess, RedisPool, MessageStore) {
        let redis = try RedisServerProcess()
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        var settings = StoreSettings()
        configure(&settings)
        let messages = MessageStore(redis: pool, settings: settings, observeInboxDepth: observeInboxDepth)
        do {
            try await bob(messages)
        } catch {
            await pool.shutdown()
            redis.stop()
            throw error
        }
        return (redis, pool, messages)
    }

    /// A second copy in the same call and a resend in a later call are duplicates with the
    /// first copy's seq; what the recipient confirmed is reported as delivered.
    @Test func aMessageIdIsStoredOnce() async throws {
        let (redis, pool, messages) = try await started()
        defer { redis.stop() }

        let first = try await store(messages, ["a", "b", "a"])
        #expect(summary(first) == ["stored 1", "stored 2", "duplicate 1"])
        _ = try await messages.writeReceipts([.init(user: "bob", deviceMark: 1, needsEntries: false)], on: loop).get()
        #expect(summary(try await store(messages, ["b", "a", "c"])) == ["duplicate 2", "delivered 1", "stored 3"])
        await pool.shutdown()
    }

    /// A sender's ids grow 10% past their cap (the larger of `idsPerSender` and the sender's
    /// share) before the oldest are trimmed: never fewer than the cap are remembered.
    @Test func aSendersIdsAreTrimmedToTheirCapWithSlack() async throws {
        let (redis, pool, messages) = try await started { $0.idsPerSender = 20; $0.inboxShare = 20 }
        defer { redis.stop() }
        func remembered() async throws -> Int64 {
            try await pool.run(RedisCommand("ZCARD", [messages.keys.messageIDs(to: "bob", from: "ann")])).int ?? -1
        }

        #expect(summary(try await store(messages, (1...20).map { "m\($0)" })).allSatisfy { $0.hasPrefix("stored") })
        _ = try await messages.writeReceipts([.init(user: "bob", deviceMark: 20, needsEntries: false)], on: loop).get()
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

    /// The ids' lifetime is renewed only once it has fallen below the id TTL, to the TTL and
    /// 1/24 of it: every id lives at least the TTL, and a store right after one writes no EXPIRE.
    @Test func aSendersIdsLiveAtLeastTheirTTLAndAreNotRenewedOnEveryStore() async throws {
        let (redis, pool, messages) = try await started { $0.messageIDTTLSeconds = 2_400 }
        defer { redis.stop() }
        let ids = messages.keys.messageIDs(to: "bob", from: "ann")
        func ttl() async throws -> Int64 { try await pool.run(RedisCommand("TTL", [ids])).int ?? -1 }
        func expires() async throws -> Int { try await CommandStats.calls("expire", on: pool) }

        _ = try await store(messages, ["a"])
        #expect((2_401...2_500).contains(try await ttl()), "set to the TTL and 1/24 of it")
        _ = try await pool.run(RedisCommand("EXPIRE", [ids, "10"]))
        _ = try await store(messages, ["b"])
        #expect((2_401...2_500).contains(try await ttl()), "renewed: it had fallen below the TTL")
        let before = try await expires()
        _ = try await store(messages, ["c"])
        #expect(try await expires() == before, "well above the TTL: not renewed")
        #expect(summary(try await store(messages, ["a"])) == ["duplicate 1"])
        await pool.shutdown()
    }

    /// The inbox and a sender's entries in it are counted only once the seqs above the confirmed
    /// mark reach the share or the limit: below them no limit can be reached. Both limits hold
    /// as before, and the depth each store reports is the inbox's unconfirmed entries.
    @Test func theInboxIsCountedOnlyWhenItsSeqsReachALimit() async throws {
        let depths = NIOLockedValueBox<[Int]>([])
        let (redis, pool, messages) = try await started({ $0.inboxLimit = 4; $0.inboxShare = 2 },
                                                        observeInboxDepth: { depth in depths.withLockedValue { $0.append(depth) } })
        defer { redis.stop() }
        func send(_ from: String, _ id: String, to: String = "bob") async throws -> [String] {
            let request = StoreRequest(from: from, id: id, to: to, bytes: Array("message \(id)".utf8))
            return summary(try await messages.store([request], on: loop).get())
        }
        func calls(_ command: String) async throws -> Int { try await CommandStats.calls(command, on: pool) }

        let looked = try await calls("exists")
        #expect(try await send("ann", "a") == ["stored 1"])
        #expect(try await calls("exists") == looked + 1, "bob had no seq yet: his account is looked up")
        #expect(try await send("ann", "b") == ["stored 2"])
        #expect(try await calls("zcount") == 0, "one seq above the mark: below the share of 2")
        #expect(try await calls("exists") == looked + 1, "bob has a seq: he exists")
        #expect(try await send("ann", "c") == ["shareFull"])
        #expect(try await calls("zcount") == 1, "two seqs above the mark: ann's entries are counted")
        #expect(try await send("cy", "d") == ["stored 3"])
        #expect(try await send("cy", "e") == ["stored 4"])
        #expect(try await send("dee", "f") == ["inboxFull"])
        #expect(try await send("ann", "g", to: "zoe") == ["unknownRecipient"])
        _ = try await messages.writeReceipts([.init(user: "bob", deviceMark: 4, needsEntries: false)], on: loop).get()
        let counted = try await calls("zcount")
        #expect(try await send("dee", "h") == ["stored 5"])
        #expect(try await calls("zcount") == counted, "all confirmed: nothing counted")
        #expect(depths.withLockedValue { $0 } == [1, 2, 3, 4, 1])
        await pool.shutdown()
    }

    /// A failure for good is kept with the id: a resend whose sender never heard of it (its
    /// session gone) is answered with the same failure, not stored after later messages. A
    /// failure the router decides (replicas that never came) is kept the same way, and never
    /// over a stored id; a kept failure is not a confirmed message.
    @Test func aFailureForGoodIsKeptAndAnsweredTheSame() async throws {
        let (redis, pool, messages) = try await started { $0.inboxLimit = 1 }
        defer { redis.stop() }

        #expect(summary(try await store(messages, ["a", "b", "b"])) == ["stored 1", "inboxFull", "failedBefore(code: SIMPCore.Simp_ErrorCode.inboxFull)"])
        _ = try await messages.writeReceipts([.init(user: "bob", deviceMark: 1, needsEntries: false)], on: loop).get()
        #expect(summary(try await store(messages, ["b", "c"])) == ["failedBefore(code: SIMPCore.Simp_ErrorCode.inboxFull)", "stored 2"])

        try await messages.markFailed(request("d"), code: .replicasUnavailable, on: loop).get()
        try await messages.markFailed(request("c"), code: .replicasUnavailable, on: loop).get()
        _ = try await messages.writeReceipts([.init(user: "bob", deviceMark: 2, needsEntries: false)], on: loop).get()
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

    /// Each device has its own confirmed mark; the user's (the highest) says what was delivered,
    /// once: only the first device to confirm an entry gets it back for its sender. An entry
    /// leaves the inbox when every device has confirmed it, and only unconfirmed entries count
    /// against the inbox limit.
    @Test func eachDeviceConfirmsOnItsOwnAndTheFirstDelivers() async throws {
        let (redis, pool, messages) = try await started { $0.inboxLimit = 3 }
        defer { redis.stop() }
        let laptop = try await messages.registerDevice(user: "bob", device: "laptop", nowMillis: 2, issuedMillis: 1, on: loop).get()
        #expect(laptop == .registered(deviceMark: 0, devices: 2, nodes: []))
        func ack(_ device: String, _ upTo: UInt64) async throws -> [String] {
            let written = try await messages.writeReceipts([.init(user: "bob", device: device, deviceMark: upTo, needsEntries: true)], on: loop).get()
            return try written[0].get().entries.map { String(decoding: $0.prefix(9), as: UTF8.self) }
        }
        func inbox() async throws -> Int64 { try await pool.run(RedisCommand("ZCARD", [messages.keys.inbox("bob")])).int ?? -1 }

        #expect(summary(try await store(messages, ["a", "b", "c"])) == ["stored 1", "stored 2", "stored 3"])
        #expect(summary(try await store(messages, ["d"])) == ["inboxFull"])
        #expect(try await ack("default", 2) == ["message a", "message b"])
        let reads = try await CommandStats.calls("hget", on: pool)
        #expect(try await ack("laptop", 2) == [], "delivered already: its sender is not told twice")
        #expect(try await CommandStats.calls("hget", on: pool) == reads, "the device's cursor comes with the others")
        #expect(try await inbox() == 1)
        #expect(try await ack("laptop", 3) == ["message c"])
        // The default device is behind: c stays for it, and counts no more against the limit.
        #expect(try await inbox() == 1)
        #expect(summary(try await store(messages, ["e", "f"])) == ["stored 4", "stored 5"])
        let listed = try await messages.devices(of: "bob", nowMillis: 10, on: loop).get()
        #expect(listed.map(\.name) == ["default", "laptop"])
        #expect(listed.map(\.confirmedSeq) == [2, 3])
        await pool.shutdown()
    }

    /// A device further behind than an inbox's worth of confirmed entries has its mark moved
    /// past the oldest, which leave the inbox: kept entries are bounded like unconfirmed ones.
    @Test func aDeviceFarBehindLosesOnlyWhatIsPastTheLimit() async throws {
        let (redis, pool, messages) = try await started { $0.inboxLimit = 2 }
        defer { redis.stop() }
        _ = try await messages.registerDevice(user: "bob", device: "laptop", nowMillis: 2, issuedMillis: 1, on: loop).get()
        for round in 0..<3 {
            let ids = ["x\(round)", "y\(round)"]
            #expect(summary(try await store(messages, ids)).allSatisfy { $0.hasPrefix("stored") })
            _ = try await messages.writeReceipts([.init(user: "bob", device: "laptop", deviceMark: UInt64(2 * round + 2), needsEntries: false)],
                                               on: loop).get()
        }
        let seqs = try await pool.run(RedisCommand("ZRANGE", [messages.keys.inbox("bob"), 0, -1, "WITHSCORES"])).array?.count ?? -1
        #expect(seqs == 4, "two entries kept for the device behind")
        let cursors = try await messages.devices(of: "bob", nowMillis: 10, on: loop).get().map(\.confirmedSeq)
        #expect(cursors == [4, 6])
        await pool.shutdown()
    }

    /// At most `maxDevicesPerUser` devices; a known one always comes back; a revoked one frees
    /// its place, and tokens issued before the revocation no longer register it.
    @Test func devicesAreCountedAndRevoked() async throws {
        let (redis, pool, messages) = try await started { $0.maxDevicesPerUser = 2 }
        defer { redis.stop() }
        func register(_ device: String, at now: Int64, issued: Int64 = 1) async throws -> MessageStore.DeviceRegistration {
            try await messages.registerDevice(user: "bob", device: device, nowMillis: now, issuedMillis: issued, on: loop).get()
        }
        #expect(try await register("phone", at: 2) == .registered(deviceMark: 0, devices: 2, nodes: []))
        #expect(try await register("tablet", at: 3) == .tooMany(devices: 2))
        #expect(try await register("phone", at: 4) == .registered(deviceMark: 0, devices: 2, nodes: []))
        #expect(try await messages.revokeDevice(user: "bob", device: "tablet", nowMillis: 5, on: loop).get() == nil)
        // O(1): the revocation is one key, not a hash of every revocation read back each time.
        let reads = try await CommandStats.calls("hgetall", on: pool)
        #expect(try await messages.revokeDevice(user: "bob", device: "phone", nowMillis: 5, on: loop).get() == .some(nil))
        #expect(try await CommandStats.calls("hgetall", on: pool) == reads)
        let ttl = try await pool.run(RedisCommand("PTTL", [messages.keys.revokedDevice("bob", "phone")])).int ?? -1
        #expect(ttl > 0 && ttl <= messages.settings.tokenLifetimeMillis, "kept no longer than a token lives: \(ttl)")
        #expect(try await register("phone", at: 6, issued: 5) == .revoked)
        #expect(try await register("tablet", at: 7) == .registered(deviceMark: 0, devices: 2, nodes: []))
        #expect(try await register("phone", at: 8, issued: 6) == .tooMany(devices: 2))
        await pool.shutdown()
    }

    /// A device neither connected nor seen for `forgetDevicesAfterMillis` is forgotten when
    /// another device of its user renews its presence: its mark no longer holds entries back,
    /// and it no longer counts against the limit. A connected one is kept however old.
    @Test func aDeviceUnseenForLongIsForgotten() async throws {
        let (redis, pool, messages) = try await started { $0.forgetDevicesAfterMillis = 1_000 }  // "default", seen at 1 ms
        defer { redis.stop() }
        _ = try await messages.registerDevice(user: "bob", device: "phone", nowMillis: 5_000, issuedMillis: 1, on: loop).get()
        _ = try await messages.registerDevice(user: "bob", device: "tablet", nowMillis: 2_000, issuedMillis: 1, on: loop).get()
        func presence(_ device: String, session: UInt64, at now: Int64) -> MessageStore.Presence {
            .init(user: "bob", device: device, entry: PresenceEntry(node: "node-1", session: session, address: "127.0.0.1:9", seenMillis: now))
        }
        // The tablet is connected (its presence entry is there) though last seen long ago.
        #expect(try await messages.setPresence([presence("tablet", session: 2, at: 2_000)], on: loop).get() == [true], "the first device present")
        #expect(try await messages.setPresence([presence("phone", session: 1, at: 5_500)], on: loop).get() == [false])
        let renewed = try await messages.renewPresence([presence("phone", session: 1, at: 5_600)], on: loop).get()
        #expect(renewed.map(\.renewed) == [true])
        #expect(renewed.map(\.devices) == [2], "default forgotten, phone and the connected tablet kept")
        #expect(try await messages.devices(of: "bob", nowMillis: 5_600, on: loop).get().map(\.name) == ["phone", "tablet"])
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

/// A command's calls in Redis' `INFO commandstats` (`cmdstat_expire:calls=3,usec=...`).
enum CommandStats {
    /// A command's calls so far on the Redis behind `pool` (`hget`, `zcount`...).
    static func calls(_ command: String, on pool: RedisPool) async throws -> Int {
        let stats = try await pool.run(RedisCommand("INFO", ["commandstats"])).string ?? ""
        return calls("cmdstat_" + command, in: stats)
    }

    static func calls(_ command: String, in stats: String) -> Int {
        for line in stats.split(whereSeparator: \.isNewline) where line.hasPrefix(command + ":calls=") {
            return Int(line.dropFirst(command.count + 7).prefix { $0.isNumber }) ?? 0
        }
        return 0
    }
}
