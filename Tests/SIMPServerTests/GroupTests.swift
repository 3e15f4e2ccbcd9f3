import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import Testing

extension EventLog {
    /// Group messages in the order they reached the application.
    func groupMessages(_ group: String) -> [IncomingMessage] {
        messages.filter { $0.group == group }
    }

    var groupAccepted: [(id: String, seq: UInt64, recipients: Int)] {
        all.compactMap { if case .groupAccepted(let id, _, let seq, let recipients) = $0 { (id, seq, recipients) } else { nil } }
    }

    var memberDeliveries: [(id: String, member: String)] {
        all.compactMap { if case .memberDelivered(let id, _, let member, _) = $0 { (id, member) } else { nil } }
    }

    var groupChanges: [(change: GroupChange, seq: UInt64)] {
        all.compactMap { if case .groupChanged(_, let change, let seq) = $0 { (change, seq) } else { nil } }
    }
}

/// Checks that what one device saw of a group is a part of the group's one order: no id
/// twice, places strictly rising, each id at the place the others saw it.
func expectOneOrder(_ seen: [IncomingMessage], places: inout [String: UInt64], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(Set(seen.map(\.id)).count == seen.count, "each message once", sourceLocation: sourceLocation)
    #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.groupSeq < $1.groupSeq }, "in the group's order", sourceLocation: sourceLocation)
    for message in seen {
        if let place = places[message.id] {
            #expect(place == message.groupSeq, "\(message.id) at one place for everyone", sourceLocation: sourceLocation)
        } else {
            places[message.id] = message.groupSeq
        }
    }
}

/// Groups (docs/PROTOCOL.md, Groups): one order per group for every member and device,
/// offline members catch up from their inbox, a removed member gets nothing after the removal,
/// and the sender hears from each member.
@Suite(.serialized) struct GroupTests {
    func device(_ cluster: TestCluster, _ user: String, _ name: String = "main") async throws -> (SIMPClient, EventLog) {
        try await cluster.connectedDevice(user, name)
    }

    static func sendAll(_ client: SIMPClient, to group: String, prefix: String, count: Int) async throws -> [String] {
        var ids: [String] = []
        for index in 0..<count { ids.append(try await client.send(to: group, text: "\(prefix)-\(index)")) }
        return ids
    }

    @Test func fiveMembersThreeSendersOneOrder() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "carol", "dave", "erin"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await device(cluster, "alice")
        let (phone, phoneLog) = try await device(cluster, "bob", "phone")
        let (laptop, laptopLog) = try await device(cluster, "bob", "laptop")
        let (carol, carolLog) = try await device(cluster, "carol")
        try cluster.letAnyoneAdd(["bob", "carol", "dave", "erin"])
        let created = try await alice.createGroup("team", members: ["bob", "carol", "dave", "erin"])
        #expect(created.members.map(\.name) == ["alice", "bob", "carol", "dave", "erin"])
        #expect(created.members.first { $0.name == "alice" }?.role == .owner)

        // dave and erin are offline throughout the burst.
        async let a = Self.sendAll(alice, to: "#team", prefix: "alice", count: 30)
        async let b = Self.sendAll(phone, to: "#team", prefix: "bob", count: 30)
        async let c = Self.sendAll(carol, to: "#team", prefix: "carol", count: 30)
        let (fromAlice, fromBob, fromCarol) = try await (a, b, c)
        let everything = Set(fromAlice + fromBob + fromCarol)

        let online = [(aliceLog, fromAlice), (phoneLog, fromBob), (laptopLog, [String]()), (carolLog, fromCarol)]
        for (log, own) in online {
            #expect(await log.wait { Set($0.groupMessages("team").map(\.id)).union(own) == everything }, "\(log.groupMessages("team").count)")
        }
        let (dave, daveLog) = try await device(cluster, "dave")
        let (erin, erinLog) = try await device(cluster, "erin")
        for log in [daveLog, erinLog] {
            #expect(await log.wait { Set($0.groupMessages("team").map(\.id)) == everything })
        }

        var places: [String: UInt64] = [:]
        for (log, own) in online + [(daveLog, []), (erinLog, [])] {
            let seen = log.groupMessages("team")
            expectOneOrder(seen, places: &places)
            #expect(Set(seen.map(\.id)).isDisjoint(with: own), "a device does not show what it sent itself")
        }
        // The laptop shows what bob sent from the phone, from bob.
        #expect(laptopLog.groupMessages("team").filter { $0.from == "bob" }.map(\.id) == fromBob)
        #expect(laptopLog.groupMessages("team").filter { $0.from == "bob" }.allSatisfy { $0.fromDevice == "phone" })
        // Every sender's accepted place is the place the others saw.
        for (log, own) in [(aliceLog, fromAlice), (phoneLog, fromBob), (carolLog, fromCarol)] {
            let accepted = log.groupAccepted
            #expect(Set(accepted.map(\.id)) == Set(own))
            #expect(accepted.allSatisfy { places[$0.id] == $0.seq && $0.recipients == 4 })
        }
        #expect(Set(places.values).count == 90, "90 places, one per message")

