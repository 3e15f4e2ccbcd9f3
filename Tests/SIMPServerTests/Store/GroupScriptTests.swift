import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// The group scripts on a real Redis: one order per group, copies into a member's inbox that
/// never run out of that order, membership rules.
@Suite(.serialized) struct GroupScriptTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()

    /// A private Redis with alice, bob and carol.
    func start() async throws -> (RedisServerProcess, RedisPool, MessageStore) {
        let redis = try RedisServerProcess()
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        let store = MessageStore(redis: pool, settings: StoreSettings())
        for user in ["alice", "bob", "carol"] {
            _ = try await store.createAccount(user: user, salt: [1], hash: [2], kdf: "test", on: loop).get()
        }
        return (redis, pool, store)
    }

    func message(_ id: String, from: String = "alice") -> StoreRequest {
        var message = Simp_Message()
        message.messageID = id
        message.fromUser = from
        message.toUser = "#team"
        message.content = "text \(id)"
        return StoreRequest(from: from, id: id, to: "#team", bytes: try! message.serializedBytes())
    }

    func summary(_ outcomes: [GroupStoreOutcome]) -> [String] {
        outcomes.map { outcome in
            switch outcome {
            case .stored(let seq, _): "stored \(seq)"
            case .duplicate(let seq, let entry): "duplicate \(seq) \(entry.isEmpty ? "without" : "with") entry"
            case .noSuchGroup: "no group"
            case .notAMember: "not a member"
            case .notStored: "not stored"
            case .unavailable(let error): "unavailable \(error)"
            }
        }
    }

    @Test func messagesAreNumberedInTheGroupsOrderOnceEach() async throws {
        let (redis, pool, store) = try await start()
        defer { redis.stop() }
        do {
            #expect(summary(try await store.storeInGroup("team", [message("a")], on: loop).get().outcomes) == ["no group"])
            let made = try await store.changeGroup(.create, group: "team", by: "alice", users: [("alice", [1]), ("bob", [2])],
                                                   maxMembers: 10, on: loop).get()
            guard case .changed(let changes, let members, _) = made else { throw TestSupportError("\(made)") }
            #expect(changes.map(\.seq) == [1, 2] && members.map(\.name) == ["alice", "bob"])
            let stored = try await store.storeInGroup("team", [message("a"), message("b"), message("a"), message("c", from: "carol")],
                                                      on: loop).get()
            #expect(summary(stored.outcomes) == ["stored 3", "stored 4", "duplicate 3 with entry", "not a member"])
            #expect(Set(stored.members) == ["alice", "bob"])
            var late = message("z")
            late.answerOnly = true
            #expect(summary(try await store.storeInGroup("team", [late], on: loop).get().outcomes) == ["not stored"])
            let log = try await store.groupLog("team", after: 0, upTo: 10, on: loop).get()
            #expect(log.map(\.seq) == [1, 2, 3, 4])
            #expect(try Simp_Message(serializedBytes: log[2].bytes).groupSeq == 3)
        }
        await pool.shutdown()
    }

    /// A sender's ids in a group live at least the id TTL, and are renewed only once below it
    /// (a read on every message, a write once an hour of a day).
    @Test func aSendersGroupIdsLiveAtLeastTheirTTLAndAreNotRenewedOnEveryMessage() async throws {
        let (redis, pool, store) = try await start()
        defer { redis.stop() }
        do {
            _ = try await store.changeGroup(.create, group: "team", by: "alice", users: [("alice", [1]), ("bob", [2])],
                                            maxMembers: 10, on: loop).get()
            let ids = store.keys.groupIDs("team", from: "alice")
            let ttl = Int64(StoreSettings().messageIDTTLSeconds)
            func remaining() async throws -> Int64 { try await pool.run(RedisCommand("TTL", [ids])).int ?? -1 }

            _ = try await store.storeInGroup("team", [message("a")], on: loop).get()
            #expect((ttl + 1...ttl + ttl / 24).contains(try await remaining()), "set to the TTL and 1/24 of it")
            _ = try await pool.run(RedisCommand("EXPIRE", [ids, "10"]))
            _ = try await store.storeInGroup("team", [message("b")], on: loop).get()
            #expect((ttl + 1...ttl + ttl / 24).contains(try await remaining()), "renewed: it had fallen below the TTL")
            let expires = try await CommandStats.calls("expire", on: pool)
            _ = try await store.storeInGroup("team", [message("c")], on: loop).get()
            #expect(try await CommandStats.calls("expire", on: pool) == expires, "well above the TTL: not renewed")
        }
        await pool.shutdown()
    }

    /// A copy that would skip an entry stops there: the caller fills the gap from the log.
    @Test func aMembersCopiesNeverRunOutOfTheGroupsOrder() async throws {
        let (redis, pool, store) = try await start()
        defer { redis.stop() }
        do {
            func entry(_ seq: UInt64, _ kind: GroupEntry.Kind = .other) -> GroupEntry {
                GroupEntry(seq: seq, kind: kind, bytes: Array("e\(seq)".utf8))
            }
            func copy(_ entries: [GroupEntry], floor: UInt64? = nil) async throws -> MessageStore.MemberCopy {
                try await store.deliver(group: "team", [("bob", entries)], floors: floor.map { ["bob": $0] } ?? [:], on: loop).get()[0].get()
            }
            // bob joins at 3: his first entry may follow a gap.
            var made = try await copy([entry(3, .added), entry(4)])
            #expect(made == .init(gap: false, mark: 4, isMember: true, seqs: [1, 2], nodes: []))
            // 6 before 5 (two nodes at once): stops, nothing copied.
            made = try await copy([entry(6)])
            #expect(made.gap && made.mark == 4 && made.seqs == [0])
            // The gap filled: 5 and 6 copied, 4 again skipped.
            made = try await copy([entry(4), entry(5), entry(6)])
            #expect(made == .init(gap: false, mark: 6, isMember: true, seqs: [0, 3, 4], nodes: []))
            // Removed at 7: the message at 8 is not his, next in the order though it is.
            made = try await copy([entry(7, .removed)])
            #expect(!made.isMember)
            made = try await copy([entry(8)])
            #expect(made.gap && made.seqs == [0], "nothing from while he is out")
            // Added at 10 after that removal (its `after`): 8 and 9 were not his.
            made = try await copy([GroupEntry(seq: 10, kind: .added, after: 7, bytes: Array("e10".utf8)), entry(11)], floor: 20)
            #expect(made == .init(gap: false, mark: 11, isMember: true, seqs: [21, 22], nodes: []), "numbering above the floor")
            let inbox = try await pool.run(RedisCommand("ZRANGE", [store.keys.inbox("bob"), 0, -1])).array?.compactMap(\.string) ?? []
            // Each with its inbox seq appended (field 10: a 'P' tag byte).
            #expect(inbox.map { String($0.prefix { $0 != "P" }) } == ["e3", "e4", "e5", "e6", "e7", "e10", "e11"])
            #expect(try await store.groups(of: "bob", on: loop).get() == ["team"])
            // Out again at 12 and back at 15, while a copy of an earlier membership (added at 13,
            // removed at 14) has not landed: the add at 15 waits for it.
            made = try await copy([entry(12, .removed)])
            made = try await copy([GroupEntry(seq: 15, kind: .added, after: 14, bytes: Array("e15".utf8))])
            #expect(made.gap && made.mark == 12, "an add may not pass over a membership not copied yet")
            made = try await copy([GroupEntry(seq: 13, kind: .added, after: 12, bytes: Array("e13".utf8)), entry(14, .removed),
                                   GroupEntry(seq: 15, kind: .added, after: 14, bytes: Array("e15".utf8))])
            #expect(!made.gap && made.mark == 15 && made.isMember)
            let nobody = try await store.deliver(group: "team", [("nobody", [entry(1)])], floors: [:], on: loop).get()[0].get()
            #expect(nobody.seqs.isEmpty)
        }
        await pool.shutdown()
    }

    @Test func onlyOwnersAndAdminsChangeMembers() async throws {
        let (redis, pool, store) = try await start()
        defer { redis.stop() }
        do {
            func change(_ action: MessageStore.GroupChangeAction, by: String, _ users: [String], max: Int = 3) async throws -> String {
                let result = try await store.changeGroup(action, group: "team", by: by, users: users.map { ($0, [1]) }, maxMembers: max, on: loop).get()
                switch result {
                case .refused(let code): return code.name
                case .changed(let changes, let members, _):
                    return "\(changes.map { "\($0.seq)\($0.removes ? "-" : "+")\($0.user)" }) \(members.map { "\($0.name):\($0.role)" })"
                }
            }
            #expect(try await change(.add, by: "alice", ["bob"]) == "no_such_group")
            #expect(try await change(.create, by: "alice", ["alice", "bob"]) == #"["1+alice", "2+bob"] ["alice:owner", "bob:member"]"#)
            #expect(try await change(.create, by: "bob", ["bob"]) == "group_exists")
            #expect(try await change(.add, by: "bob", ["carol"]) == "not_group_admin")
            #expect(try await change(.add, by: "carol", ["carol"]) == "not_a_member")
            #expect(try await change(.add, by: "alice", ["carol", "dave"]) == "group_full")
            #expect(try await change(.admin, by: "alice", ["bob"]) == #"[] ["alice:owner", "bob:admin"]"#)
            #expect(try await change(.remove, by: "bob", ["alice"]) == "not_group_admin")
            #expect(try await change(.leave, by: "alice", ["alice"]) == #"["3-alice"] ["bob:owner"]"#)
            #expect(try await change(.leave, by: "bob", ["bob"]) == #"["4-bob"] []"#)
            // Gone with its last member; made again, its order goes on.
            #expect(try await change(.create, by: "carol", ["carol"]) == #"["5+carol"] ["carol:owner"]"#)
            // alice left at 3: her add now carries it, for her copies to reach first.
            let readd = try await store.changeGroup(.add, group: "team", by: "carol", users: [("alice", [1])], maxMembers: 3, on: loop).get()
            guard case .changed(let changes, _, _) = readd else { throw TestSupportError("\(readd)") }
            #expect(changes.map(\.after) == [3])
        }
        await pool.shutdown()
    }

    /// An invitation is recorded by the group's script and accepted or declined once, until it
    /// lapses; an add of the invited user makes it a member and ends the invitation.
    @Test func anInvitationIsAnsweredOnceBeforeItLapses() async throws {
        let (redis, pool, store) = try await start()
        defer { redis.stop() }
        do {
            func change(_ action: MessageStore.GroupChangeAction, by: String, _ users: [(String, [UInt8])], at now: Int64) async throws -> String {
                let result = try await store.changeGroup(action, group: "team", by: by, users: users, maxMembers: 10, nowMillis: now,
                                                         invitationLapses: now + 1_000, on: loop).get()
                switch result {
                case .refused(let code): return code.name
                case .changed(_, let members, let invited): return members.map(\.name).joined(separator: ",") + " invited " + invited.joined(separator: ",")
                }
            }
            #expect(try await change(.create, by: "alice", [("alice", [1]), ("bob", []), ("carol", [])], at: 100) == "alice invited bob,carol")
            #expect(try await change(.accept, by: "bob", [("bob", [2])], at: 1_099) == "alice,bob invited ")
            #expect(try await change(.accept, by: "carol", [("carol", [2])], at: 1_100) == "not_invited", "lapsed")
            #expect(try await change(.decline, by: "carol", [("carol", [])], at: 1_100) == "not_invited")
            #expect(try await change(.add, by: "alice", [("carol", [])], at: 2_000) == "alice,bob invited carol")
            #expect(try await change(.decline, by: "carol", [("carol", [])], at: 2_001) == "alice,bob invited ")
            #expect(try await change(.accept, by: "carol", [("carol", [2])], at: 2_002) == "not_invited", "declined")
            #expect(try await change(.add, by: "alice", [("carol", [])], at: 3_000) == "alice,bob invited carol")
            #expect(try await change(.add, by: "alice", [("carol", [3])], at: 3_001) == "alice,bob,carol invited ")
            #expect(try await change(.accept, by: "carol", [("carol", [2])], at: 3_002) == "alice,bob,carol invited ", "a member already")
            #expect(try await change(.accept, by: "dave", [("dave", [2])], at: 3_003) == "not_invited")
        } catch {
            Issue.record("\(error)")
        }
        await pool.shutdown()
    }

    /// A user's list of invitations drops lapsed ones and keeps at most its cap.
    @Test func aUsersInvitationsLapseAndAreCapped() async throws {
        let (redis, pool, store) = try await start()
        defer { redis.stop() }
        do {
            for index in 0..<(GroupConsent.invitationsKept + 5) {
                _ = try await store.invitations(of: "bob", .record(group: "g\(index)", by: "alice", lapses: 10_000 + Int64(index)),
                                                nowMillis: 0, on: loop).get()
            }
            let kept = try await store.invitations(of: "bob", .list, nowMillis: 0, on: loop).get()
            #expect(kept.count == GroupConsent.invitationsKept)
            #expect(!kept.contains { $0.group == "g0" }, "the soonest to lapse went first")
            #expect(try await store.invitations(of: "bob", .list, nowMillis: 10_100, on: loop).get().count == GroupConsent.invitationsKept + 5 - 101)
            #expect(try await store.invitations(of: "bob", .forget(group: "g150"), nowMillis: 10_100, on: loop).get().count
                    == GroupConsent.invitationsKept + 5 - 102)
        } catch {
            Issue.record("\(error)")
        }
        await pool.shutdown()
    }

    /// A member's copies stop at its bound of unconfirmed group copies (held, the group
    /// recorded), the one-to-one store does not count them, and the receipt that confirms them
    /// names the held group.
    @Test func aMembersCopiesStopAtTheirBoundAndTheReceiptNamesTheHeldGroup() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        var settings = StoreSettings()
        settings.inboxLimit = 3
        settings.inboxShare = 2
        let store = MessageStore(redis: pool, settings: settings)
        do {
            for user in ["alice", "bob"] { _ = try await store.createAccount(user: user, salt: [1], hash: [2], kdf: "test", on: loop).get() }
            _ = try await store.registerDevice(user: "bob", device: "default", nowMillis: 2, issuedMillis: 1, on: loop).get()
            let entries = (1...4).map { GroupEntry(seq: UInt64($0), kind: .other, sender: "alice", bytes: message("m\($0)").bytes) }
            // bob is a member from place 0 on (his mark says so).
            _ = try await pool.run(RedisCommand("HSET", [store.keys.groups("bob"), "team", "0 1"]))
            let first = try await store.deliver(group: "team", [("bob", entries)], floors: [:], on: loop).get()[0].get()
            #expect(first.held && !first.gap && first.seqs == [1, 2, 3, 0] && first.mark == 3)
            #expect(try await pool.run(RedisCommand("GET", [store.keys.heldGroups("bob")])).string == "team ")
            var later = entries[3]
            later.seq = 5
            let again = try await store.deliver(group: "team", [("bob", [later])], floors: [:], on: loop).get()[0].get()
            #expect(again.held && !again.gap, "held before the gap is looked at: no log read for nothing")

            // Three group copies unconfirmed, limit 3: three one-to-one messages (of three senders: a share is 2) still go in.
            for (id, from) in [("d1", "s1"), ("d2", "s2"), ("d3", "s3")] {
                let outcome = try await store.store([StoreRequest(from: from, id: id, to: "bob", bytes: message(id, from: from).bytes)], on: loop).get()
                guard case .stored = outcome[0] else { throw TestSupportError("\(id): \(outcome)") }
            }
            let written = try await store.writeReceipts([.init(user: "bob", deviceMark: 2, needsEntries: false)], on: loop).get()[0].get()
            #expect(written.heldGroups == ["team"])
            let resumed = try await store.deliver(group: "team", [("bob", Array(entries.dropFirst(2)))], floors: [:], on: loop).get()[0].get()
            #expect(!resumed.held && resumed.seqs == [0, 7] && resumed.mark == 4)
            #expect(try await pool.run(RedisCommand("EXISTS", [store.keys.heldGroups("bob")])).int == 0)
        } catch {
            Issue.record("\(error)")
        }
        await pool.shutdown()
    }

    /// Whether a member blocks anyone is read with its marks: kept by block and unblock, and
    /// found from the set when nothing kept it (a set written before the flag existed).
    @Test func aBlockedSendersGroupMessagesArePassedOverWhoeverWroteTheBlock() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        let store = MessageStore(redis: pool, settings: StoreSettings())
        do {
            for user in ["alice", "bob", "carol"] { _ = try await store.createAccount(user: user, salt: [1], hash: [2], kdf: "test", on: loop).get() }
            _ = try await pool.run(RedisCommand("HSET", [store.keys.groups("bob"), "team", "0 1"]))
            // Blocked as a node of before the flag wrote it: the set alone.
            _ = try await pool.run(RedisCommand("SADD", [store.keys.blocked("bob"), "mallory"]))
            let first = [GroupEntry(seq: 1, kind: .other, sender: "mallory", bytes: message("x1", from: "mallory").bytes),
                         GroupEntry(seq: 2, kind: .other, sender: "alice", bytes: message("a1").bytes)]
            let copy = try await store.deliver(group: "team", [("bob", first)], floors: [:], on: loop).get()[0].get()
            #expect(copy.seqs == [0, 1] && copy.mark == 2)
            #expect(try await pool.run(RedisCommand("GET", [store.keys.blocking("bob")])).string == "1")

            _ = try await store.contactStep(.unblock, owner: "bob", peer: "mallory", on: loop).get()
            #expect(try await pool.run(RedisCommand("GET", [store.keys.blocking("bob")])).string == "0")
            let second = [GroupEntry(seq: 3, kind: .other, sender: "mallory", bytes: message("x2", from: "mallory").bytes)]
            let unblocked = try await store.deliver(group: "team", [("bob", second)], floors: [:], on: loop).get()[0].get()
            #expect(unblocked.seqs == [2])

            _ = try await store.contactStep(.block, owner: "bob", peer: "carol", on: loop).get()
            #expect(try await pool.run(RedisCommand("GET", [store.keys.blocking("bob")])).string == "1")
            let third = [GroupEntry(seq: 4, kind: .other, sender: "carol", bytes: message("c1", from: "carol").bytes),
                         GroupEntry(seq: 5, kind: .other, sender: "mallory", bytes: message("x3", from: "mallory").bytes)]
            let blocked = try await store.deliver(group: "team", [("bob", third)], floors: [:], on: loop).get()[0].get()
            #expect(blocked.seqs == [0, 3] && blocked.mark == 5)
        } catch {
            Issue.record("\(error)")
        }
        await pool.shutdown()
    }
}
