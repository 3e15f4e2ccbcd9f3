import Foundation
@testable import SIMPClient
import SIMPCore
import Testing

extension EventLog {
    /// The invitations heard, in order: (group, by).
    var invitations: [(group: String, by: String)] {
        all.compactMap { if case .groupInvited(let group, let by) = $0 { (group, by) } else { nil } }
    }
}

/// Groups by consent (issue 46, findings 2 and 3): an add by a stranger is an invitation the
/// user answers; a user who blocked the adder is neither added nor invited, and is not told
/// about; a blocked member's group messages are not given to the blocker; presence goes only
/// to the members of groups the user is in. Against a real server and Redis.
@Suite(.serialized) struct GroupConsentTests {
    /// mallory, a stranger, makes a group with alice: alice is invited on both her devices, not
    /// added; what mallory sends before alice accepts never reaches her, what comes after does.
    @Test func aStrangersAddIsAnInvitationOnEveryDevice() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "mallory"] { try await cluster.register(user) }
        let (phone, phoneLog) = try await cluster.connectedDevice("alice", "phone")
        let (laptop, laptopLog) = try await cluster.connectedDevice("alice", "laptop")
        let (mallory, malloryLog) = try await cluster.connectedDevice("mallory", "main")

        let made = try await mallory.createGroup("spam", members: ["alice"])
        #expect(made.invited == ["alice"])
        #expect(made.members.map(\.name) == ["mallory"])
        for log in [phoneLog, laptopLog] {
            #expect(await log.wait { $0.invitations.map(\.group) == ["spam"] && $0.invitations.first?.by == "mallory" })
        }
        let waiting = try await phone.groupInvitations()
        #expect(waiting.map(\.group) == ["spam"] && waiting.first?.by == "mallory")
        #expect(try await phone.groups().isEmpty)

        let before = try await mallory.send(to: "#spam", text: "before")
        #expect(await malloryLog.wait { log in log.groupAccepted.contains { $0.id == before && $0.recipients == 0 } })
        let joined = try await laptop.acceptGroup("spam")
        #expect(joined.members.map(\.name) == ["alice", "mallory"])
        #expect(await laptopLog.wait { log in log.groupChanges.contains { $0.change.member == "alice" && $0.change.by == "mallory" } },
                "her join names who invited her")
        let after = try await mallory.send(to: "#spam", text: "after")
        for log in [phoneLog, laptopLog] {
            #expect(await log.wait { $0.groupMessages("spam").map(\.id).contains(after) })
            #expect(log.groupMessages("spam").map(\.id) == [after], "nothing from before she accepted")
        }
        #expect(try await phone.groupInvitations().isEmpty)
        #expect(try await phone.acceptGroup("spam").members.count == 2, "accepting again changes nothing")
        for client in [phone, laptop, mallory] { await client.close() }
        await cluster.stop()
    }

    @Test func aDeclinedInvitationCannotBeAccepted() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "mallory"] { try await cluster.register(user) }
        let (alice, _) = try await cluster.connectedDevice("alice", "main")
        let (mallory, _) = try await cluster.connectedDevice("mallory", "main")
        try await mallory.createGroup("spam")
        #expect(try await mallory.addToGroup("spam", ["alice"]).invited == ["alice"])
        try await alice.declineGroup("spam")
        #expect(try await alice.groupInvitations().isEmpty)
        await expectCode(.notInvited) { try await alice.acceptGroup("spam") }
        await expectCode(.notInvited) { try await alice.declineGroup("spam") }
        #expect(try await mallory.groupMembers("spam").members.map(\.name) == ["mallory"])
        for client in [alice, mallory] { await client.close() }
        await cluster.stop()
    }

    /// alice blocked mallory: mallory's create and add are answered as invitations (the block
    /// is not told), but alice gets no notice and has nothing to accept. bob's invitation after
    /// them is the only one she hears.
    @Test func aUserWhoBlockedTheAdderIsNeitherAddedNorInvited() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "mallory"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await cluster.connectedDevice("alice", "main")
        let (bob, _) = try await cluster.connectedDevice("bob", "main")
        let (mallory, _) = try await cluster.connectedDevice("mallory", "main")
        try await alice.set(.groupAdds(.everyone))
        try await alice.block("mallory")

        #expect(try await mallory.createGroup("trap", members: ["alice"]).invited == ["alice"])
        try await mallory.createGroup("trap2")
        #expect(try await mallory.addToGroup("trap2", ["alice"]).invited == ["alice"])
        try await bob.createGroup("club", members: ["alice"])
        #expect(await aliceLog.wait { $0.groupChanges.contains { $0.change.member == "alice" } })
        #expect(aliceLog.invitations.isEmpty, "no notice of mallory's")
        #expect(try await alice.groups() == ["club"])
        #expect(try await alice.groupInvitations().isEmpty)
        await expectCode(.notInvited) { try await alice.acceptGroup("trap") }
        #expect(try await mallory.groupMembers("trap2").members.map(\.name) == ["mallory"])
        for client in [alice, bob, mallory] { await client.close() }
        await cluster.stop()
    }

    /// `group-adds`: a contact adds at once by default, nobody does with `nobody`, anyone does
    /// with `everyone`.
    @Test func theGroupAddsSettingDecidesWhoAddsAtOnce() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await cluster.connectedDevice("alice", "main")
        let (bob, _) = try await cluster.connectedDevice("bob", "main")
        let (carol, _) = try await cluster.connectedDevice("carol", "main")
        try await bob.addContact("alice")
        try await alice.acceptContact("bob")

        #expect(try await alice.settings().groupAdds == .contacts)
        let byContact = try await bob.createGroup("friends", members: ["alice"])
        #expect(byContact.invited.isEmpty && byContact.members.map(\.name) == ["alice", "bob"])
        #expect(try await carol.createGroup("strangers", members: ["alice"]).invited == ["alice"])

        #expect(try await alice.set(.groupAdds(.nobody)).groupAdds == .nobody)
        #expect(try await bob.createGroup("friends2", members: ["alice"]).invited == ["alice"])
        try await alice.set(.groupAdds(.everyone))
        #expect(try await carol.createGroup("open", members: ["alice"]).invited.isEmpty)
        #expect(try await alice.groups() == ["friends", "open"])
        #expect(await aliceLog.wait { Set($0.invitations.map(\.group)) == ["strangers", "friends2"] })
        await expectCode(.badRequest) { try await alice.changeSettings([.groupAdds: "on"]) }
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    /// alice blocked mallory, a member of her group: bob's messages reach her, mallory's do
    /// not (live or in the history); bob gets mallory's.
    @Test func aBlockedMembersGroupMessagesAreNotShownToTheBlocker() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "mallory"] { try await cluster.register(user) }
        try cluster.letAnyoneAdd(["alice", "mallory"])
        let (alice, aliceLog) = try await cluster.connectedDevice("alice", "main")
        let (bob, bobLog) = try await cluster.connectedDevice("bob", "main")
        let (mallory, malloryLog) = try await cluster.connectedDevice("mallory", "main")
        try await bob.createGroup("crew", members: ["alice", "mallory"])
        try await alice.block("mallory")

        let hidden = try await mallory.send(to: "#crew", text: "from mallory")
        #expect(await malloryLog.wait { $0.groupAccepted.contains { $0.id == hidden } })
        let shown = try await bob.send(to: "#crew", text: "from bob")
        #expect(await bobLog.wait { $0.groupMessages("crew").map(\.id).contains(hidden) }, "bob blocked nobody")
        #expect(await aliceLog.wait { $0.groupMessages("crew").map(\.id).contains(shown) })
        #expect(aliceLog.groupMessages("crew").map(\.id) == [shown], "mallory's came first in the order and was passed over")
        let history = try await alice.history(with: "#crew", limit: 50)
        #expect(history.contains { $0.id == shown } && !history.contains { $0.id == hidden })
        for client in [alice, bob, mallory] { await client.close() }
        await cluster.stop()
    }

    /// `--max-groups-per-user`: a create or accept past it is refused; an add past it is an
    /// invitation even from someone the setting lets add at once.
    @Test func aUserIsInAtMostMaxGroupsPerUser() async throws {
        let cluster = try await TestCluster.start { $0.maxGroupsPerUser = 2 }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (alice, _) = try await cluster.connectedDevice("alice", "main")
        let (bob, _) = try await cluster.connectedDevice("bob", "main")
        try await alice.set(.groupAdds(.everyone))
        try await alice.createGroup("g1")
        #expect(try await bob.createGroup("g2", members: ["alice"]).invited.isEmpty)
        await expectCode(.tooManyGroups) { try await alice.createGroup("g3") }
        #expect(try await bob.createGroup("g4", members: ["alice"]).invited == ["alice"])
        await expectCode(.tooManyGroups) { try await alice.acceptGroup("g4") }
        try await alice.leaveGroup("g1")
        #expect(try await alice.acceptGroup("g4").members.map(\.name) == ["alice", "bob"])
        #expect(try await alice.groups() == ["g2", "g4"])
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// Presence goes to the members of groups the user is in: an invitation alice has not
    /// accepted shows mallory nothing of her.
    @Test func anInvitationSharesNoPresence() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "mallory"] { try await cluster.register(user) }
        let (alice, _) = try await cluster.connectedDevice("alice", "main")
        let (mallory, _) = try await cluster.connectedDevice("mallory", "main")
        try await mallory.createGroup("watch", members: ["alice"])
        #expect(try await mallory.presence().isEmpty)
        try await alice.acceptGroup("watch")
        #expect(try await mallory.presence().map(\.user) == ["alice"])
        for client in [alice, mallory] { await client.close() }
        await cluster.stop()
    }
}