        // Each member (other than the sender) confirms each message once.
        for (log, own, sender) in [(aliceLog, fromAlice, "alice"), (carolLog, fromCarol, "carol")] {
            let expected = Set(["alice", "bob", "carol", "dave", "erin"]).subtracting([sender])
            #expect(await log.wait { log in
                let byID = Dictionary(grouping: log.memberDeliveries.filter { own.contains($0.id) }, by: \.id)
                return byID.count == own.count && byID.values.allSatisfy { Set($0.map(\.member)) == expected }
            })
            let counts = Dictionary(grouping: log.memberDeliveries.filter { own.contains($0.id) }, by: { "\($0.id) \($0.member)" })
            #expect(counts.values.allSatisfy { $0.count == 1 }, "once per member, however many devices it has")
        }
        for client in [alice, phone, laptop, carol, dave, erin] { await client.close() }
        await cluster.stop()
    }

    @Test func aRemovedMemberGetsNothingAfterTheRemoval() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await device(cluster, "alice")
        let (bob, bobLog) = try await device(cluster, "bob")
        let (carol, carolLog) = try await device(cluster, "carol")
        try cluster.letAnyoneAdd(["bob", "carol"])
        try await alice.createGroup("crew", members: ["bob", "carol"])
        let first = try await Self.sendAll(alice, to: "#crew", prefix: "before", count: 15)
        // `send` returns once the message is queued: the removal follows their acceptance.
        #expect(await aliceLog.wait { Set($0.groupAccepted.map(\.id)).isSuperset(of: first) })
        let removal = try await alice.removeFromGroup("crew", ["carol"])
        #expect(removal.members.map(\.name) == ["alice", "bob"])
        let second = try await Self.sendAll(alice, to: "#crew", prefix: "after", count: 15)

        #expect(await bobLog.wait { $0.groupMessages("crew").count == 30 })
        #expect(await carolLog.wait { log in log.groupChanges.contains { $0.change == GroupChange(kind: .removed, member: "carol", by: "alice") } })
        // Its receipt comes after every entry before it: nothing later can arrive now.
        #expect(carolLog.groupMessages("crew").map(\.id) == first)
        #expect(carolLog.groupMessages("crew").allSatisfy { $0.groupSeq < removal.seq })
        #expect(bobLog.groupChanges.contains { $0.change.kind == .removed && $0.seq == removal.seq })
        #expect(bobLog.groupMessages("crew").map(\.id) == first + second)

        // carol can no longer send to it, nor read its history, nor list its members.
        let id = try await carol.send(to: "#crew", text: "still here?")
        #expect(await carolLog.wait { $0.failed.contains { $0.id == id && $0.reason.contains("not a member") } })
        await #expect(throws: ClientError.self) { try await carol.history(with: "#crew") }
        #expect(try await carol.groups().isEmpty)
        #expect(try await bob.groups() == ["crew"])
        let history = try await bob.history(with: "#crew", limit: 100)
        #expect(history.filter { $0.groupChange == nil }.map(\.id) == first + second)
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    /// A member added later reads the group's history from their add on, not what was said
    /// before; the members before them read it all.
    @Test func aMemberAddedLaterReadsTheHistoryFromTheirAddOn() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await device(cluster, "alice")
        let (bob, _) = try await device(cluster, "bob")
        let (carol, _) = try await device(cluster, "carol")
        try cluster.letAnyoneAdd(["bob", "carol"])
        try await alice.createGroup("crew", members: ["bob"])
        let before = try await Self.sendAll(alice, to: "#crew", prefix: "before", count: 5)
        #expect(await aliceLog.wait { Set($0.groupAccepted.map(\.id)).isSuperset(of: before) })
        let added = try await alice.addToGroup("crew", ["carol"])
        let after = try await Self.sendAll(alice, to: "#crew", prefix: "after", count: 5)
        #expect(await aliceLog.wait { Set($0.groupAccepted.map(\.id)).isSuperset(of: after) })

        let carols = try await carol.history(with: "#crew", limit: 100)
        #expect(carols.filter { $0.groupChange == nil }.map(\.id) == after)
        #expect(carols.first?.groupChange == GroupChange(kind: .added, member: "carol", by: "alice") && carols.first?.groupSeq == added.seq)
        // Paged two at a time, the pages stop at the add.
        var paged: [IncomingMessage] = []
        var page = try await carol.historyPage(with: "#crew", limit: 2)
        paged = page.messages
        while page.more {
            page = try await carol.historyPage(with: "#crew", before: page.nextBefore, limit: 2)
            paged = page.messages + paged
        }
        #expect(paged.map(\.id) == carols.map(\.id))
        let bobs = try await bob.history(with: "#crew", limit: 100)
        #expect(bobs.filter { $0.groupChange == nil }.map(\.id) == before + after)
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    @Test func membershipRulesAreEnforced() async throws {
        let cluster = try await TestCluster.start { $0.maxGroupMembers = 3 }
        for user in ["alice", "bob", "carol", "dave"] { try await cluster.register(user) }
        let (alice, _) = try await device(cluster, "alice")
        let (bob, bobLog) = try await device(cluster, "bob")
        try cluster.letAnyoneAdd(["bob", "carol", "dave"])
        try await alice.createGroup("club", members: ["bob"])

        await expectCode(.groupExists) { try await bob.createGroup("club") }
        await expectCode(.notGroupAdmin) { try await bob.addToGroup("club", ["carol"]) }
        await expectCode(.unknownUser) { try await alice.addToGroup("club", ["nobody"]) }
        await expectCode(.noSuchGroup) { try await alice.groupMembers("nothere") }
        await expectCode(.invalidName) { try await alice.createGroup("Bad Name") }
        try await alice.addToGroup("club", ["carol"])
        await expectCode(.groupFull) { try await alice.addToGroup("club", ["dave"]) }
        try await alice.makeGroupAdmins("club", ["bob"])
        try await bob.removeFromGroup("club", ["carol"])
        await expectCode(.notGroupAdmin) { try await bob.removeFromGroup("club", ["alice"]) }
        let id = try await bob.send(to: "#nothere", text: "hello?")
        #expect(await bobLog.wait { $0.failed.contains { $0.id == id } })
        // The owner leaves: the admin owns it.
        try await alice.leaveGroup("club")
        let members = try await bob.groupMembers("club")
        #expect(members.members.map(\.name) == ["bob"] && members.members.first?.role == .owner)
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }
}
