import Foundation
@testable import SIMPClient
import SIMPCore
import Testing

/// Read receipts in groups (docs/PROTOCOL.md, Read receipts; issue 47), against a real server
/// and Redis: a group send's handle hears each member's delivery and read, then is final; a
/// mark the server cannot check against the group and the reader's copies is left out and
/// counted; the reader's setting and the sender's blocks hold as one to one.
@Suite(.serialized) struct GroupReadReceiptTests {
    static let unknown = #"simp_read_marks_left_out_total{reason="unknown"}"#
    static let notMember = #"simp_read_marks_left_out_total{reason="not-member"}"#
    static let unconfirmed = #"simp_read_marks_left_out_total{reason="unconfirmed"}"#

    /// alice, bob and carol in `#crew`, bob and carol connected.
    static func crew(_ cluster: TestCluster) async throws -> (alice: (SIMPClient, EventLog), bob: (SIMPClient, EventLog), carol: (SIMPClient, EventLog)) {
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        let alice = try await cluster.connectedDevice("alice", "main")
        try cluster.letAnyoneAdd(["bob", "carol"])
        _ = try await alice.0.createGroup("crew", members: ["bob", "carol"])
        return (alice, try await cluster.connectedDevice("bob", "phone"), try await cluster.connectedDevice("carol", "main"))
    }

