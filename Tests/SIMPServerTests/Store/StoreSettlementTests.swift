import NIOCore
import SIMPCore
import SIMPRedis
import Testing
@testable import SIMPServer

/// The store's policy without Redis: what a batch's replies come to (outcomes, replication,
/// notices, depths), when a read counts as replicated, when notices are sent again.
@Suite struct StoreSettlementTests {
    static func request(_ id: String, from: String = "alice", to: String) -> StoreRequest {
        StoreRequest(from: from, id: id, to: to, bytes: Array(id.utf8))
    }

    /// The store script's answer for one message: stored at `seq` with the inbox `depth`, and
    /// the other nodes where the recipient's devices are.
    static func stored(_ seq: Int64, depth: Int64, nodes: [String] = []) -> RedisValue {
        .array([.integer(1), .integer(seq), .integer(depth)] + nodes.map { .bulk(Array($0.utf8)) })
    }

    static func summary(_ outcomes: [StoreOutcome]) -> [String] {
        outcomes.map { outcome in
            switch outcome {
            case .stored(let seq, let bytes): "stored \(seq) \(bytes.count)"
            case .duplicate(let seq, let delivered): "duplicate \(seq) \(delivered)"
            case .unavailable(let error): "unavailable \(error.mayHaveRun)"
            case .inboxFull: "inboxFull"
            default: "\(outcome)"
            }
        }
    }

