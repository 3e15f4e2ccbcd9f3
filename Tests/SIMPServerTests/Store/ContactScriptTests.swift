import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// The recipient's filters in the store script, and the contact steps, on a real Redis.
@Suite(.serialized) struct ContactScriptTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()

    func setUp(_ redis: RedisServerProcess) async throws -> (RedisPool, MessageStore) {
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        let messages = MessageStore(redis: pool, settings: StoreSettings())
        for user in ["ann", "bob", "cat"] {
            _ = try await messages.createAccount(user: user, salt: [1], hash: [2], kdf: "test", on: loop).get()
        }
        return (pool, messages)
    }

    func message(_ id: String, from: String = "ann") -> StoreRequest {
        StoreRequest(from: from, id: id, to: "bob", bytes: Array("message \(id)".utf8))
    }

    func outcomes(_ store: MessageStore, _ requests: [StoreRequest]) async throws -> [String] {
        try await store.store(requests, on: loop).get().map { outcome in
            if case .stored(let seq, _) = outcome { "stored \(seq)" } else { "\(outcome)" }
        }
    }

    @Test func aBlockedSendersMessageIsRefusedAndKeptAsAFailure() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = try await setUp(redis)
        _ = try await messages.contactStep(.block, owner: "bob", peer: "ann", on: loop).get()
        // One call: ann is refused, cat is not, and a notice from ann is stored.
        var notice = message("n1")
        notice.notice = true
        #expect(try await outcomes(messages, [message("a1"), message("c1", from: "cat"), notice]) == ["notAContact", "stored 1", "stored 2"])
        // A resend is answered the same even after the block is lifted: its sender may not have heard.
        _ = try await messages.contactStep(.unblock, owner: "bob", peer: "ann", on: loop).get()
        #expect(try await outcomes(messages, [message("a1"), message("a2")]) == ["failedBefore(code: SIMPCore.Simp_ErrorCode.notAContact)", "stored 3"])
        #expect(try await pool.run(RedisCommand("ZCARD", [messages.keys.inbox("bob")])).int == 3)
        await pool.shutdown()
    }

    /// A KEYS_CHANGED notice about a user the recipient blocked is not stored (it is told
    /// nothing of that user, as of its presence); contacts-only does not refuse one (a peer's
    /// new device must reach a conversation with a non-contact too), nor does a block of
    /// someone else. Until 2026-12-01 every notice went past the recipient's blocks.
    @Test func aKeysNoticeAboutABlockedUserIsNotStored() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = try await setUp(redis)
        func keysNotices(_ ids: [UInt64], of users: [String]) async throws -> [String] {
            try await outcomes(messages, zip(ids, users).map { DeliveryEngine.keysNotice(of: $1, to: "bob", id: $0, nowMillis: 1) })
        }
        _ = try await messages.contactStep(.block, owner: "bob", peer: "ann", on: loop).get()
        #expect(try await keysNotices([1, 2], of: ["ann", "cat"]) == ["notAContact", "stored 1"])
        _ = try await messages.settings(of: "bob", changing: [("contacts-only", "on")], on: loop).get()
        #expect(try await keysNotices([3], of: ["cat"]) == ["stored 2"], "cat is no contact of bob's")
        _ = try await messages.contactStep(.unblock, owner: "bob", peer: "ann", on: loop).get()
        #expect(try await keysNotices([4], of: ["ann"]) == ["stored 3"])
        // bob's own notice: his blocks are of others.
        _ = try await messages.contactStep(.block, owner: "bob", peer: "ann", on: loop).get()
        #expect(try await outcomes(messages, [DeliveryEngine.keysNotice(of: "bob", to: "bob", id: 5, nowMillis: 1)]) == ["stored 4"])
        #expect(try await pool.run(RedisCommand("LLEN", [messages.keys.history(of: "bob", with: "cat")])).int == 0, "never in a history")
        await pool.shutdown()
    }

    /// A circle whose read fails (here a key of the wrong type: Redis answers WRONGTYPE) is an
    /// error, not an empty circle: before 2026-12-01 a presence or key change then told nobody
    /// and said nothing, and `/presence` answered an empty list.
    @Test func aCircleWhoseReadFailsIsAnErrorNotEmpty() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = try await setUp(redis)
        _ = try await messages.contactStep(.receive, owner: "ann", peer: "bob", on: loop).get()
        _ = try await messages.contactStep(.accept, owner: "ann", peer: "bob", on: loop).get()
        #expect(try await messages.presenceCircle(of: "ann", on: loop).get().users == ["bob"])
        _ = try await pool.run(RedisCommand("SET", [messages.keys.blocked("ann"), "not a set"]))
        await #expect(throws: RedisError.self) { try await messages.presenceCircle(of: "ann", on: loop).get() }
        _ = try await pool.run(RedisCommand("SET", [messages.keys.presence("bob"), "not a hash"]))
        await #expect(throws: RedisError.self) { try await messages.nodes(of: ["bob"], watching: "ann", on: loop).get() }
        await pool.shutdown()
    }

    /// A key change's circle holds the peers of the user's encrypted one-to-one conversations
    /// after its contacts (less those it blocked); presence's does not.
    @Test func aKeyChangesCircleHoldsTheUsersPeers() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = try await setUp(redis)
        _ = try await pool.run(RedisCommand("SADD", [messages.keys.directPeers("ann"), "bob", "cat"]))
        #expect(try await messages.presenceCircle(of: "ann", on: loop).get().users.isEmpty)
        #expect(try await messages.presenceCircle(of: "ann", withPeers: true, on: loop).get().users == ["bob", "cat"])
        _ = try await messages.contactStep(.block, owner: "ann", peer: "cat", on: loop).get()
        #expect(try await messages.presenceCircle(of: "ann", withPeers: true, on: loop).get().users == ["bob"])
        await pool.shutdown()
    }

    @Test func contactsOnlyTakesContactsAndTheSendersOwnCopies() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = try await setUp(redis)
        _ = try await messages.settings(of: "bob", changing: [("contacts-only", "on")], on: loop).get()
        _ = try await messages.contactStep(.receive, owner: "bob", peer: "cat", on: loop).get()
        #expect(try await outcomes(messages, [message("c1", from: "cat")]) == ["notAContact"], "a request is not a contact")
        _ = try await messages.contactStep(.accept, owner: "bob", peer: "cat", on: loop).get()
        #expect(try await outcomes(messages, [message("c2", from: "cat"), message("a1")]) == ["stored 1", "notAContact"])
        // bob's copy of what he sent ann, in his own inbox, is his own.
        let copy = DeliveryEngine.senderCopy(of: StoreRequest(from: "bob", id: "b1", to: "ann", bytes: [1]), answers: [])
        #expect(try await messages.store([copy], on: loop).get().first?.isStored == true)
        await pool.shutdown()
    }

    @Test func aDeviceOfAFilteringUserRegistersAsFiltered() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = try await setUp(redis)
        func register() async throws -> Bool {
            let registration = try await messages.registerDevice(user: "bob", device: "phone", nowMillis: 1, issuedMillis: 1, on: loop).get()
            guard case .registered(_, _, _, let filtered) = registration else { return false }
            return filtered
        }
        #expect(try await register() == false)
        _ = try await messages.contactStep(.block, owner: "bob", peer: "ann", on: loop).get()
        #expect(try await register() == true)
        _ = try await messages.contactStep(.unblock, owner: "bob", peer: "ann", on: loop).get()
        #expect(try await register() == false)
        _ = try await messages.settings(of: "bob", changing: [("contacts-only", "on")], on: loop).get()
        #expect(try await register() == true)
        await pool.shutdown()
    }

    @Test func eachStepChangesOnlyItsOwnersRecords() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = try await setUp(redis)
        func step(_ step: ContactFlow.Step, _ owner: String, _ peer: String) async throws -> ContactFlow.Result {
            try await messages.contactStep(step, owner: owner, peer: peer, on: loop).get()
        }
        #expect(try await step(.ask, "ann", "bob").status == 0)
        let received = try await step(.receive, "bob", "ann")
        #expect(received.status == 1 && received.contacts == [Simp_Contact(name: "ann", state: "received")])
        #expect(try await step(.receive, "bob", "ann").status == 4, "received before")
        #expect(try await step(.sent, "ann", "bob").contacts == [Simp_Contact(name: "bob", state: "sent")])
        #expect(try await step(.ask, "bob", "ann").status == 1, "asking back accepts")
        #expect(try await step(.accept, "bob", "ann").contacts == [Simp_Contact(name: "ann", state: "contact")])
        #expect(try await step(.contact, "ann", "bob").contacts == [Simp_Contact(name: "bob", state: "contact")])
        #expect(try await step(.sent, "ann", "bob").contacts == [Simp_Contact(name: "bob", state: "contact")], "never back to sent")
        #expect(try await step(.ask, "ann", "bob").status == 2)
        #expect(try await step(.receive, "nobody", "ann").status == -3)
        #expect(try await step(.remove, "ann", "cat").status == -4)
        let blocked = try await step(.block, "ann", "cat")
        #expect(blocked.blocked == ["cat"])
        #expect(try await step(.ask, "ann", "cat").status == -1)
        await pool.shutdown()
    }
}

