import Foundation
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// The commit order's scripts on a real Redis (`CommitScripts.swift`): pages bounded by count
/// and bytes, the commits kept, a device's Welcome and where a page starts, a group's members.
@Suite(.serialized) struct CommitScriptTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()
    let pair = CommitConversation.direct(user: "ann", peer: "ben")

    func setUp(_ redis: RedisServerProcess) -> (RedisPool, MessageStore) {
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        return (pool, MessageStore(redis: pool, settings: StoreSettings()))
    }

    func store(_ store: MessageStore, _ conversation: CommitConversation, epoch: UInt64, _ bytes: [UInt8], user: String = "ann",
               welcome: CommitFlow.KeptWelcome? = nil, kept: Int = CommitRules.keptCommits,
               keptWelcomes: Int = CommitRules.maxKeptWelcomes, group: [UInt8] = Array("group".utf8)) async throws -> CommitFlow.Stored {
        try await store.storeCommit(conversation, user: user, epoch: epoch, entry: bytes, welcome: welcome, kept: kept,
                                    keptWelcomes: keptWelcomes, group: group, on: loop).get()
    }

    /// A Welcome, `value`, for each of `devices` ("USER/DEVICE"), into the epoch its commit leads to.
    func welcome(_ value: String, for devices: String...) -> CommitFlow.KeptWelcome {
        CommitFlow.KeptWelcome(value: Array(value.utf8),
                               devices: devices.map { .init(user: String($0.prefix { $0 != "/" }), field: $0) })
    }

    /// A hash's fields and values, or a sorted set's members and scores (`WITHSCORES`).
    func hash(_ pool: RedisPool, _ key: String) async throws -> [String: String] {
        pairs(try await pool.run(RedisCommand("HGETALL", [key])))
    }

    func scores(_ pool: RedisPool, _ key: String) async throws -> [String: String] {
        pairs(try await pool.run(RedisCommand("ZRANGE", [key, "0", "-1", "WITHSCORES"])))
    }

    private func pairs(_ reply: RedisValue) -> [String: String] {
        let flat = reply.array?.compactMap(\.string) ?? []
        return Dictionary(stride(from: 0, to: flat.count - 1, by: 2).map { (flat[$0], flat[$0 + 1]) }, uniquingKeysWith: { first, _ in first })
    }

    /// A device's Welcome as servers before one Welcome per commit kept it: "EPOCH:" and its own
    /// `StoredWelcome` under the device's field, scored by that epoch.
    func keepAsBefore(_ pool: RedisPool, _ messages: MessageStore, _ conversation: CommitConversation, _ field: String,
                      epoch: UInt64, _ value: String) async throws {
        _ = try await pool.run(RedisCommand("HSET", [messages.keys.welcomes(conversation), field, "\(epoch):\(value)"]))
        _ = try await pool.run(RedisCommand("ZADD", [messages.keys.welcomeEpochs(conversation), "\(epoch)", field]))
    }

    func fetch(_ store: MessageStore, _ conversation: CommitConversation, from: UInt64, user: String = "ann", device: String = "phone",
               join: Bool = false, maxCommits: Int = CommitRules.maxCommitsPerPage, kept: Int = CommitRules.keptCommits) async throws -> CommitFlow.Fetched {
        try await store.fetchCommits(conversation, user: user, welcomeField: join ? CommitRules.welcomeField(user: user, device: device) : nil, fromEpoch: from,
                                     maxCommits: maxCommits, budget: CommitRules.pageBudget, kept: kept, on: loop).get()
    }

    @Test func theFirstCommitForAnEpochWinsAndPagesAreBoundedByCountAndBytes() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        for epoch in UInt64(0)..<70 { #expect(try await store(messages, pair, epoch: epoch, [UInt8(epoch)]) == .stored(epoch: epoch + 1)) }
        #expect(try await store(messages, pair, epoch: 69, [1]) == .conflict(current: 70))
        #expect(try await store(messages, pair, epoch: 71, [1]) == .conflict(current: 70))
        guard case .page(70, nil, nil, let first, true) = try await fetch(messages, pair, from: 0) else { Issue.record("no first page"); return }
        #expect(first == (0..<64).map { [UInt8($0)] })
        #expect(try await fetch(messages, pair, from: 64) == .page(current: 70, welcome: nil, commits: (64..<70).map { [UInt8($0)] }, more: false))
        #expect(try await fetch(messages, pair, from: 70) == .page(current: 70, welcome: nil, commits: [], more: false))
        #expect(try await fetch(messages, pair, from: 500) == .page(current: 70, welcome: nil, commits: [], more: false))

        // Bytes: 16,000-byte commits, three to a page of 61,440; a page holds one however large.
        let big = CommitConversation.group("big")
        _ = try await pool.run(RedisCommand("HSET", [messages.keys.groupMembers("big"), "ann", "owner"]))
        for epoch in UInt64(0)..<5 { _ = try await store(messages, big, epoch: epoch, [UInt8](repeating: UInt8(epoch), count: 16_000)) }
        guard case .page(5, nil, nil, let three, true) = try await fetch(messages, big, from: 0) else { Issue.record("no page"); return }
        #expect(three.map(\.first) == [0, 1, 2])
        _ = try await store(messages, big, epoch: 5, [UInt8](repeating: 5, count: CommitRules.pageBudget + 1))
        guard case .page(6, nil, nil, let one, false) = try await fetch(messages, big, from: 5) else { Issue.record("no page"); return }
        #expect(one.count == 1)
        await pool.shutdown()
    }

    @Test func aWelcomeStagedForAMemberDeviceHidesNoCommitFromIt() async throws {
        // Any member may send a Welcome to any device of a member: ben's desk, a member at epoch 1,
        // gets a garbage one into epoch 3. Its fetches from 1 still hold every commit from 1.
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        let team = CommitConversation.group("team")
        _ = try await pool.run(RedisCommand("HSET", [messages.keys.groupMembers("team"), "ann", "owner", "ben", "member"]))
        #expect(try await store(messages, team, epoch: 0, [10]) == .stored(epoch: 1))
        #expect(try await store(messages, team, epoch: 1, [11]) == .stored(epoch: 2))
        #expect(try await store(messages, team, epoch: 2, [12], welcome: welcome("garbage", for: "ben/desk")) == .stored(epoch: 3))
        #expect(try await store(messages, team, epoch: 3, [13]) == .stored(epoch: 4))
        #expect(try await fetch(messages, team, from: 1, user: "ben", device: "desk")
            == .page(current: 4, welcome: nil, commits: [[11], [12], [13]], more: false))
        #expect(try await fetch(messages, team, from: 3, user: "ben", device: "desk") == .page(current: 4, welcome: nil, commits: [[13]], more: false))
        await pool.shutdown()
    }

    @Test func welcomesGoWithTheirCommitsAndPastTheMostKept() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        func fields() async throws -> [String] {
            try await pool.run(RedisCommand("HKEYS", [messages.keys.welcomes(pair)])).array?.compactMap(\.string).sorted() ?? []
        }
        // Three commits kept: a Welcome into epoch 1 can be handed out while commit 1 is kept.
        #expect(try await store(messages, pair, epoch: 0, [0], welcome: welcome("w", for: "ben/desk", "ann/laptop"), kept: 3) == .stored(epoch: 1))
        for epoch in UInt64(1)..<4 { _ = try await store(messages, pair, epoch: epoch, [UInt8(epoch)], kept: 3) }
        #expect(try await fields() == ["1", "ann/laptop", "ben/desk"], "epochs 1-3 kept: its Welcome still of use, kept once")
        _ = try await store(messages, pair, epoch: 4, [4], kept: 3)
        #expect(try await fields() == [], "commit 1 gone: the Welcome into 1 goes with it")
        #expect(try await pool.run(RedisCommand("EXISTS", [messages.keys.welcomeEpochs(pair)])).int == 0)

        // At most two devices' kept: the oldest goes first, and a Welcome once no device is left for it.
        _ = try await store(messages, pair, epoch: 5, [5], welcome: welcome("w", for: "ben/a"), keptWelcomes: 2)
        _ = try await store(messages, pair, epoch: 6, [6], welcome: welcome("w", for: "ben/b"), keptWelcomes: 2)
        #expect(try await fields() == ["6", "7", "ben/a", "ben/b"])
        _ = try await store(messages, pair, epoch: 7, [7], welcome: welcome("w", for: "ben/c", "ben/a"), keptWelcomes: 2)
        #expect(try await fields() == ["8", "ben/a", "ben/c"],
                "b, the oldest, went, and its Welcome; a's later Welcome replaced its first, which no device names now")
        _ = try await store(messages, pair, epoch: 8, [8], welcome: welcome("w", for: "ben/d"), keptWelcomes: 2)
        #expect(try await fields() == ["8", "9", "ben/c", "ben/d"], "a went; the Welcome into 8 stays for c")
        #expect(try await pool.run(RedisCommand("ZCARD", [messages.keys.welcomeEpochs(pair)])).int == 2)
        await pool.shutdown()
    }

    /// A commit adding several devices stores its Welcome once: each device's join is handed
    /// that one Welcome; before the commit is stored none is (a refused commit stores nothing).
    @Test func oneWelcomeStoredOnceIsHandedToEachDeviceItAdds() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        let team = CommitConversation.group("team")
        _ = try await pool.run(RedisCommand("HSET", [messages.keys.groupMembers("team"), "ann", "owner", "ben", "member", "cat", "member"]))
        #expect(try await store(messages, team, epoch: 0, [10]) == .stored(epoch: 1))
        let three = welcome("one", for: "ben/desk", "ben/phone", "cat/laptop")
        #expect(try await store(messages, team, epoch: 0, [11], welcome: three) == .conflict(current: 1), "lost: nothing stored")
        for device in ["ben/desk", "ben/phone", "cat/laptop"] {
            let (user, name) = (String(device.prefix { $0 != "/" }), String(device.drop { $0 != "/" }.dropFirst()))
            #expect(try await fetch(messages, team, from: 0, user: user, device: name, join: true) == .page(current: 1, welcome: nil, commits: [[10]], more: false))
        }
        #expect(try await store(messages, team, epoch: 1, [11], welcome: three) == .stored(epoch: 2))
        #expect(try await store(messages, team, epoch: 2, [12]) == .stored(epoch: 3))
        for device in ["ben/desk", "ben/phone", "cat/laptop"] {
            let (user, name) = (String(device.prefix { $0 != "/" }), String(device.drop { $0 != "/" }.dropFirst()))
            #expect(try await fetch(messages, team, from: 0, user: user, device: name, join: true)
                == .page(current: 3, welcome: Array("one".utf8), commits: [[12]], more: false), "\(device)")
        }
        #expect(try await pool.run(RedisCommand("HGET", [messages.keys.welcomes(team), "2"])).string == "one", "the Welcome kept once")
        #expect(try await pool.run(RedisCommand("HGET", [messages.keys.welcomes(team), "ben/desk"])).string == "2", "each device names it")
        // A device's Welcome kept before one Welcome per commit ("EPOCH:" and its own) is still handed out.
        _ = try await pool.run(RedisCommand("HSET", [messages.keys.welcomes(team), "cat/tablet", "2:own"]))
        #expect(try await fetch(messages, team, from: 0, user: "cat", device: "tablet", join: true)
            == .page(current: 3, welcome: Array("own".utf8), commits: [[12]], more: false))
        await pool.shutdown()
    }

    /// A device's Welcome kept before one Welcome per commit ("EPOCH:" and its own) names no
    /// shared Welcome: replaced by a new add of the device, the submit stores as any other, the
    /// new Welcome is kept once and the other old one still handed out. (Taken for an epoch, its
    /// value failed the script's ZCOUNT after the commit and the epoch were written.)
    @Test func aWelcomeKeptAsBeforeReplacedByANewAddOfItsDevice() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        let team = CommitConversation.group("team")
        _ = try await pool.run(RedisCommand("HSET", [messages.keys.groupMembers("team"), "ann", "owner", "cat", "member"]))
        for epoch in UInt64(0)..<2 { #expect(try await store(messages, team, epoch: epoch, [10 + UInt8(epoch)]) == .stored(epoch: epoch + 1)) }
        try await keepAsBefore(pool, messages, team, "cat/tablet", epoch: 2, "own")
        try await keepAsBefore(pool, messages, team, "cat/phone", epoch: 2, "mine")

        #expect(try await store(messages, team, epoch: 2, [12], welcome: welcome("new", for: "cat/tablet")) == .stored(epoch: 3))
        #expect(try await hash(pool, messages.keys.welcomes(team)) == ["3": "new", "cat/tablet": "3", "cat/phone": "2:mine"])
        #expect(try await scores(pool, messages.keys.welcomeEpochs(team)) == ["cat/tablet": "3", "cat/phone": "2"])
        #expect(try await fetch(messages, team, from: 0, user: "cat", device: "tablet", join: true)
            == .page(current: 3, welcome: Array("new".utf8), commits: [], more: false))
        #expect(try await fetch(messages, team, from: 0, user: "cat", device: "phone", join: true)
            == .page(current: 3, welcome: Array("mine".utf8), commits: [[12]], more: false))

        // Later submits: the other old one replaced too, and one with no Welcome.
        #expect(try await store(messages, team, epoch: 3, [13], welcome: welcome("next", for: "cat/phone")) == .stored(epoch: 4))
        #expect(try await store(messages, team, epoch: 4, [14]) == .stored(epoch: 5))
        #expect(try await hash(pool, messages.keys.welcomes(team)) == ["3": "new", "4": "next", "cat/tablet": "3", "cat/phone": "4"])
        #expect(try await scores(pool, messages.keys.welcomeEpochs(team)) == ["cat/tablet": "3", "cat/phone": "4"])
        await pool.shutdown()
    }

    /// A device's Welcome kept before one Welcome per commit, dropped with the commits no
    /// longer kept: the submit that drops it stores as any other, and the later Welcome goes
    /// when no device names it.
    @Test func aWelcomeKeptAsBeforeDroppedPastTheCommitsKept() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        // Past the commits kept (three): a Welcome into 1 goes once commit 1 does (the submit on 4).
        #expect(try await store(messages, pair, epoch: 0, [0], kept: 3) == .stored(epoch: 1))
        try await keepAsBefore(pool, messages, pair, "ben/desk", epoch: 1, "old")
        #expect(try await store(messages, pair, epoch: 1, [1], welcome: welcome("w", for: "ben/phone"), kept: 3) == .stored(epoch: 2))
        for epoch in UInt64(2)..<4 { #expect(try await store(messages, pair, epoch: epoch, [UInt8(epoch)], kept: 3) == .stored(epoch: epoch + 1)) }
        #expect(try await hash(pool, messages.keys.welcomes(pair)) == ["2": "w", "ben/phone": "2", "ben/desk": "1:old"])
        #expect(try await store(messages, pair, epoch: 4, [4], kept: 3) == .stored(epoch: 5))
        #expect(try await hash(pool, messages.keys.welcomes(pair)) == ["2": "w", "ben/phone": "2"])
        #expect(try await scores(pool, messages.keys.welcomeEpochs(pair)) == ["ben/phone": "2"])
        #expect(try await store(messages, pair, epoch: 5, [5], kept: 3) == .stored(epoch: 6), "commit 2 gone: its Welcome with it")
        #expect(try await hash(pool, messages.keys.welcomes(pair)) == [:])
        await pool.shutdown()
    }

    /// A device's Welcome kept before one Welcome per commit, dropped past the most Welcomes
    /// kept (one here: the oldest goes first): the submit that drops it stores as any other,
    /// and the later Welcome goes when no device names it.
    @Test func aWelcomeKeptAsBeforeDroppedPastTheMostKept() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        let other = CommitConversation.direct(user: "ann", peer: "cat")
        #expect(try await store(messages, other, epoch: 0, [0], keptWelcomes: 1) == .stored(epoch: 1))
        try await keepAsBefore(pool, messages, other, "cat/desk", epoch: 1, "old")
        #expect(try await store(messages, other, epoch: 1, [1], welcome: welcome("w", for: "cat/phone"), keptWelcomes: 1) == .stored(epoch: 2))
        #expect(try await hash(pool, messages.keys.welcomes(other)) == ["2": "w", "cat/phone": "2"])
        #expect(try await store(messages, other, epoch: 2, [2], welcome: welcome("x", for: "cat/laptop"), keptWelcomes: 1) == .stored(epoch: 3))
        #expect(try await hash(pool, messages.keys.welcomes(other)) == ["3": "x", "cat/laptop": "3"], "phone dropped, and the Welcome into 2 it alone named")
        #expect(try await scores(pool, messages.keys.welcomeEpochs(other)) == ["cat/laptop": "3"])
        await pool.shutdown()
    }

    /// A Welcome for no device is not kept: nothing would name it, so nothing would drop it.
    @Test func aWelcomeForNoDeviceIsNotKept() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        #expect(try await store(messages, pair, epoch: 0, [0], welcome: CommitFlow.KeptWelcome(value: Array("w".utf8), devices: [])) == .stored(epoch: 1))
        #expect(try await pool.run(RedisCommand("EXISTS", [messages.keys.welcomes(pair), messages.keys.welcomeEpochs(pair)])).int == 0)
        await pool.shutdown()
    }

    @Test func anEpochThatWentBackNeverOverwritesAStoredCommit() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        for epoch in UInt64(0)..<3 { _ = try await store(messages, pair, epoch: epoch, [UInt8(epoch)]) }
        // A failover lost the epoch's last writes, not the commits'.
        _ = try await pool.run(RedisCommand("SET", [messages.keys.commitEpoch(pair), "1"]))
        #expect(try await store(messages, pair, epoch: 1, [9]) == .conflict(current: 3))
        #expect(try await fetch(messages, pair, from: 0) == .page(current: 3, welcome: nil, commits: [[0], [1], [2]], more: false))
        #expect(try await store(messages, pair, epoch: 3, [3]) == .stored(epoch: 4))
        await pool.shutdown()
    }

    @Test func aCommitTheReplicasDidNotConfirmIsNotAnsweredAsStored() async throws {
        // One Redis and no replica: WAIT 1 counts none within its timeout.
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        var settings = StoreSettings()
        settings.minReplicas = 1
        settings.replicaTimeoutMillis = 50
        let messages = MessageStore(redis: pool, settings: settings)
        #expect(try await store(messages, pair, epoch: 0, [1]) == .unreplicated(epoch: 1, confirmed: 0))
        #expect(try await store(messages, pair, epoch: 0, [2]) == .conflict(current: 1), "the master has it")
        await pool.shutdown()
    }

    @Test func aRetryOfTheSameCommitIsStoredAgainNotAConflict() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        func entry(_ commit: [UInt8], device: String = "phone", at time: Int64) throws -> [UInt8] {
            var stored = Simp_StoredCommit()
            stored.epoch = 0
            stored.commit = Data(commit)
            stored.fromUser = "ann"
            stored.fromDevice = device
            stored.serverTime = time
            return try stored.serializedBytes()
        }
        #expect(try await store(messages, pair, epoch: 0, try entry([1, 2], at: 1_800_000_000_000)) == .stored(epoch: 1))
        #expect(try await store(messages, pair, epoch: 1, [9]) == .stored(epoch: 2))
        #expect(try await store(messages, pair, epoch: 0, try entry([1, 2], at: 1_800_000_009_999)) == .stored(epoch: 1), "a retry, later")
        #expect(try await store(messages, pair, epoch: 0, try entry([1, 2], at: 5)) == .stored(epoch: 1), "a retry, a shorter time")
        #expect(try await store(messages, pair, epoch: 0, try entry([1, 3], at: 1_800_000_000_000)) == .conflict(current: 2))
        #expect(try await store(messages, pair, epoch: 0, try entry([1], at: 1_800_000_000_000)) == .conflict(current: 2), "a prefix is not the same")
        #expect(try await store(messages, pair, epoch: 0, try entry([1, 2], device: "desk", at: 1_800_000_000_000)) == .conflict(current: 2))
        guard case .page(2, nil, nil, let commits, false) = try await fetch(messages, pair, from: 0) else { Issue.record("no page"); return }
        #expect(commits == [try entry([1, 2], at: 1_800_000_000_000), [9]], "the first stored, nothing overwritten")
        await pool.shutdown()
    }

    @Test func theLastEpochsAreCountedExactly() async throws {
        // The scripts count in Lua doubles: exact up to CommitRules.maxEpoch, which no request passes.
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        let last = CommitRules.maxEpoch - 1
        _ = try await pool.run(RedisCommand("SET", [messages.keys.commitEpoch(pair), "\(last - 1)"]))
        #expect(try await store(messages, pair, epoch: last - 1, [1]) == .stored(epoch: last))
        #expect(try await store(messages, pair, epoch: last, [2], welcome: welcome("w", for: "ben/desk")) == .stored(epoch: CommitRules.maxEpoch))
        #expect(try await store(messages, pair, epoch: last, [3]) == .conflict(current: CommitRules.maxEpoch))
        #expect(try await fetch(messages, pair, from: last - 1) == .page(current: CommitRules.maxEpoch, welcome: nil, commits: [[1], [2]], more: false))
        #expect(try await pool.run(RedisCommand("GET", [messages.keys.commitEpoch(pair)])).string == "\(CommitRules.maxEpoch)")
        // The Welcome's field and its device's value are the script's new epoch, written in digits.
        #expect(try await hash(pool, messages.keys.welcomes(pair)) == ["\(CommitRules.maxEpoch)": "w", "ben/desk": "\(CommitRules.maxEpoch)"])
        #expect(try await fetch(messages, pair, from: 0, user: "ben", device: "desk", join: true)
            == .page(current: CommitRules.maxEpoch, welcome: Array("w".utf8), commits: [], more: false))
        await pool.shutdown()
    }

    @Test func theFirstCommitStoredRecordsItsGroupAndACommitOfAnotherStoresNothing() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        let (ours, theirs) = (Array("ours".utf8), Array("theirs".utf8))
        // A key left from before (a group deleted by a node that did not know it) does not bind
        // the commit on epoch 0: that one makes the group.
        _ = try await pool.run(RedisCommand("SET", [messages.keys.commitGroup(pair), "stale"]))
        #expect(try await store(messages, pair, epoch: 0, [1], group: ours) == .stored(epoch: 1))
        #expect(try await pool.run(RedisCommand("GET", [messages.keys.commitGroup(pair)])).bytes == ours)
        #expect(try await store(messages, pair, epoch: 1, [2], welcome: welcome("w", for: "ben/desk"), group: theirs) == .otherGroup)
        #expect(try await pool.run(RedisCommand("GET", [messages.keys.commitEpoch(pair)])).string == "1", "nothing stored")
        #expect(try await pool.run(RedisCommand("EXISTS", [messages.keys.welcomes(pair)])).int == 0, "nor its Welcome")
        #expect(try await pool.run(RedisCommand("GET", [messages.keys.commitGroup(pair)])).bytes == ours, "nor its group")
        // A conflict is answered as one whatever the group (the epoch is checked first), and the
        // conversation's own group goes on.
        #expect(try await store(messages, pair, epoch: 0, [3], group: theirs) == .conflict(current: 1))
        #expect(try await store(messages, pair, epoch: 1, [2], group: ours) == .stored(epoch: 2))
        // A conversation whose group was never recorded (commits stored before the check) takes
        // the next commit's.
        _ = try await pool.run(RedisCommand("DEL", [messages.keys.commitGroup(pair)]))
        #expect(try await store(messages, pair, epoch: 2, [4], group: theirs) == .stored(epoch: 3))
        #expect(try await pool.run(RedisCommand("GET", [messages.keys.commitGroup(pair)])).bytes == theirs)
        await pool.shutdown()
    }

    @Test func onlyTheLastCommitsAreKeptAndAFetchStartsAtTheOldest() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        for epoch in UInt64(0)..<5 { _ = try await store(messages, pair, epoch: epoch, [UInt8(epoch)], kept: 3) }
        #expect(try await pool.run(RedisCommand("HLEN", [messages.keys.commits(pair)])).int == 3)
        #expect(try await fetch(messages, pair, from: 0, kept: 3) == .page(current: 5, welcome: nil, commits: [[2], [3], [4]], more: false))
        await pool.shutdown()
    }

    @Test func aDevicesWelcomeStartsItsPageAndAGroupsMembersAreChecked() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = setUp(redis)
        let team = CommitConversation.group("team")
        #expect(try await store(messages, team, epoch: 0, [1]) == .noSuchGroup)
        #expect(try await fetch(messages, team, from: 0) == .noSuchGroup)
        _ = try await pool.run(RedisCommand("HSET", [messages.keys.groupMembers("team"), "ann", "owner", "ben", "member"]))
        #expect(try await store(messages, team, epoch: 0, [1], user: "cat") == .notAMember)
        #expect(try await fetch(messages, team, from: 0, user: "cat") == .notAMember)
        #expect(try await store(messages, team, epoch: 0, [1], welcome: welcome("w", for: "ben/desk", "cat/phone")) == .welcomeToNonMember("cat"))
        #expect(try await pool.run(RedisCommand("EXISTS", [messages.keys.commits(team), messages.keys.welcomes(team)])).int == 0,
                "a refused commit stores nothing")

        #expect(try await store(messages, team, epoch: 0, [10], welcome: welcome("first", for: "ben/desk")) == .stored(epoch: 1))
        #expect(try await store(messages, team, epoch: 1, [11], user: "ben") == .stored(epoch: 2))
        #expect(try await store(messages, team, epoch: 2, [12]) == .stored(epoch: 3))
        // ben's desk joins at 1: a join starts at its Welcome, whatever the epoch asked; without
        // join a page starts at the epoch asked and carries no Welcome.
        #expect(try await fetch(messages, team, from: 0, user: "ben", device: "desk", join: true)
            == .page(current: 3, welcome: Array("first".utf8), commits: [[11], [12]], more: false))
        #expect(try await fetch(messages, team, from: 2, user: "ben", device: "desk") == .page(current: 3, welcome: nil, commits: [[12]], more: false))
        #expect(try await fetch(messages, team, from: 0, user: "ben", device: "desk") == .page(current: 3, welcome: nil, commits: [[10], [11], [12]], more: false))
        #expect(try await fetch(messages, team, from: 0, user: "ben", device: "tablet", join: true)
            == .page(current: 3, welcome: nil, commits: [[10], [11], [12]], more: false), "no Welcome: from the epoch asked")
        // A later Welcome replaces it.
        #expect(try await store(messages, team, epoch: 3, [13], welcome: welcome("second", for: "ben/desk")) == .stored(epoch: 4))
        #expect(try await fetch(messages, team, from: 2, user: "ben", device: "desk", join: true) == .page(current: 4, welcome: Array("second".utf8), commits: [], more: false))
        #expect(try await pool.run(RedisCommand("HEXISTS", [messages.keys.welcomes(team), "1"])).int == 0, "the first, named by no device now, went")
        await pool.shutdown()
    }
}
