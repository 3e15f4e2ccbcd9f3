import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPMLS
import SIMPTestSupport
import Testing

/// A malicious server against end-to-end encrypted conversations (issue 44, part 2; docs/E2EE.md,
/// Part 4, "What a malicious server can do"), played by writes to its Redis: the keys of a
/// conversation's commit order (`{TAG}:commits`, field the epoch a commit was made on; `{TAG}:welcomes`,
/// Part 3) rewritten under a real server and real clients. A device refuses a commit handed
/// again or out of order, and a second commit for an epoch it left (warned, counted, the messages
/// sealed after it counted undecryptable, none shown), and goes on with the honest members once
/// the order is the real one again; a device whose Welcome the server withheld reads nothing.
@Suite(.serialized) struct MaliciousServerTests {
    typealias E = EncryptedConversationTests

    /// The keys of the commit order of alice and bob's conversation.
    static func orderKeys(_ cluster: TestCluster) throws -> (commits: String, welcomes: String, welcomeEpochs: String) {
        let commits = try #require(try TypingTests.keys(cluster).first { $0.hasSuffix("{@alice+bob}:commits") })
        return (commits, commits.replacingOccurrences(of: ":commits", with: ":welcomes"),
                commits.replacingOccurrences(of: ":commits", with: ":welcomeEpochs"))
    }

    /// The server rewrites its order: each move copies the stored commit of field `from` to
    /// field `to` (all read before any is written), with its label (`StoredCommit.epoch`, which
    /// the page hands the device) made `label` when one is given (1 to 127).
    static func rewrite(_ cluster: TestCluster, _ commits: String, _ moves: [(from: String, to: String, label: Int?)]) throws {
        let reply = try cluster.redis.command(["EVAL", """
            local read = {}
            for i = 1, #ARGV, 3 do read[i] = redis.call('HGET', KEYS[1], ARGV[i]) end
            for i = 1, #ARGV, 3 do
              local value = read[i]
              if ARGV[i + 2] ~= '' then
                -- Field 1 (tag 0x08, a one-byte varint here; left out for epoch 0) first.
                if string.byte(value, 1) == 8 then value = string.sub(value, 3) end
                value = string.char(8, tonumber(ARGV[i + 2])) .. value
              end
              redis.call('HSET', KEYS[1], ARGV[i + 1], value)
            end
            return 1
            """, "1", commits] + moves.flatMap { [$0.from, $0.to, $0.label.map(String.init) ?? ""] })
        #expect(reply == ":1\r\n", "\(reply)")
    }

    /// A client whose ConversationKeys renews its leaf by an Update before every send after the
    /// first (each send after the first is a commit, then a message of the new epoch).
    static func updatingBeforeEverySend(_ client: SIMPClient, _ user: String) async throws {
        let store = try await client.identityStore()
        let keys = try ConversationKeys(store: store, user: user, device: "phone", keys: try #require(try store.ownKeys()),
                                        checkInterval: .zero, updateAfter: (messages: 1, millis: .max))
        client.keyring.withLock { $0 = keys }
    }

    static func undecryptable(_ log: EventLog, _ ids: [String]) -> Bool {
        ids.allSatisfy { id in log.all.contains { if case .undecryptable(from: _, id: id, _) = $0 { true } else { false } } }
    }

    static func refusals(_ log: EventLog) -> [(conversation: String, epoch: UInt64, reason: String)] {
        log.all.compactMap { if case .commitRefused(let c, let e, let r) = $0 { (c, e, r) } else { nil } }
    }