extension ContactScriptTests {
    @Test func onlyMarksNamingAMessageOfTheInboxAtItsSeqHold() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, messages) = try await setUp(redis)
        #expect(try await outcomes(messages, [message("a1"), message("c1", from: "cat")]) == ["stored 1", "stored 2"])
        func mark(_ from: String, _ id: String, _ seq: UInt64) -> Simp_ReadMark {
            var mark = Simp_ReadMark()
            mark.fromUser = from
            mark.messageID = id
            mark.seq = seq
            return mark
        }
        let marks = [mark("ann", "a1", 1), mark("ann", "a1", 2), mark("cat", "c1", 2), mark("cat", "zz", 3), mark("ann", "c1", 2)]
        let genuine = try await messages.genuineReads(marks, reader: "bob", on: loop).get()
        #expect(genuine?.marks.map { "\($0.fromUser) \($0.messageID)" } == ["ann a1", "cat c1"])
        _ = try await messages.settings(of: "bob", changing: [("read-receipts", "off")], on: loop).get()
        #expect(try await messages.genuineReads(marks, reader: "bob", on: loop).get() == nil, "bob turned them off")
        _ = try await messages.settings(of: "ann", changing: [("read-receipts", "off")], on: loop).get()
        #expect(try await messages.takingReadReceipts(["ann", "cat"], from: "bob", on: loop).get() == ["cat"])
        _ = try await messages.contactStep(.block, owner: "cat", peer: "bob", on: loop).get()
        #expect(try await messages.takingReadReceipts(["ann", "cat"], from: "bob", on: loop).get().isEmpty, "nor from a user they blocked")
        await pool.shutdown()
    }
}
