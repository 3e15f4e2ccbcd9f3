@testable import SIMPServer
import SIMPCore
import Testing

/// The steps of each group request, and what each result leads to; the time is injected.
struct GroupFlowTests {
    typealias Standing = GroupConsent.Standing
    static let now: Int64 = 1_700_000_000_000
    static let maxMembers = 10
    static let maxGroups = 3

    static func flow(_ action: Simp_GroupRequest.Action, _ users: [String] = [], group: String = "team") -> GroupFlow {
        var request = Simp_GroupRequest()
        request.action = action
        request.group = group
        request.users = users
        return GroupFlow(request, user: "alice", maxMembers: maxMembers, maxGroups: maxGroups, nowMillis: now)
    }

    static func change(_ action: MessageStore.GroupChangeAction, _ users: [String], entryBy: String = "alice",
                       invited: [String] = []) -> GroupFlow.Next {
        .change(GroupRelayMachine.Change(action: action, group: "team", by: "alice", entryBy: entryBy, users: users, invited: invited,
                                         maxMembers: maxMembers, nowMillis: now))
    }

    static func member(_ name: String, _ role: String = "member") -> Simp_GroupMember {
        var member = Simp_GroupMember()
        member.name = name
        member.role = role
        return member
    }

    static func invitation(_ group: String, by: String) -> Simp_GroupInvitation {
        var invitation = Simp_GroupInvitation()
        invitation.group = group
        invitation.by = by
        return invitation
    }

    static func made(_ seq: UInt64, _ user: String) -> GroupChangeMade {
        GroupChangeMade(seq: seq, user: user, removes: false, bytes: [])
    }

    static func answer(members: [Simp_GroupMember] = [], invited: [String] = [], seq: UInt64 = 0) -> GroupFlow.Next {
        var answer = Simp_GroupAnswer()
        answer.group = "team"
        answer.members = members
        answer.invited = invited
        answer.groupSeq = seq
        return .answer(answer)
    }

    // MARK: reads

    @Test func aListIsTheUsersGroupsAndInvitations() {
        var flow = Self.flow(.list)
        #expect(flow.start() == .readList)
        var answer = Simp_GroupAnswer()
        answer.groups = ["team"]
        answer.invitations = [Self.invitation("club", by: "bob")]
        #expect(flow.finished(.list(groups: ["team"], invitations: [Self.invitation("club", by: "bob")])) == .answer(answer))
    }

    @Test func membersAreShownToMembersOnly() {
        let members = [Self.member("alice", "owner"), Self.member("bob")]
        var flow = Self.flow(.members)
        #expect(flow.start() == .readMembers(group: "team"))
        #expect(flow.finished(.members(members)) == Self.answer(members: members))
        #expect(flow.finished(.members(nil)) == .refuse(.noSuchGroup, "no such group: #team"))
        #expect(flow.finished(.members([Self.member("bob")])) == .refuse(.notAMember, "you are not a member of #team"))
    }

    // MARK: create and add

