import Foundation
import SIMPClient
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// A group whose members are on two simp-server processes: one order for everyone, whichever
/// node stored each message, through a node killed with SIGKILL and a Redis restart.
@Suite(.serialized) struct GroupNodeTests {
    enum Fault: String, CustomStringConvertible, CaseIterable {
        case none, killANode, restartRedis
        var description: String { rawValue }
    }

    func device(_ nodes: Deployment, _ user: String, _ name: String, startingAt first: Int) async throws -> NodeUser {
        var config = nodes.configuration(startingAt: first)
        config.device = name
        let client = SIMPClient(configuration: config)
        let log = EventLog(client)
        try await client.connect(user: user, password: "pw-\(user)")
        return NodeUser(name: user, client: client, log: log)
    }

    /// alice and bob's phone start on node 1, bob's laptop and carol on node 2; dave and erin
    /// are offline during the burst. Three senders, thirty messages each, at once.
    @Test(arguments: Fault.allCases)
    func fiveMembersOnTwoNodes(_ fault: Fault) async throws {
        let nodes = try Deployment(nodes: 2)
        defer { nodes.stop() }
        let alice = try await nodes.connect("alice", startingAt: 0)
        let phone = try await nodes.connect("bob", startingAt: 0) { $0.device = "phone" }
        let carol = try await nodes.connect("carol", startingAt: 1)
        for user in ["dave", "erin"] { try await SIMPClient(configuration: nodes.configuration(startingAt: 0)).register(user: user, password: "pw-\(user)") }
        let laptop = try await device(nodes, "bob", "laptop", startingAt: 1)
        try await nodes.waitForPresence(of: ["alice", "bob", "carol"])
        try nodes.letAnyoneAdd(["bob", "carol", "dave", "erin"])
        try await alice.client.createGroup("team", members: ["bob", "carol", "dave", "erin"])

        async let a = GroupTests.sendAll(alice.client, to: "#team", prefix: "alice", count: 30)
        async let b = GroupTests.sendAll(phone.client, to: "#team", prefix: "bob", count: 30)
        async let c = GroupTests.sendAll(carol.client, to: "#team", prefix: "carol", count: 30)
        // Mid-burst: some of alice's messages accepted, not all.
        _ = await alice.log.wait { $0.groupAccepted.count >= 5 }
        switch fault {
        case .none: break
        case .killANode:
            // alice's and the phone's node dies mid-burst: they move to node 2 and send again.
            nodes.servers[0].process.signal(SIGKILL)
            _ = nodes.servers[0].process.waitForExit(timeout: 5)
        case .restartRedis:
            guard case .single(let redis) = nodes.redis else { Issue.record("one Redis"); return }
            try redis.restart()
        }
        let (fromAlice, fromBob, fromCarol) = try await (a, b, c)
        let everything = Set(fromAlice + fromBob + fromCarol)
        let senders = [(alice, fromAlice), (phone, fromBob), (carol, fromCarol)]
        for (sender, own) in senders {
            let accepted = await sender.log.wait(timeout: .seconds(60)) { Set($0.groupAccepted.map(\.id)) == Set(own) }
            #expect(accepted, "\(sender.name): \(sender.log.groupAccepted.count) accepted, failed \(sender.log.failed)")
            if !accepted {
                for (index, node) in nodes.servers.enumerated() {
                    Issue.record("node \(index + 1): \(node.process.stderr.split(separator: "\n").filter { !$0.contains(" info ") }.suffix(30).joined(separator: "\n"))")
                }
            }
        }
        let dave = try await device(nodes, "dave", "main", startingAt: 1)
        let erin = try await device(nodes, "erin", "main", startingAt: 0)
        var places: [String: UInt64] = [:]
        for (member, own) in senders + [(laptop, []), (dave, []), (erin, [])] {
            #expect(await member.log.wait(timeout: .seconds(60)) { Set($0.groupMessages("team").map(\.id)).union(own) == everything },
                    "\(member.name): \(member.log.groupMessages("team").count) of \(everything.count - own.count), missing \(everything.subtracting(own).subtracting(member.log.groupMessages("team").map(\.id)).map { id in [fromAlice, fromBob, fromCarol].map { $0.firstIndex(of: id).map(String.init) ?? "-" }.joined(separator: "/") })")
            expectOneOrder(member.log.groupMessages("team"), places: &places)
        }
        #expect(Set(places.values).count == 90)
        if fault == .none {
            // Each member's confirmation reaches the sender across nodes, once per member (bob's
            // two devices on two nodes each confirming at once: still once).
            let expected = Set(["bob", "carol", "dave", "erin"])
            #expect(await alice.log.wait(timeout: .seconds(30)) { log in
                let byID = Dictionary(grouping: log.memberDeliveries, by: \.id)
                return byID.count == 30 && byID.values.allSatisfy { Set($0.map(\.member)) == expected }
            }, "\(Dictionary(grouping: alice.log.memberDeliveries, by: \.id).values.map { $0.map(\.member).sorted() })")
            #expect(Dictionary(grouping: alice.log.memberDeliveries, by: { "\($0.id) \($0.member)" }).values.allSatisfy { $0.count == 1 })
        }
        for member in [alice, phone, carol, laptop, dave, erin] { await member.client.close() }
    }

    /// carol on the other node is removed half-way: she has everything before the removal and
    /// nothing after it.
    @Test func aMemberRemovedOnTheOtherNode() async throws {
        let nodes = try Deployment(nodes: 2)
        defer { nodes.stop() }
        let alice = try await nodes.connect("alice", startingAt: 0)
        let bob = try await nodes.connect("bob", startingAt: 1)
        let carol = try await nodes.connect("carol", startingAt: 1)
        try await nodes.waitForPresence(of: ["alice", "bob", "carol"])
        try nodes.letAnyoneAdd(["bob", "carol"])
        try await alice.client.createGroup("crew", members: ["bob", "carol"])
        let first = try await GroupTests.sendAll(alice.client, to: "#crew", prefix: "before", count: 15)
        #expect(await alice.log.wait { Set($0.groupAccepted.map(\.id)).isSuperset(of: first) })
        let removal = try await alice.client.removeFromGroup("crew", ["carol"])
        let second = try await GroupTests.sendAll(alice.client, to: "#crew", prefix: "after", count: 15)
        #expect(await bob.log.wait { $0.groupMessages("crew").count == 30 })
        #expect(await carol.log.wait { $0.groupChanges.contains { $0.change.kind == .removed && $0.change.member == "carol" } })
        #expect(carol.log.groupMessages("crew").map(\.id) == first)
        #expect(carol.log.groupMessages("crew").allSatisfy { $0.groupSeq < removal.seq })
        #expect(bob.log.groupMessages("crew").map(\.id) == first + second)
        for member in [alice, bob, carol] { await member.client.close() }
    }
}
