import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Groups as MLS groups (docs/E2EE.md, Part 6) against a real server and Redis: a group of
/// three users, one with two devices, reads every message on every device, decrypted; none of
/// the text is in Redis; a member added later reads from its addition on, a removed one is
/// removed from the MLS group by the remover's commit and reads nothing sent after.
@Suite(.serialized) struct EncryptedGroupTests {
    typealias Device = (client: SIMPClient, log: EventLog)

    /// alice (phone and a linked laptop), bob and carol, each with an identity, all letting
    /// anyone add them to groups.
    static func people(_ cluster: TestCluster, _ directories: [String]) async throws -> (phone: Device, laptop: Device, bob: Device, carol: Device) {
        let pair = try await EncryptedConversationTests.aliceAndBob(cluster, directories)
        try await cluster.register("carol")
        let carol = try await EncryptedConversationTests.connected(cluster, "carol", directories[3])
        #expect(try await carol.0.setUpIdentity() == .created)
        let laptop = try await EncryptedConversationTests.connected(cluster, "alice", directories[2], device: "laptop")
        let shown = DeviceLinkingTests.ShownCode()
        let linking = Task { try await laptop.0.linkThisDevice(timeoutSeconds: 60) { shown.show($0) } }
        let code = try #require(try await DeviceLinkingTests.code(of: "laptop", on: pair.alice.0))
        try await pair.alice.0.approveLink(device: "laptop", code: code)
        #expect(try await linking.value == .ready)
        for client in [pair.alice.0, pair.bob.0, carol.0] { try await client.set(.groupAdds(.everyone)) }
        return (pair.alice, laptop, pair.bob, carol)
    }

    /// dave, registered, connected on `directory` and with an identity of his own.
    static func dave(_ cluster: TestCluster, _ directory: String) async throws -> Device {
        try await cluster.register("dave")
        let joined = try await EncryptedConversationTests.connected(cluster, "dave", directory)
        #expect(try await joined.0.setUpIdentity() == .created)
        return (joined.0, joined.1)
    }

    static func reads(_ device: Device, _ id: String, _ text: String) async -> Bool {
        await device.log.wait { $0.messages.contains { $0.id == id && $0.text == text && $0.encrypted } }
    }

