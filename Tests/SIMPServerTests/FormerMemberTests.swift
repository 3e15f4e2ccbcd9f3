import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A device that was away while a member was added and removed again still joins and catches
/// up: the Welcome's tree, or a past commit, holds leaves of a user who is no member now, and
/// the device reads that user's directory to check them (`DirectoryValidator.NotKnown`)
/// instead of refusing the group. Found on 2026-11-30: `/group create team bob carol`, a send,
/// `/group remove team carol`, a send, and bob (away) reported every message undecryptable.
@Suite(.serialized) struct FormerMemberTests {
    typealias People = EncryptedGroupTests
    typealias E = EncryptedConversationTests

    @Test func aMemberAwayWhenTheGroupWasMadeJoinsThoughAnotherWasRemovedSince() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        for device in [bob, carol, laptop] { await device.client.close() }
        _ = try await phone.client.createGroup("team", members: ["bob", "carol"])
        let first = try await phone.client.send(to: "#team", text: "hello team")
        _ = try await phone.client.removeFromGroup("team", ["carol"])
        let second = try await phone.client.send(to: "#team", text: "after carol left")
        let (back, backLog) = try await E.connected(cluster, "bob", directories[1])
        #expect(await backLog.wait { log in [first, second].allSatisfy { id in log.messages.contains { $0.id == id && $0.encrypted } } },
                "\(backLog.all)")
        #expect(back.decryptionFailures().isEmpty, "\(back.decryptionFailures())")
        for client in [back, phone.client] { await client.close() }
        await cluster.stop()
    }

    @Test func aMemberAwayWhileAnotherCameAndWentCatchesUp() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<6).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        let dave = try await People.dave(cluster, directories[5])
        try await dave.client.set(.groupAdds(.everyone))
        _ = try await phone.client.createGroup("team", members: ["bob"])
        let first = try await phone.client.send(to: "#team", text: "before bob goes away")
        #expect(await People.reads(bob, first, "before bob goes away"))
        await bob.client.close()
        _ = try await phone.client.addToGroup("team", ["dave"])
        let withDave = try await phone.client.send(to: "#team", text: "dave is here")
        #expect(await People.reads(dave, withDave, "dave is here"))
        _ = try await phone.client.removeFromGroup("team", ["dave"])
        let after = try await phone.client.send(to: "#team", text: "dave left")
        let (back, backLog) = try await E.connected(cluster, "bob", directories[1])
        #expect(await backLog.wait { log in [withDave, after].allSatisfy { id in log.messages.contains { $0.id == id && $0.encrypted } } },
                "\(backLog.all)")
        #expect(back.decryptionFailures().isEmpty, "\(back.decryptionFailures())")
        for client in [back, phone.client, laptop.client, carol.client, dave.client] { await client.close() }
        await cluster.stop()
    }
}
