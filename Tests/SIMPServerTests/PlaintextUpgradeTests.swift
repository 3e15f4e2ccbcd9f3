import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Issue 44, item 6: "existing plaintext conversations move to encrypted on first use by an
/// upgraded client". Two users who talked in plaintext (clients without encryption, on a
/// server run with `--e2e optional`) come back with encryption on: their next messages go
/// sealed in a new MLS group, the earlier ones stay what they were (plaintext, and still in
/// each device's own history), and nothing new is readable in Redis.
@Suite(.serialized) struct PlaintextUpgradeTests {
    typealias E = EncryptedConversationTests

    @Test func aPlaintextConversationMovesToEncryptedOnTheUpgradedClientsFirstSend() async throws {
        let cluster = try await TestCluster.start { $0.endToEnd = .optional }
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        for user in ["alice", "bob"] { try await cluster.register(user) }

        // Before: both clients keep a data directory but do not encrypt.
        var (alice, aliceLog) = try await E.connected(cluster, "alice", directories[0], endToEnd: false)
        var (bob, bobLog) = try await E.connected(cluster, "bob", directories[1], endToEnd: false)
        let before = try await alice.send(to: "bob", text: "plain, before the upgrade")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == before && !$0.encrypted } })
        let answer = try await bob.send(to: "alice", text: "plain answer, before the upgrade")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == answer && !$0.encrypted } })
        await alice.close()
        await bob.close()

        // After: the same devices and data directories, upgraded.
        (alice, aliceLog) = try await E.connected(cluster, "alice", directories[0])
        (bob, bobLog) = try await E.connected(cluster, "bob", directories[1])
        #expect(try await alice.setUpIdentity() == .created)
        #expect(try await bob.setUpIdentity() == .created)
        let sealed = try await alice.send(to: "bob", text: "sealed, after the upgrade")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == sealed && $0.encrypted && $0.text == "sealed, after the upgrade" } })
        let reply = try await bob.send(to: "alice", text: "sealed answer, after the upgrade")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.encrypted && $0.text == "sealed answer, after the upgrade" } })

        // Each device's history holds both: the plaintext it had and the sealed it opened.
        let history = try await bob.history(with: "alice")
        #expect(history.contains { $0.id == before && $0.text == "plain, before the upgrade" }, "\(history.map(\.text))")
        #expect(history.contains { $0.id == sealed && $0.text == "sealed, after the upgrade" }, "\(history.map(\.text))")
        let redis = try E.everythingInRedis(cluster)
        #expect(redis.contains("plain, before the upgrade"), "what was sent in plaintext stays so")
        #expect(!redis.contains("sealed, after the upgrade") && !redis.contains("sealed answer"), "nothing new readable")
        #expect(alice.decryptionFailures().isEmpty && bob.decryptionFailures().isEmpty)
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }
}