    /// Commits on epochs 0 (the group), 1 and 2 (alice's Updates, one before each later send);
    /// bob was away. The server hands bob the two Updates swapped, first with the labels they
    /// were stored with, then labelled as the epochs they are handed for; then (the order put
    /// back) the Update of epoch 1 again as the commit of epoch 2. bob refuses each (a commit
    /// labelled for another epoch; a commit of another epoch, RFC 9420 section 12.4.2), warns
    /// once per commit, reports each message sealed after it undecryptable (counted, not shown)
    /// and moves only as far as the honest commits take it; with the real order again it
    /// catches up and the two read each other.
    @Test func aReplayedOrReorderedCommitIsRefusedAndTheConversationGoesOn() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let pair = try await E.aliceAndBob(cluster, directories)
        let ((alice, aliceLog), (bob, bobLog)) = (pair.alice, pair.bob)
        try await Self.updatingBeforeEverySend(alice, "alice")
        let first = try await alice.send(to: "bob", text: "epoch 1")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == first && $0.encrypted } })
        await bob.close()
        let second = try await alice.send(to: "bob", text: "epoch 2")
        let third = try await alice.send(to: "bob", text: "epoch 3")
        #expect(await aliceLog.wait { $0.accepted.contains(second) && $0.accepted.contains(third) })
        #expect(try await alice.fetchCommits(in: "bob", fromEpoch: 0).epoch == 3)
        let keys = try Self.orderKeys(cluster)

        // Reordered: epoch 2's commit handed where epoch 1's is due, as stored (labelled 2).
        try Self.rewrite(cluster, keys.commits, [("1", "kept1", nil), ("2", "kept2", nil), ("2", "1", nil), ("1", "2", nil)])
        let (back, backLog) = try await E.connected(cluster, "bob", directories[1])
        #expect(await backLog.wait { Self.undecryptable($0, [second, third]) })
        #expect(!backLog.messages.contains { [second, third].contains($0.id) }, "nothing shown")
        #expect(back.decryptionFailures() == [.commitRefused: 2])
        #expect(back.securityWarnings() == [.commitRefused: 1], "one commit refused, warned once")
        #expect(Self.refusals(backLog).map(\.conversation) == ["alice"] && Self.refusals(backLog).map(\.epoch) == [1])
        #expect(Self.refusals(backLog).last?.reason.contains("labels epoch 2 where epoch 1's is due") == true, "\(Self.refusals(backLog))")

        // The same, labelled as the epochs they are handed for: MLS refuses it by its own epoch.
        try Self.rewrite(cluster, keys.commits, [("kept2", "1", 1), ("kept1", "2", 2)])
        let fourth = try await alice.send(to: "bob", text: "epoch 4")
        #expect(await backLog.wait { Self.undecryptable($0, [fourth]) })
        #expect(back.decryptionFailures() == [.commitRefused: 3])
        #expect(back.securityWarnings() == [.commitRefused: 2])
        #expect(Self.refusals(backLog).map(\.epoch) == [1, 1])
        #expect(Self.refusals(backLog).last?.reason.contains("wrongEpoch(expected: 1, got: 2)") == true, "\(Self.refusals(backLog))")

        // Replayed: the real commit of epoch 1, then the same commit again, labelled 2.
        try Self.rewrite(cluster, keys.commits, [("kept1", "1", nil), ("kept1", "2", 2)])
        let fifth = try await alice.send(to: "bob", text: "epoch 5")
        #expect(await backLog.wait { Self.undecryptable($0, [fifth]) })
        #expect(back.decryptionFailures() == [.commitRefused: 4])
        #expect(back.securityWarnings() == [.commitRefused: 3])
        #expect(Self.refusals(backLog).map(\.epoch) == [1, 1, 2])
        #expect(Self.refusals(backLog).last?.reason.contains("wrongEpoch(expected: 2, got: 1)") == true, "\(Self.refusals(backLog))")
        #expect(!backLog.messages.contains { [second, third, fourth, fifth].contains($0.id) }, "nothing shown")

        // The real order again: bob takes epoch 2's commit and every later one, and reads.
        try Self.rewrite(cluster, keys.commits, [("kept2", "2", nil)])
        let sixth = try await alice.send(to: "bob", text: "epoch 6, read")
        #expect(await backLog.wait { $0.messages.contains { $0.id == sixth && $0.encrypted && $0.text == "epoch 6, read" } })
        let reply = try await back.send(to: "alice", text: "bob is back")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.encrypted && $0.text == "bob is back" } })
        #expect(back.decryptionFailures() == [.commitRefused: 4] && alice.decryptionFailures().isEmpty)
        #expect(back.securityWarnings() == [.commitRefused: 3] && alice.securityWarnings().isEmpty)
        for client in [alice, back] { await client.close() }
        await cluster.stop()
    }

    /// Two commits for epoch 1: alice's Update, which the server stored, and one bob's device
    /// could have made on epoch 1 (the loser of a race, made here from bob's kept state). Once
    /// alice is at epoch 2, the server gives her the loser as the commit of epoch 2: she refuses
    /// it (warned, counted) and stays in the epoch bob is in; the two still read each other.
    @Test func aSecondCommitForAnEpochTheDeviceLeftIsRefused() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let pair = try await E.aliceAndBob(cluster, directories)
        let ((alice, aliceLog), (bob, bobLog)) = (pair.alice, pair.bob)
        try await Self.updatingBeforeEverySend(alice, "alice")
        let first = try await alice.send(to: "bob", text: "epoch 1")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == first && $0.encrypted } })

        // An Update bob's device makes on epoch 1 and never submits (its state keeps epoch 1).
        let bobStore = try await bob.identityStore()
        var onEpoch1 = try MLSGroup(savedState: try #require(try bobStore.groupState(of: "alice")), credentialValidator: nil,
                                    proposalApprover: nil)
        #expect(onEpoch1.epoch == 1)
        let loser = try onEpoch1.commit(randomness: ConversationKeys.systemRandom).message.mlsEncoded()

        let second = try await alice.send(to: "bob", text: "epoch 2")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == second && $0.encrypted } })
        // The server stores the commit made on epoch 1 as the commit of epoch 2.
        var stored = Simp_StoredCommit()
        stored.epoch = 2
        stored.commit = Data(loser)
        stored.fromUser = "bob"
        stored.fromDevice = "phone"
        stored.serverTime = Int64(Date().timeIntervalSince1970 * 1000)
        let value: [UInt8] = try stored.serializedBytes()
        let keys = try Self.orderKeys(cluster)
        #expect(try cluster.redis.command(["EVAL", """
            local value = (ARGV[1]:gsub('..', function(c) return string.char(tonumber(c, 16)) end))
            redis.call('HSET', KEYS[1], '2', value)
            redis.call('SET', KEYS[2], 3)
            return 1
            """, "2", keys.commits, keys.commits.replacingOccurrences(of: ":commits", with: ":epoch"),
            value.map { String(format: "%02x", $0) }.joined()]) == ":1\r\n")
        #expect(try await bob.fetchCommits(in: "alice", fromEpoch: 2).commits.map(\.commit) == [loser])

        // alice's next send is due an Update: it loses epoch 2 to the stored commit, which she
        // refuses; no Update, and the message goes on the epoch bob is in.
        let third = try await alice.send(to: "bob", text: "still epoch 2")
        #expect(await aliceLog.wait { !Self.refusals($0).isEmpty })
        #expect(Self.refusals(aliceLog).map(\.epoch) == [2] && Self.refusals(aliceLog).map(\.conversation) == ["bob"])
        #expect(Self.refusals(aliceLog).first?.reason.contains("wrongEpoch(expected: 2, got: 1)") == true, "\(Self.refusals(aliceLog))")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == third && $0.encrypted && $0.text == "still epoch 2" } })
        #expect(alice.securityWarnings() == [.commitRefused: 1])

        // The same after a restart: the group loaded from disk refuses the commit as it catches up.
        await alice.close()
        let (again, againLog) = try await E.connected(cluster, "alice", directories[0])
        let fourth = try await again.send(to: "bob", text: "after a restart")
        #expect(await againLog.wait { Self.refusals($0).map(\.epoch) == [2] })
        #expect(await bobLog.wait { $0.messages.contains { $0.id == fourth && $0.encrypted && $0.text == "after a restart" } })
        let reply = try await bob.send(to: "alice", text: "one group")
        #expect(await againLog.wait { $0.messages.contains { $0.id == reply && $0.encrypted && $0.text == "one group" } })
        #expect(again.securityWarnings() == [.commitRefused: 1], "warned once")
        #expect(again.decryptionFailures().isEmpty && bob.decryptionFailures().isEmpty)
        for client in [again, bob] { await client.close() }
        await cluster.stop()
    }

    /// alice's commit adds bob's device (its leaf is in the group's tree), and the server drops
    /// the Welcome before bob fetches it: bob reads nothing sealed on the epoch it was added on.
    /// Each such message is reported undecryptable, counted, and never shown. With no Welcome, bob
    /// joins the epoch the order is at by an external commit from the GroupInfo alice's commit
    /// carried, removing his old leaf (docs/E2EE.md, Part 8): from then on the two read each other.
    /// Before 2026-12-01 bob stayed out for good (his sends failed `.endToEnd`) until his device
    /// was revoked and linked again.
    @Test func aMemberAddedWithoutItsWelcomeReadsNothingSentBeforeAndRejoinsByItself() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let pair = try await E.aliceAndBob(cluster, directories)
        let ((alice, aliceLog), (bob, _)) = (pair.alice, pair.bob)
        await bob.close()
        let first = try await alice.send(to: "bob", text: "not for a device without its Welcome")
        #expect(await aliceLog.wait { $0.accepted.contains(first) })
        let aliceStore = try await alice.identityStore()
        let group = try MLSGroup(savedState: try #require(try aliceStore.groupState(of: "bob")), credentialValidator: nil,
                                 proposalApprover: nil)
        #expect(ConversationKeys.memberIdentities(group).values.contains(Array("bob/phone".utf8)), "bob's device is in the tree")

        let keys = try Self.orderKeys(cluster)
        #expect(try cluster.redis.command(["HDEL", keys.welcomes, "bob/phone"]) == ":1\r\n")
        _ = try cluster.redis.command(["ZREM", keys.welcomeEpochs, "bob/phone"])
        let second = try await alice.send(to: "bob", text: "nor this")
        #expect(await aliceLog.wait { $0.accepted.contains(second) })

        let (back, backLog) = try await E.connected(cluster, "bob", directories[1])
        #expect(await backLog.wait { Self.undecryptable($0, [first, second]) })
        #expect(backLog.messages.isEmpty, "nothing shown")
        #expect(back.decryptionFailures().values.reduce(0, +) == 2)
        // The order's commit on epoch 1 is bob's external commit.
        let page = try await alice.fetchCommits(in: "bob", fromEpoch: 1)
        #expect(page.epoch == 2 && page.commits.count == 1)
        let rejoin = try #require(page.commits.first)
        #expect(rejoin.fromUser == "bob" && rejoin.fromDevice == "phone")
        guard case .publicMessage(let message) = try MLSMessage(mlsDecoding: rejoin.commit) else { Issue.record("not public"); return }
        #expect(message.content.sender == .newMemberCommit)

        let reply = try await back.send(to: "alice", text: "back by myself")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.encrypted && $0.text == "back by myself" } })
        let third = try await alice.send(to: "bob", text: "read this")
        #expect(await backLog.wait { $0.messages.contains { $0.id == third && $0.encrypted && $0.text == "read this" } })
        let now = try MLSGroup(savedState: try #require(try aliceStore.groupState(of: "bob")), credentialValidator: nil,
                               proposalApprover: nil)
        #expect(ConversationKeys.memberIdentities(now).values.filter { $0 == Array("bob/phone".utf8) }.count == 1,
                "the old leaf went with the rejoin")
        #expect(alice.decryptionFailures().isEmpty && alice.securityWarnings().isEmpty)
        for client in [alice, back] { await client.close() }
        await cluster.stop()
    }
}