    @Test func aGroupSendsHandleHearsEachMembersDeliveryAndReadThenIsFinal() async throws {
        let cluster = try await TestCluster.start()
        let ((alice, aliceLog), (bob, bobLog), (carol, carolLog)) = try await Self.crew(cluster)
        let (tablet, tabletLog) = try await cluster.connectedDevice("bob", "tablet")

        let handle = try await alice.sendTracked(to: "#crew", text: "lunch?")
        let watching = Task {
            var heard: [MessageStatus] = []
            for await status in handle.updates() { heard.append(status) }
            return heard
        }
        for log in [bobLog, carolLog] { #expect(await log.wait { $0.groupMessages("crew").count == 1 }) }
        #expect(await eventually { handle.status.isSettled })
        #expect(handle.status.members == ["bob": .delivered, "carol": .delivered])
        #expect(bobLog.groupMessages("crew")[0].groupSeq > 0)

        try await bob.markRead(bobLog.groupMessages("crew"))
        #expect(await eventually { handle.status.members["bob"] == .read })
        #expect(handle.status.stage == .delivered, "carol has not read it")
        #expect(!handle.status.isFinal)
        // bob's other device learns he read it; the device that read hears nothing of it.
        #expect(await tabletLog.wait { $0.reads.map(\.id) == [handle.id] && $0.reads.allSatisfy { $0.by == "bob" } })

        try await carol.markRead(carolLog.groupMessages("crew"))
        let isFinal = await eventually { handle.status.isFinal }
        #expect(isFinal)
        if !isFinal { watching.cancel() }
        let heard = await watching.value
        #expect(heard.last?.stage == .read && heard.last?.isFinal == true, "the updates end once every member read it")
        #expect(heard.last?.members == ["bob": .read, "carol": .read])
        #expect(zip(heard, heard.dropFirst()).allSatisfy { $0.stage <= $1.stage })
        #expect(heard.contains { $0.members == ["bob": .read, "carol": .delivered] && $0.stage == .delivered })

        // alice's events: each member's read, each after that member's delivery.
        #expect(await aliceLog.wait { Set($0.reads.map(\.by)) == ["bob", "carol"] })
        #expect(aliceLog.reads.allSatisfy { $0.id == handle.id })
        for member in ["bob", "carol"] {
            let delivered = aliceLog.index { if case .memberDelivered(handle.id, "#crew", member, _) = $0 { true } else { false } }
            let read = aliceLog.index { if case .read(handle.id, "alice", member) = $0 { true } else { false } }
            #expect(delivered != nil && read != nil && delivered! < read!, "\(member)")
        }
        #expect(bobLog.reads.isEmpty && carolLog.reads.isEmpty)
        #expect(cluster.metric(Self.unknown) == 0 && cluster.metric(Self.notMember) == 0 && cluster.metric(Self.unconfirmed) == 0)
        for client in [alice, bob, carol, tablet] { await client.close() }
        await cluster.stop()
    }

    @Test func marksOfNonMembersAndForgedPlacesAreLeftOutAndCounted() async throws {
        let cluster = try await TestCluster.start()
        let ((alice, aliceLog), (bob, bobLog), (carol, _)) = try await Self.crew(cluster)
        let (mallory, malloryLog) = try await cluster.connectedClient("mallory")
        let first = try await alice.send(to: "#crew", text: "one")
        let second = try await alice.send(to: "#crew", text: "two")
        _ = try await alice.send(to: "mallory", text: "hi")
        #expect(await bobLog.wait { $0.groupMessages("crew").count == 2 })
        #expect(await malloryLog.wait { $0.messages.count == 1 })
        let (one, two) = (bobLog.groupMessages("crew")[0], bobLog.groupMessages("crew")[1])
        #expect(one.id == first && two.id == second)

        // mallory is no member: her mark (at a seq she confirmed) tells nothing.
        var stolen = one
        stolen.seq = malloryLog.messages[0].seq
        try await mallory.markRead([stolen])
        #expect(cluster.metric(Self.notMember) == 1)
        // bob names the first at the second's place, an id alice never sent, and a place the
        // group's copies to him have not reached.
        var misplaced = one
        misplaced.groupSeq = two.groupSeq
        var invented = one
        invented.id = "no-such-id"
        var ahead = two
        ahead.groupSeq = two.groupSeq + 5
        try await bob.markRead([misplaced, invented, ahead])
        #expect(cluster.metric(Self.unknown) == 3)
        #expect(cluster.metric(Self.unconfirmed) == 0)

        // Notices keep the inbox's order: had any of those been told, it would be here first.
        try await bob.markRead([two])
        #expect(await aliceLog.wait { !$0.reads.isEmpty })
        #expect(aliceLog.reads.map(\.id) == [second] && aliceLog.reads.map(\.by) == ["bob"])
        for client in [alice, bob, carol, mallory] { await client.close() }
        await cluster.stop()
    }

    @Test func aReaderWithReadReceiptsOffOrASenderWhoBlockedThemHearsNothing() async throws {
        let cluster = try await TestCluster.start()
        let ((alice, aliceLog), (bob, bobLog), (carol, carolLog)) = try await Self.crew(cluster)
        let (tablet, tabletLog) = try await cluster.connectedDevice("bob", "tablet")
        var ids: [String] = []
        for text in ["a", "b", "c"] { ids.append(try await alice.send(to: "#crew", text: text)) }
        #expect(await bobLog.wait { $0.groupMessages("crew").count == 3 })
        #expect(await carolLog.wait { $0.groupMessages("crew").count == 3 })
        let (bobs, carols) = (bobLog.groupMessages("crew"), carolLog.groupMessages("crew"))

        // bob tells nobody, not even his other devices.
        try await bob.set(.readReceipts(false))
        try await bob.markRead([bobs[0]])
        try await bob.set(.readReceipts(true))
        // alice blocked carol: she takes none of carol's reads.
        _ = try await alice.block("carol")
        try await carol.markRead([carols[1]])
        _ = try await alice.unblock("carol")
        try await carol.markRead([carols[2]])
        try await bob.markRead([bobs[2]])
        // Notices keep the inbox's order: had either of the first two been told, it would be here first.
        #expect(await aliceLog.wait { $0.reads.count == 2 })
        #expect(aliceLog.reads.map(\.id) == [ids[2], ids[2]] && Set(aliceLog.reads.map(\.by)) == ["bob", "carol"])
        #expect(await tabletLog.wait { !$0.reads.isEmpty })
        #expect(tabletLog.reads.map(\.id) == [ids[2]])
        #expect(cluster.metric(Self.unknown) == 0 && cluster.metric(Self.notMember) == 0)
        for client in [alice, bob, carol, tablet] { await client.close() }
        await cluster.stop()
    }
}
