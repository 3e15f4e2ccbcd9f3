import Foundation
import SIMPClient
import SIMPCore
import Testing

extension EventLog {
    var presenceChanges: [PresenceInfo] {
        all.compactMap { if case .presence(let change) = $0 { change } else { nil } }
    }
}

/// Presence (docs/PROTOCOL.md, Typing and presence): contacts and group members hear a user
/// come online and go offline, over UDP, with nothing written for it; `/presence` lists them;
/// last-seen off hides a user.
@Suite(.serialized) struct PresenceEventTests {
    /// A device is present once its session is bound: a message to oneself, delivered, shows it is.
    static func bound(_ client: SIMPClient, _ log: EventLog, as user: String) async throws {
        let id = try await client.send(to: user, text: "bound")
        #expect(await log.wait { $0.delivered.contains(id) })
    }

    /// bob's contact alice and his group co-member carol; dave is neither.
    static func circle(_ cluster: TestCluster) async throws -> [String: (SIMPClient, EventLog)] {
        for user in ["alice", "bob", "carol", "dave"] { try await cluster.register(user) }
        var clients: [String: (SIMPClient, EventLog)] = [:]
        for user in ["alice", "carol", "dave"] { clients[user] = try await cluster.connectedDevice(user, "main") }
        let (bob, bobLog) = try await cluster.connectedDevice("bob", "main")
        // Present before anyone may see it: the only change alice and carol hear is its end.
        try await bound(bob, bobLog, as: "bob")
        try await bob.addContact("alice")
        try await clients["alice"]!.0.acceptContact("bob")
        // A stranger's add is an invitation: bob is carol's co-member once he accepts it.
        try await clients["carol"]!.0.createGroup("crew", members: ["bob"])
        try await bob.acceptGroup("crew")
        await bob.close()
        return clients
    }

    @Test func contactsAndGroupMembersHearAUserComeAndGo() async throws {
        let cluster = try await TestCluster.start()
        let clients = try await Self.circle(cluster)
        let (alice, aliceLog) = clients["alice"]!
        let (carol, carolLog) = clients["carol"]!
        let (dave, _) = clients["dave"]!
        for log in [aliceLog, carolLog] { #expect(await log.wait { $0.presenceChanges.map(\.state) == [.offline] }) }
        let before = try TypingTests.keys(cluster)
        let relayed = cluster.metric("simp_presence_relayed_total")

        let (bob, _) = try await cluster.connectedDevice("bob", "phone")
        for log in [aliceLog, carolLog] {
            #expect(await log.wait(timeout: .seconds(5)) { $0.presenceChanges.count == 2 })
            #expect(log.presenceChanges.last?.user == "bob" && log.presenceChanges.last?.state == .online)
        }
        let listed = try await alice.presence()
        #expect(listed.map(\.user) == ["bob"])
        #expect(listed.first?.state == .online)

        let closing = Date()
        await bob.close()
        for log in [aliceLog, carolLog] {
            #expect(await log.wait(timeout: .seconds(5)) { $0.presenceChanges.count == 3 })
            #expect(log.presenceChanges.last?.state == .offline && log.presenceChanges.last?.lastSeen != nil)
        }
        // Measured, not asserted (a shared machine): docs/PROTOCOL.md quotes it.
        if let heard = aliceLog.presenceTimes.last { print("presence: bob's close to alice's offline event: \(heard.timeIntervalSince(closing) * 1000) ms") }
        // Two changes, each to alice and carol only: dave is neither contact nor co-member.
        #expect(cluster.metric("simp_presence_relayed_total") - relayed == 4)
        let offline = try await alice.presence()
        #expect(offline.first?.state == .offline && offline.first?.lastSeen != nil)
        #expect(try TypingTests.keys(cluster) == before, "presence leaves no key of its own in Redis")
        for client in [alice, carol, dave] { await client.close() }
        await cluster.stop()
    }

    @Test func lastSeenOffHidesAUser() async throws {
        let cluster = try await TestCluster.start()
        let clients = try await Self.circle(cluster)
        let (alice, aliceLog) = clients["alice"]!
        #expect(await aliceLog.wait { $0.presenceChanges.count == 1 })
        let (bob, _) = try await cluster.connectedDevice("bob", "phone")
        #expect(await aliceLog.wait { $0.presenceChanges.count == 2 })
        try await bob.set(.lastSeen(false))
        #expect(try await alice.presence() == [PresenceInfo(user: "bob", state: .hidden, lastSeen: nil)])
        let relayed = cluster.metric("simp_presence_relayed_total")
        await bob.close()
        // carol's own change is told (she is bob's co-member, not alice's): bob's is not.
        let (again, againLog) = try await cluster.connectedDevice("bob", "laptop")
        try await Self.bound(again, againLog, as: "bob")
        try await again.set(.lastSeen(true))
        await again.close()
        #expect(await aliceLog.wait { $0.presenceChanges.count == 3 })
        #expect(aliceLog.presenceChanges.last?.user == "bob" && aliceLog.presenceChanges.last?.state == .offline)
        // bob's offline with last-seen off, and his laptop's online then, were told to nobody.
        #expect(cluster.metric("simp_presence_relayed_total") - relayed == 2, "only the last offline, to alice and carol")
        for (client, _) in clients.values { await client.close() }
        await cluster.stop()
    }
}