    @Test func aCreateAddsInvitesAndDropsEachNamedUserOnceThenTellsTheInvited() {
        var flow = Self.flow(.create, ["bob", "carol", "alice", "bob", "dave"])
        #expect(flow.start() == .readStandings(["alice", "bob", "carol", "dave"], toward: "alice"),
                "the creator's own standing first, then each user once in the order named")
        let standings: [Standing?] = [Standing(groups: 2), Standing(adds: .everyone), Standing(blockedAdder: true), Standing(adds: .nobody)]
        #expect(flow.finished(.standings(standings)) == Self.change(.create, ["alice", "bob"], invited: ["dave"]))
        let members = [Self.member("alice", "owner"), Self.member("bob")]
        #expect(flow.finished(.changed(.changed([Self.made(1, "alice"), Self.made(2, "bob")], members: members, invited: ["dave"])))
            == .invite([GroupFlow.Invitation(invitee: "dave", group: "team", by: "alice", lapses: Self.now + GroupConsent.invitationLifetime)]))
        #expect(flow.next() == Self.answer(members: members, invited: ["carol", "dave"], seq: 2),
                "the dropped are answered as invited, so a block is not told")
        #expect(flow.next() == .refuse(.internal, "group request ended without an answer"))
    }

    @Test func aCreatorInTooManyGroupsIsRefusedBeforeAnyChange() {
        var flow = Self.flow(.create, ["bob"])
        _ = flow.start()
        #expect(flow.finished(.standings([Standing(groups: 3), Standing()]))
            == .refuse(.tooManyGroups, "you are in 3 groups, the most a user may be in (3); leave one first"))
    }

    @Test func anAddOfNobodyInvitedAnswersWithoutInvitations() {
        var flow = Self.flow(.add, ["bob", "alice"])
        #expect(flow.start() == .readStandings(["bob"], toward: "alice"), "the adder is not its own invitee")
        #expect(flow.finished(.standings([Standing(isContact: true)])) == Self.change(.add, ["bob"]))
        #expect(flow.finished(.changed(.changed([Self.made(7, "bob")], members: [], invited: []))) == Self.answer(seq: 7))
    }

    @Test func anAddNamingNoSuchUserIsRefused() {
        var flow = Self.flow(.add, ["bob", "zed"])
        _ = flow.start()
        #expect(flow.finished(.standings([Standing(), nil])) == .refuse(.unknownUser, "no such user: zed"))
    }

    @Test func aRefusedChangeIsWordedByTheRules() {
        var flow = Self.flow(.add, ["bob"])
        _ = flow.start()
        _ = flow.finished(.standings([Standing(adds: .everyone)]))
        #expect(flow.finished(.changed(.refused(.groupFull))) == .refuse(.groupFull, "#team would have more than 10 members"))
    }

    // MARK: invitations

    @Test func anAcceptNamesWhoInvitedThenForgetsTheInvitation() {
        var flow = Self.flow(.accept)
        #expect(flow.start() == .readStandings(["alice"], toward: "alice"))
        #expect(flow.finished(.standings([Standing(groups: 1)])) == .readInvitations)
        let list = [Self.invitation("club", by: "carol"), Self.invitation("team", by: "bob")]
        #expect(flow.finished(.invitations(list)) == Self.change(.accept, ["alice"], entryBy: "bob"))
        let members = [Self.member("bob", "owner"), Self.member("alice")]
        #expect(flow.finished(.changed(.changed([Self.made(4, "alice")], members: members, invited: []))) == .forgetInvitation(group: "team"))
        #expect(flow.finished(.forgotten) == Self.answer(members: members, seq: 4))
    }

    @Test func anAcceptWithoutAnInvitationIsForgottenAndRefused() {
        var flow = Self.flow(.accept)
        _ = flow.start()
        _ = flow.finished(.standings([Standing()]))
        #expect(flow.finished(.invitations([])) == Self.change(.accept, ["alice"]), "no inviter: the entry names the user")
        #expect(flow.finished(.changed(.refused(.notInvited))) == .forgetInvitation(group: "team"), "the list's copy goes anyway")
        #expect(flow.finished(.forgotten) == .refuse(.notInvited, GroupRequestRules.reason(.notInvited, group: "team", max: Self.maxMembers)))
    }

    @Test func anAcceptInTooManyGroupsIsRefused() {
        var flow = Self.flow(.accept)
        _ = flow.start()
        #expect(flow.finished(.standings([Standing(groups: 5)]))
            == .refuse(.tooManyGroups, "you are in 5 groups, the most a user may be in (3); leave one first"))
    }

    @Test func aDeclineChangesThenForgetsAndShowsNoMembers() {
        var flow = Self.flow(.decline, ["bob"])
        #expect(flow.start() == Self.change(.decline, ["alice"]))
        #expect(flow.finished(.changed(.changed([Self.made(9, "alice")], members: [Self.member("bob")], invited: [])))
            == .forgetInvitation(group: "team"))
        #expect(flow.finished(.forgotten) == Self.answer(seq: 9))
    }

    @Test func theInvitationsNoticeIsAGroupInvitedFromTheAdder() throws {
        let invitation = GroupFlow.Invitation(invitee: "dave", group: "team", by: "alice", lapses: 1)
        let notice = GroupFlow.notice(invitation, id: 42, nowMillis: Self.now)
        let message = try Simp_Message(serializedBytes: notice.bytes)
        #expect(notice.notice && notice.to == "dave" && notice.from == "alice" && notice.id == "42")
        #expect(message.type == .groupInvited && message.content == "#team" && message.toUser == "dave" && message.time == Self.now)
    }

    // MARK: remove, leave, admin

    @Test func aLeaveIsTheUsersOwnAndShowsNoMembers() {
        var flow = Self.flow(.leave, ["bob"])
        #expect(flow.start() == Self.change(.leave, ["alice"]))
        #expect(flow.finished(.changed(.changed([Self.made(3, "alice")], members: [Self.member("bob")], invited: []))) == Self.answer(seq: 3))
    }

    @Test func aRemoveNamesEachUserOnceAndShowsTheMembersAfter() {
        var flow = Self.flow(.remove, ["bob", "carol", "bob"])
        #expect(flow.start() == Self.change(.remove, ["bob", "carol"]))
        let members = [Self.member("alice", "owner")]
        #expect(flow.finished(.changed(.changed([Self.made(5, "bob"), Self.made(6, "carol")], members: members, invited: [])))
            == Self.answer(members: members, seq: 6))
        #expect(flow.finished(.changed(.refused(.notGroupAdmin)))
            == .refuse(.notGroupAdmin, GroupRequestRules.reason(.notGroupAdmin, group: "team", max: Self.maxMembers)))
    }
}
