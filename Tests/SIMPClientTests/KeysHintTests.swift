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
}
