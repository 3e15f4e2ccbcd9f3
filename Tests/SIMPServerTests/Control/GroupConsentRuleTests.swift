import SIMPCore
import Testing
@testable import SIMPServer

/// Who a create or add puts in at once, invites, or leaves out unseen (`GroupConsent`). Pure.
struct GroupConsentRuleTests {
    typealias Standing = GroupConsent.Standing

    @Test(arguments: [
        (Standing(adds: .contacts, isContact: true), GroupConsent.Decision.add),
        (Standing(adds: .contacts, isContact: false), .invite),
        (Standing(adds: .everyone), .add),
        (Standing(adds: .nobody, isContact: true), .invite),
        (Standing(blockedAdder: true, adds: .everyone, isContact: true), .drop),
        (Standing(contactsOnly: true, adds: .everyone), .drop),
        (Standing(contactsOnly: true, adds: .contacts, isContact: true), .add),
        (Standing(adds: .everyone, groups: 500), .invite),
        (Standing(blockedAdder: true, groups: 500), .drop),
    ])
    func decides(_ standing: Standing, _ decision: GroupConsent.Decision) {
        #expect(GroupConsent.decide(standing, maxGroups: 500) == decision)
    }

    /// The adder hears "invited" for the invited and the left out alike, in the order named.
    @Test func theLeftOutAreAnsweredAsInvited() throws {
        let plan = try GroupConsent.plan(["a", "b", "c"], standings: [Standing(adds: .everyone), Standing(blockedAdder: true), Standing()],
                                         maxGroups: 500).get()
        #expect(plan.added == ["a"] && plan.invited == ["c"] && plan.dropped == ["b"] && plan.answered == ["b", "c"])
    }

    @Test func anUnknownUserRefusesTheWholeRequest() {
        guard case .failure(let refusal) = GroupConsent.plan(["a", "ghost"], standings: [Standing(), nil], maxGroups: 500) else {
            Issue.record("planned with a user who does not exist")
            return
        }
        #expect(refusal.code == .unknownUser && refusal.reason.contains("ghost"))
    }

    @Test func joiningPastTheMostGroupsIsRefused() {
        #expect(GroupConsent.joinProblem(groups: 499, maxGroups: 500) == nil)
        #expect(GroupConsent.joinProblem(groups: 500, maxGroups: 500)?.code == .tooManyGroups)
    }
}
