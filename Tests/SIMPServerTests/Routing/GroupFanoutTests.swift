import SIMPCore
import Testing
@testable import SIMPServer

/// Who gets which entries of a group, decided without Redis.
@Suite struct GroupFanoutTests {
    func change(_ seq: UInt64, _ user: String, removes: Bool = false, after: UInt64 = 0) -> GroupChangeMade {
        GroupChangeMade(seq: seq, user: user, removes: removes, after: after, bytes: Self.changeBytes(user, removes ? .groupRemoved : .groupAdded, seq: seq))
    }

    static func changeBytes(_ member: String, _ kind: Simp_Message.MessageType, seq: UInt64) -> [UInt8] {
        var message = Simp_Message()
        message.messageID = "c\(seq)"
        message.toUser = "#team"
        message.groupSeq = seq
        message.type = kind
        message.content = member
        message.fromUser = "alice"
        return try! message.serializedBytes()
    }

    static func messageBytes(_ seq: UInt64) -> [UInt8] {
        var message = Simp_Message()
        message.messageID = "m\(seq)"
        message.toUser = "#team"
        message.groupSeq = seq
        return try! message.serializedBytes()
    }

    func summary(_ plan: [String: [GroupEntry]]) -> [String: [String]] {
        plan.mapValues { $0.map { "\($0.seq)\($0.scriptKind)" } }
    }

    @Test func messagesGoToEveryMemberAfterTheBatchInTheGroupsOrder() {
        let plan = GroupFanout.messageEntries([(seq: 5, bytes: [5]), (seq: 4, bytes: [4])], members: ["alice", "bob"])
        #expect(summary(plan) == ["alice": ["4m", "5m"], "bob": ["4m", "5m"]])
        #expect(GroupFanout.messageEntries([], members: ["alice"]).isEmpty)
    }

    @Test func someoneAddedGetsTheChangesFromTheirOwnOn() {
        let plan = GroupFanout.changeEntries([change(3, "carol"), change(4, "dave")], members: ["alice", "carol", "dave"])
        #expect(summary(plan) == ["alice": ["3m", "4m"], "carol": ["3a 0", "4m"], "dave": ["4a 0"]])
    }

    @Test func anAddCarriesThePlaceOfTheMembersLatestRemoval() {
        let plan = GroupFanout.changeEntries([change(9, "carol", after: 6)], members: ["alice", "carol"])
        #expect(summary(plan) == ["alice": ["9m"], "carol": ["9a 6"]])
    }

    @Test func someoneRemovedGetsTheChangesUpToTheirOwn() {
        let plan = GroupFanout.changeEntries([change(7, "bob", removes: true), change(8, "carol", removes: true)], members: ["alice"])
        #expect(summary(plan) == ["alice": ["7m", "8m"], "bob": ["7r"], "carol": ["7m", "8r"]])
    }

    /// The log read after a gap: a member walks it from whether they were in at their mark.
    @Test func whatAMemberMissedFollowsTheirMembershipThroughTheLog() {
        let log: [(seq: UInt64, bytes: [UInt8])] = [
            (4, Self.messageBytes(4)), (5, Self.changeBytes("carol", .groupRemoved, seq: 5)), (6, Self.messageBytes(6)),
            (7, Self.changeBytes("carol", .groupAdded, seq: 7)), (8, Self.messageBytes(8)),
        ]
        let carol = GroupFanout.missing(for: "carol", after: 3, isMember: true, log: log)
        #expect(carol.map { "\($0.seq)\($0.scriptKind)" } == ["4m", "5r", "7a 5", "8m"], "her add follows her removal at 5")
        let bob = GroupFanout.missing(for: "bob", after: 5, isMember: true, log: log)
        #expect(bob.map { "\($0.seq)\($0.scriptKind)" } == ["6m", "7m", "8m"])
        // A member whose mark is below what the log still holds starts at its oldest entry.
        let late = GroupFanout.missing(for: "bob", after: 1, isMember: true, log: log)
        #expect(late.first?.scriptKind == "mj" && late.count == 5)
        #expect(GroupFanout.missing(for: "dave", after: 0, isMember: false, log: log).isEmpty)
    }

    @Test func theSenderIsAnsweredWithThePlaceAndHowManyWillConfirm() {
        let accepted = GroupFanout.answers(id: "m1", group: "team", outcome: .stored(seq: 9, entry: []), recipients: 4)
        guard case .accepted(let answer)? = accepted.first?.body else { Issue.record("not accepted"); return }
        #expect(answer.toUser == "#team" && answer.seq == 9 && answer.recipients == 4)
        let refused = GroupFanout.answers(id: "m1", group: "team", outcome: .notAMember, recipients: 0)
        guard case .failed(let failed)? = refused.first?.body else { Issue.record("not failed"); return }
        #expect(failed.code == .notAMember && failed.reason == "you are not a member of #team")
    }

    @Test func groupRequestsAreCheckedBeforeRedis() {
        func problem(_ action: Simp_GroupRequest.Action, _ group: String, _ users: [String] = []) -> Simp_ErrorCode? {
            GroupRequestRules.problem(in: .with { $0.action = action; $0.group = group; $0.users = users }, from: "alice", maxMembers: 3)?.code
        }
        #expect(problem(.list, "") == nil)
        #expect(problem(.create, "Team") == .invalidName)
        #expect(problem(.create, "team", ["bob", "carol", "dave"]) == .groupFull)
        #expect(problem(.create, "team", ["bob", "carol", "alice"]) == nil)
        #expect(problem(.add, "team") == .badRequest)
        #expect(problem(.add, "team", ["Bob"]) == .unknownUser)
        #expect(problem(.remove, "team", ["alice"]) == .badRequest)
        #expect(problem(.leave, "team") == nil)
    }
}