    @Test func everyDeviceOfEveryMemberReadsTheGroupAndRedisHoldsNoText() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await Self.people(cluster, directories)
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])

        let first = "the group's first secret"
        let id = try await bob.client.send(to: "#trio", text: first)
        for device in [phone, laptop, carol] { #expect(await Self.reads(device, id, first)) }
        // Every member writes, from every device; every other device reads it.
        let everyone = [phone, laptop, bob, carol]
        var written: [(id: String, text: String, by: Int)] = []
        for (index, device) in everyone.enumerated() {
            let text = "secret number \(index) in the group"
            written.append((try await device.client.send(to: "#trio", text: text), text, index))
        }
        // Every device but the sender's reads it (alice's other device as her copy).
        for (id, text, by) in written {
            for (index, device) in everyone.enumerated() where index != by { #expect(await Self.reads(device, id, text), "\(text) on \(index)") }
        }
        // A long text in sealed parts.
        let long = String(repeating: "a long group secret of many parts; ", count: 600)
        let longID = try await carol.client.send(to: "#trio", text: long)
        for device in [phone, laptop, bob] { #expect(await Self.reads(device, longID, long)) }

        let dump = try EncryptedConversationTests.everythingInRedis(cluster)
        for text in [first, long] + written.map(\.text) { #expect(!dump.contains(text), "\(text.prefix(30)) is in Redis") }
        for device in everyone { #expect(device.client.decryptionFailures().isEmpty, "every device decrypted everything") }
        for device in [phone, laptop, bob, carol] { await device.client.close() }
        await cluster.stop()
    }

    /// A stranger's add is an invitation; once dave accepts, the inviter's device commits his
    /// devices in as soon as it is told, so dave can write first, before any member sends.
    @Test func anInviteeWhoAcceptsCanWriteAtOnce() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<6).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await Self.people(cluster, directories)
        let dave = try await Self.dave(cluster, directories[4])
        _ = try await phone.client.createGroup("deck", members: ["bob", "carol"])
        let before = try await phone.client.send(to: "#deck", text: "before dave")
        #expect(await Self.reads(bob, before, "before dave"))

        _ = try await phone.client.addToGroup("deck", ["dave"])
        #expect(await dave.1.wait { $0.all.contains { if case .groupInvited(group: "deck", _) = $0 { true } else { false } } })
        _ = try await dave.0.acceptGroup("deck")
        // The inviter's devices commit dave in when told of the acceptance: wait for the epoch to move.
        let epochAtAccept = try await bob.client.fetchCommits(in: "#deck", fromEpoch: 0).epoch
        var epoch = epochAtAccept
        for _ in 0..<300 where epoch == epochAtAccept {
            try await Task.sleep(for: .milliseconds(20))
            epoch = try await bob.client.fetchCommits(in: "#deck", fromEpoch: 0).epoch
        }
        #expect(epoch > epochAtAccept, "dave's devices were committed in")
        let fromDave = try await dave.0.send(to: "#deck", text: "dave accepted and writes")
        for device in [phone, laptop, bob, carol] { #expect(await Self.reads(device, fromDave, "dave accepted and writes")) }
        for device in [phone, laptop, bob, carol, dave] { await device.client.close() }
        await cluster.stop()
    }

    /// carol makes a new identity in her data directory: the group's members are told (a KEYS
    /// datagram, docs/E2EE.md Part 4, "Told of a new device"), and the device of the lowest
    /// leaf that is not carol's (bob's: he made the group) commits her new device in, so she
    /// writes to the group again before anyone else sends. With bob's device away
    /// (`chosenAway`), the next leaf's device, one of alice's, stands in (`KeysDeputies`, 10 s
    /// after the hint) and commits it in, still without a send; before 2026-12-01 carol's sends
    /// then failed until a member sent.
    @Test(arguments: [false, true])
    func aMemberWithANewIdentityIsAddedBackWithoutASend(chosenAway: Bool) async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        var (phone, laptop, bob, carol) = try await Self.people(cluster, directories)
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])
        let first = try await bob.client.send(to: "#trio", text: "before carol's new keys")
        for device in [phone, laptop, carol] { #expect(await Self.reads(device, first, "before carol's new keys")) }
        // The Welcome her old keys joined from: a new one must come after it.
        let old = try #require(try await carol.client.fetchCommits(in: "#trio", fromEpoch: 0, join: true).welcome?.epoch)
        if chosenAway { await bob.client.close() }

        await carol.client.close()
        carol = try await EncryptedConversationTests.connected(cluster, "carol", directories[3])
        #expect(try await carol.client.setUpIdentity(newIdentity: true) == .created)
        let client = carol.client
        #expect(await eventually { try await client.fetchCommits(in: "#trio", fromEpoch: 0, join: true).welcome.map { $0.epoch > old } == true },
                "a device of the group commits carol's new one in without a send")
        let back = try await carol.client.send(to: "#trio", text: "carol again, new keys")
        let online = chosenAway ? [phone, laptop, carol] : [phone, laptop, bob, carol]
        for device in online where device.client !== carol.client { #expect(await Self.reads(device, back, "carol again, new keys")) }
        for device in online { #expect(device.client.decryptionFailures().isEmpty) }
        for device in online { await device.client.close() }
        await cluster.stop()
    }

    /// dave is added to #crew and removed again while his device is away; a message was sent
    /// to the group in between. Back, his device joins from the Welcome of his addition (the
    /// server still hands it to him, and no commit after it) and reads that message; what was
    /// sent after his removal does not reach him. Before, the Welcome was a member's to fetch:
    /// he reported the message undecryptable ("you are not a member of #crew").
    @Test func aMemberRemovedBeforeHisDeviceJoinedReadsWhatWasSentWhileAMember() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<6).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await Self.people(cluster, directories)
        var dave = try await Self.dave(cluster, directories[4])
        try await dave.client.set(.groupAdds(.everyone))
        await dave.client.close()

        _ = try await phone.client.createGroup("crew", members: ["bob", "carol", "dave"])
        let whileMember = try await phone.client.send(to: "#crew", text: "dave is one of us")
        #expect(await Self.reads(bob, whileMember, "dave is one of us"))
        _ = try await phone.client.removeFromGroup("crew", ["dave"])
        let after = try await bob.client.send(to: "#crew", text: "dave has gone")
        #expect(await Self.reads(phone, after, "dave has gone"))

        dave = try await EncryptedConversationTests.connected(cluster, "dave", directories[4])
        #expect(await Self.reads(dave, whileMember, "dave is one of us"))
        #expect(dave.client.decryptionFailures().isEmpty, "\(dave.client.decryptionFailures())")
        #expect(!dave.log.messages.contains { $0.id == after })
        // Nothing of the order after his Welcome was handed to him.
        let page = try await dave.client.fetchCommits(in: "#crew", fromEpoch: 0, join: true)
        #expect(page.welcome != nil && page.commits.isEmpty && !page.more)
        await #expect(throws: ClientError.self) { _ = try await dave.client.fetchCommits(in: "#crew", fromEpoch: 0) }
        for device in [phone, laptop, bob, carol, dave] { await device.client.close() }
        await cluster.stop()
    }

    @Test func anAddedMemberReadsFromItsAdditionAndARemovedOneReadsNothingAfter() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<6).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await Self.people(cluster, directories)
        let dave = try await Self.dave(cluster, directories[4])
        try await dave.0.set(.groupAdds(.everyone))

        _ = try await phone.client.createGroup("crew", members: ["bob", "carol"])
        let before = try await phone.client.send(to: "#crew", text: "before dave")
        #expect(await Self.reads(bob, before, "before dave"))

        // Added: the adder's device commits dave's devices in at once, so dave can write first.
        _ = try await phone.client.addToGroup("crew", ["dave"])
        let fromDave = try await dave.0.send(to: "#crew", text: "dave says hello")
        for device in [phone, laptop, bob, carol] { #expect(await Self.reads(device, fromDave, "dave says hello")) }
        let after = try await bob.client.send(to: "#crew", text: "welcome dave")
        #expect(await Self.reads(dave, after, "welcome dave"))
        #expect(!dave.1.messages.contains { $0.id == before }, "dave reads nothing from before his addition")

        // Removed: carol's devices leave the MLS group by bob's commit; what follows is sealed
        // for the others only (carol's copy of it is not even pushed: the server no longer fans
        // out to her), and she reads nothing of it.
        let epochBefore = try await bob.client.fetchCommits(in: "#crew", fromEpoch: 0).epoch
        _ = try await phone.client.removeFromGroup("crew", ["carol"])
        let epochAfter = try await bob.client.fetchCommits(in: "#crew", fromEpoch: 0).epoch
        #expect(epochAfter > epochBefore, "the removal is a commit")
        let secret = try await bob.client.send(to: "#crew", text: "carol has gone")
        for device in [phone, laptop, dave] { #expect(await Self.reads(device, secret, "carol has gone")) }
        #expect(!carol.log.messages.contains { $0.id == secret })
        for device in [phone, laptop, bob, carol, dave] { await device.client.close() }
        await cluster.stop()
    }
}