    @Test func aReplicatedStoreIsAnsweredAndAnnouncedToTheRecipientsOtherNodes() {
        let batch = [Self.request("m1", to: "bob"), Self.request("m2", to: "carol"), Self.request("m3", to: "bob")]
        let groups = MessageStore.byRecipient(batch)
        #expect(groups == [[0, 2], [1]])
        let answers = [
            RedisReplicated(reply: .array([Self.stored(5, depth: 1, nodes: ["node-2", "node-3"]), Self.stored(6, depth: 2)]), replicas: 1),
            RedisReplicated(reply: .array([.array([.integer(-2)])]), replicas: 1),
        ]
        let settled = StoreSettlement(batch, groups: groups, answers: answers, rule: ReplicaRule(minReplicas: 1, timeoutMillis: 1_000))
        // The stored bytes carry the seq the script appended.
        #expect(Self.summary(settled.outcomes) == ["stored 5 \(StoredMessage.appending(seq: 5, to: Array("m1".utf8)).count)", "inboxFull",
                                                   "stored 6 \(StoredMessage.appending(seq: 6, to: Array("m3".utf8)).count)"])
        #expect(Self.summary(settled.made) == Self.summary(settled.outcomes))
        #expect(settled.notices.map { "\($0.node) \($0.user)" } == ["node-2 bob", "node-3 bob"])
        #expect(settled.depths == [2])
    }

    @Test func aStoreTheReplicasDidNotConfirmIsInDoubtAndNotAnnounced() {
        let batch = [Self.request("m1", to: "bob"), Self.request("m2", to: "carol")]
        let answers = [
            RedisReplicated(reply: .array([Self.stored(5, depth: 1, nodes: ["node-2"])]), replicas: 0),
            RedisReplicated(reply: .array([.array([.integer(0), .integer(3), .integer(3)])]), replicas: 0),
        ]
        let settled = StoreSettlement(batch, groups: MessageStore.byRecipient(batch), answers: answers,
                                      rule: ReplicaRule(minReplicas: 1, timeoutMillis: 1_000))
        // Answered as unknown (it will be stored again, found a duplicate, and waited for again) ...
        #expect(Self.summary(settled.outcomes) == ["unavailable true", "unavailable true"])
        // ... while what Redis did still makes the senders' history copies.
        #expect(Self.summary(settled.made) == ["stored 5 \(StoredMessage.appending(seq: 5, to: Array("m1".utf8)).count)", "duplicate 3 true"])
        #expect(settled.notices.isEmpty)
        // Without replicas asked for, every store counts.
        let plain = StoreSettlement(batch, groups: MessageStore.byRecipient(batch), answers: answers,
                                    rule: ReplicaRule(minReplicas: 0, timeoutMillis: 1_000))
        #expect(Self.summary(plain.outcomes) == Self.summary(plain.made) && plain.notices.map(\.node) == ["node-2"])
    }

    @Test func aScriptErrorOrAMissingAnswerIsUnavailableForEachOfItsMessages() {
        let batch = [Self.request("m1", to: "bob"), Self.request("m2", to: "bob"), Self.request("m3", to: "carol")]
        let answers = [RedisReplicated(reply: .error("NOSCRIPT"), replicas: 0)]
        let settled = StoreSettlement(batch, groups: MessageStore.byRecipient(batch), answers: answers,
                                      rule: ReplicaRule(minReplicas: 0, timeoutMillis: 1_000))
        #expect(Self.summary(settled.outcomes) == ["unavailable false", "unavailable false", "unavailable false"])
        #expect(settled.notices.isEmpty && settled.depths.isEmpty)
    }

    @Test func onlyAStoredOrDuplicateMessageFallsIntoDoubtWithoutItsReplicas() {
        let rule = ReplicaRule(minReplicas: 2, timeoutMillis: 500)
        #expect(rule.counts(replicas: 2) && !rule.counts(replicas: 1))
        guard case .unavailable(let error) = rule.answer(.stored(seq: 1, bytes: []), replicas: 1) else { Issue.record("not in doubt"); return }
        #expect(error.kind == .notReady && error.mayHaveRun && "\(error)".contains("1 of 2 Redis replicas confirmed it within 500 ms"))
        #expect(Self.summary([rule.answer(.inboxFull, replicas: 0)]) == ["inboxFull"])
        #expect(Self.summary([rule.answer(.duplicate(seq: 4, delivered: false), replicas: 2)]) == ["duplicate 4 false"])
    }

    @Test func aReadCountsWithItsReplicasOrWhenTheShardHasTooFewToWaitFor() {
        let rule = ReplicaRule(minReplicas: 1, timeoutMillis: 1_000)
        #expect(rule.readCounts(confirmedBy: 1, online: 1))
        #expect(!rule.readCounts(confirmedBy: 0, online: 1), "a replica could take over without it: read again")
        #expect(rule.readCounts(confirmedBy: 0, online: 0), "no replica to take over: what the master holds is read")
    }

    @Test func failedNoticesAreSentAgainWithAGrowingWaitFiveTimesInAll() {
        let notices = ["a", "b", "c"]
        let retry = NoticeRetry()
        #expect(retry.next(notices, replies: [.integer(1), .integer(1), .integer(0)]) == nil, "all taken (even by no subscriber)")
        let first = retry.next(notices, replies: [.integer(1), .error("MOVED 1 x:1"), .integer(0)])
        #expect(first?.after == .milliseconds(250) && first?.again == ["b"] && first?.retry == NoticeRetry(attempt: 2))
        // The whole pipeline failed: every notice goes again.
        let all = NoticeRetry(attempt: 3).next(notices, replies: nil)
        #expect(all?.after == .milliseconds(750) && all?.again == notices && all?.retry.attempt == 4)
        #expect(NoticeRetry(attempt: 4).next(["b"], replies: nil)?.after == .milliseconds(1_000))
        #expect(NoticeRetry(attempt: NoticeRetry.attempts).next(["b"], replies: nil) == nil, "given up after the fifth send")
    }

    @Test func aNumberingRepairIsCheckedAgainWhileStoresChangeTheInbox() {
        let first = NumberingRepair()
        #expect(first.next(moved: 4, entries: 4) == .done(moved: 4))
        #expect(first.next(moved: 0, entries: 0) == .done(moved: 0), "nothing to move")
        #expect(first.next(moved: 0, entries: 2) == .again(NumberingRepair(attempt: 2)), "a store came between the check and the move")
        #expect(NumberingRepair(attempt: 2).next(moved: 0, entries: 2) == .again(NumberingRepair(attempt: 3)))
        #expect(NumberingRepair(attempt: NumberingRepair.attempts).next(moved: 0, entries: 2) == .failed, "given up after the third check")
    }
}
