import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Identities made by the users' first devices, safety numbers and verification against a
/// real server and Redis (docs/E2EE.md, "Verification"), through the library and `simp`.
@Suite(.serialized) struct VerificationTests {
    static func client(_ cluster: TestCluster, _ directory: String) -> SIMPClient {
        var configuration = cluster.clientConfiguration()
        configuration.dataDirectory = directory
        return SIMPClient(configuration: configuration)
    }

    static func connected(_ cluster: TestCluster, _ user: String, _ directory: String) async throws -> (SIMPClient, EventLog) {
        let client = client(cluster, directory)
        let log = EventLog(client)
        try await client.connect(user: user, password: "pw-\(user)")
        return (client, log)
    }

    @Test func bothSidesSeeOneNumberAndANewIdentityIsReported() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<4).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await Self.connected(cluster, "alice", directories[0])
        let (bob, _) = try await Self.connected(cluster, "bob", directories[1])

        #expect(try await alice.setUpIdentity() == .created)
        #expect(try await alice.setUpIdentity() == .ready, "once made, kept")
        await #expect(throws: ClientError.self) { try await alice.safetyNumber(with: "bob") }
        #expect(try await bob.setUpIdentity() == .created)
        // The private keys are the user's alone.
        let file = (directories[0] as NSString).appendingPathComponent("alice.sqlite")
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let fromAlice = try await alice.safetyNumber(with: "bob")
        let fromBob = try await bob.safetyNumber(with: "alice")
        #expect(fromAlice.number == fromBob.number && fromAlice.number.count == 71, "60 digits in 12 groups: \(fromAlice.number)")
        #expect(!fromAlice.verified && !fromAlice.identityChanged)

        // A second device of alice's does not hold her identity: it is not made again.
        let (laptop, _) = try await Self.connected(cluster, "alice", directories[2])
        #expect(try await laptop.setUpIdentity() == .needsLinking)
        #expect(try await bob.safetyNumber(with: "alice").number == fromBob.number, "unchanged by another device")

        // Verified only with the number the two compared.
        await #expect(throws: ClientError.self) { try await alice.markVerified("bob", number: String(repeating: "1", count: 60)) }
        try await alice.markVerified("bob", number: fromBob.number)
        #expect(try await alice.safetyNumber(with: "bob").verified)

        // bob loses every device: a new identity, which alice is told of.
        await bob.close()
        let (newBob, _) = try await Self.connected(cluster, "bob", directories[3])
        #expect(try await newBob.setUpIdentity(newIdentity: true) == .created)
        let after = try await alice.safetyNumber(with: "bob")
        #expect(after.identityChanged && !after.verified && after.number != fromAlice.number)
        #expect(await aliceLog.wait { $0.all.contains(.identityChanged(user: "bob")) })
        #expect(try await alice.safetyNumber(with: "bob").identityChanged == false, "told once")
        for client in [alice, laptop, newBob] { await client.close() }
        await cluster.stop()
    }

    @Test func simpVerifyPrintsTheNumberAndMarksItVerified() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        let configHome = FileManager.default.temporaryDirectory.appendingPathComponent("simp-config-\(UUID().uuidString)").path
        defer { for directory in directories + [configHome] { try? FileManager.default.removeItem(atPath: directory) } }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (bob, _) = try await Self.connected(cluster, "bob", directories[1])
        try await bob.setUpIdentity()

        func verify(_ extra: [String]) throws -> ChildProcess {
            try ChildProcess(try productPath("simp"), ["verify", "--server", "127.0.0.1:\(cluster.addresses.tcpPort)", "--user", "alice",
                                                       "--password", "pw-alice", "--data-dir", directories[0], "--json", "bob"] + extra,
                             environment: ["XDG_CONFIG_HOME": configHome])
        }
        let shown = try verify([])
        #expect(shown.waitForExit(timeout: 30) == 0, "stderr: \(shown.stderr)")
        let printed = try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any]
        let expected = try await bob.safetyNumber(with: "alice").number
        #expect(printed?["event"] as? String == "safety-number" && printed?["number"] as? String == expected)
        #expect(printed?["verified"] as? Bool == false)

        let wrong = try verify(["--number", String(repeating: "2", count: 60)])
        #expect(wrong.waitForExit(timeout: 30) == 1 && wrong.stderr.contains("not the safety number"))
        let marked = try verify(["--number", expected])
        #expect(marked.waitForExit(timeout: 30) == 0, "stderr: \(marked.stderr)")
        let after = try JSONSerialization.jsonObject(with: Data(marked.stdout.utf8)) as? [String: Any]
        #expect(after?["verified"] as? Bool == true)
        await bob.close()
        await cluster.stop()
    }
}
