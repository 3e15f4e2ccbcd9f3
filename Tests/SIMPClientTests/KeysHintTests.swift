import NIOCore
import SIMPMLS
import Testing

@testable import SIMPClient

/// Who commits on a KEYS hint (`ConversationKeys.commitsOnHint`): few devices, so that a hint
/// to a large group is not every member device's race for one epoch.
@Suite struct KeysHintTests {
    typealias Leaf = (leaf: LeafIndex, user: String, mine: Bool)

    /// alice's phone at leaf 0, bob's at 1, carol's at 2 and 3; `mine` marks this device's.
    func team(mine: UInt32) -> [Leaf] {
        [(0, "alice"), (1, "bob"), (2, "carol"), (3, "carol")].map { (LeafIndex($0.0), $0.1, $0.0 == mine) }
    }

    @Test func aOneToOneConversationCommitsOnEveryDeviceOfItsTwoUsers() {
        #expect(ConversationKeys.commitsOnHint(about: "bob", in: "bob", user: "alice", members: []) == true)
        #expect(ConversationKeys.commitsOnHint(about: "alice", in: "bob", user: "alice", members: []) == true, "a sibling's hint")
        #expect(ConversationKeys.commitsOnHint(about: "carol", in: "bob", user: "alice", members: []) == nil, "carol is not in it")
    }

    @Test func aGroupCommitsOnTheLowestLeafNotOfTheUserTold() {
        // carol's keys changed: alice's phone, the lowest leaf not carol's, commits; bob checks at his next send.
        #expect(ConversationKeys.commitsOnHint(about: "carol", in: "#team", user: "alice", members: team(mine: 0)) == true)
        #expect(ConversationKeys.commitsOnHint(about: "carol", in: "#team", user: "bob", members: team(mine: 1)) == false)
        #expect(ConversationKeys.commitsOnHint(about: "carol", in: "#team", user: "carol", members: team(mine: 2)) == true,
                "carol's own devices add her new one")
        // alice's keys changed: bob's phone is the lowest leaf not hers.
        #expect(ConversationKeys.commitsOnHint(about: "alice", in: "#team", user: "bob", members: team(mine: 1)) == true)
        #expect(ConversationKeys.commitsOnHint(about: "alice", in: "#team", user: "carol", members: team(mine: 2)) == false)
        // dave holds no leaf in #team: nothing to do.
        #expect(ConversationKeys.commitsOnHint(about: "dave", in: "#team", user: "alice", members: team(mine: 0)) == nil)
    }

    @Test func theNextThreeLeavesStandInForTheChosenOne() {
        // carol's keys changed: alice's phone (leaf 0) is chosen; bob's (1) stands in first.
        #expect(ConversationKeys.deputyRank(about: "carol", members: team(mine: 0)) == nil, "the chosen one")
        #expect(ConversationKeys.deputyRank(about: "carol", members: team(mine: 1)) == 1)
        #expect(ConversationKeys.deputyRank(about: "carol", members: team(mine: 2)) == nil, "carol's own")
        // alice's keys changed: bob chosen, carol's two devices next.
        #expect(ConversationKeys.deputyRank(about: "alice", members: team(mine: 2)) == 1)
        #expect(ConversationKeys.deputyRank(about: "alice", members: team(mine: 3)) == 2)
        // Past the third: no duty (a hint to a large group is no race of every device).
        let large = (0..<10).map { (leaf: LeafIndex(UInt32($0)), user: "u\($0)", mine: $0 == 4) }
        #expect(ConversationKeys.deputyRank(about: "u9", members: large) == nil)
        let third = (0..<10).map { (leaf: LeafIndex(UInt32($0)), user: "u\($0)", mine: $0 == 3) }
        #expect(ConversationKeys.deputyRank(about: "u9", members: third) == 3)
    }

    @Test func aDeputyCommitsRankTimesTheDelayAfterTheHintAndOnce() {
        let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var deputies = KeysDeputies()
        #expect(deputies.next == nil)
        deputies.named([.init(peer: "carol", conversation: "#team", rank: 2), .init(peer: "carol", conversation: "#ops", rank: 1),
                        .init(peer: "dave", conversation: "#big", rank: 4)], now: now)
        #expect(deputies.next == now + .seconds(10))
        #expect(deputies.take(now: now + .seconds(9)).isEmpty)
        #expect(deputies.take(now: now + .seconds(10)).map(\.conversation) == ["#ops"])
        #expect(deputies.next == now + .seconds(20), "rank 4 is no duty")
        // A second hint while the duty waits: the earlier deadline stays.
        deputies.named([.init(peer: "carol", conversation: "#team", rank: 2)], now: now + .seconds(15))
        #expect(deputies.take(now: now + .seconds(20)).map(\.conversation) == ["#team"])
        #expect(deputies.next == nil)
        #expect(deputies.take(now: now + .seconds(60)).isEmpty, "each once")
    }
}
