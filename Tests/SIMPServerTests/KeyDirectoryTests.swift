import Crypto
import Foundation
import SIMPClient
import SIMPCore
import SIMPMLS
import SIMPTestSupport
import Testing

/// The key directory against a real server and redis-server (docs/E2EE.md, Part 2): alice
/// publishes her identity, certifies two devices and uploads KeyPackages made with SIMPMLS; bob
/// fetches her certificates and claims one package per device, until only the last resort is
/// left; what the server must refuse, it refuses with its code.
@Suite(.serialized) struct KeyDirectoryTests {
    let alice = KeyFixtures("alice")

    /// The claimed package decodes and validates, signed by the device's certified key.
    func expectValid(_ claimed: ClaimedKeyPackage, certificates: [VerifiedDevice], sourceLocation: SourceLocation = #_sourceLocation) throws {
        guard case .keyPackage(let wire) = try MLSMessage(mlsDecoding: claimed.keyPackage) else {
            Issue.record("not a KeyPackage", sourceLocation: sourceLocation)
            return
        }
        let package = try wire.validate(suite: KeyFixtures.suite)
        let certified = certificates.first { $0.device == claimed.device }?.deviceKey
        #expect(package.signatureKey.rawRepresentation == certified, sourceLocation: sourceLocation)
    }

    @Test func aliceCertifiesTwoDevicesAndBobClaimsTheirKeyPackages() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        try await cluster.register("bob")
        let (phone, _) = try await cluster.connectedDevice("alice", "phone")
        let (laptop, _) = try await cluster.connectedDevice("alice", "laptop")
        let (bob, _) = try await cluster.connectedDevice("bob", "desk")

        // Nothing yet: no identity to fetch, no certificate to upload under.
        await expectCode(.noIdentity) { try await bob.keyDirectory(of: "alice") }
        let (phoneKey, laptopKey) = (try KeyFixtures.deviceSigner(), try KeyFixtures.deviceSigner())
        await expectCode(.noIdentity) { try await phone.publishDevice(try alice.certified("phone", phoneKey)) }

        try await phone.publishIdentity(alice.identityKey)
        try await laptop.publishIdentity(alice.identityKey)   // the same key again: nothing changes
        await expectCode(.identityExists) { try await laptop.publishIdentity(KeyFixtures("alice").identityKey) }

        // The phone certifies itself and the laptop; a certificate by another identity is refused.
        try await phone.publishDevice(try alice.certified("phone", phoneKey))
        await expectCode(.badSignature) { try await laptop.publishDevice(try KeyFixtures("alice").certified("laptop", laptopKey)) }
        await expectCode(.deviceNotCertified) { try await laptop.uploadKeyPackages([try alice.keyPackage("laptop", laptopKey)]) }
        try await phone.publishDevice(try alice.certified("laptop", laptopKey))

        let phonePool = try await phone.uploadKeyPackages(try (0..<3).map { _ in try alice.keyPackage("phone", phoneKey) },
                                                          lastResort: try alice.keyPackage("phone", phoneKey))
        #expect(phonePool == KeyPackagePool(oneTime: 3, lastResort: true))
        #expect(try await laptop.uploadKeyPackages([try alice.keyPackage("laptop", laptopKey)]) == KeyPackagePool(oneTime: 1, lastResort: false))
        // Signed by a key no certificate names: refused, and nothing of the upload is stored.
        await expectCode(.deviceNotCertified) {
            try await laptop.uploadKeyPackages([try alice.keyPackage("laptop", laptopKey), try alice.keyPackage("laptop", try KeyFixtures.deviceSigner())])
        }
        await expectCode(.invalidKeyPackage) { try await laptop.uploadKeyPackages([Array(repeating: 7, count: 200)]) }

        // bob reads alice's directory and verifies it himself.
        let entry = try await bob.keyDirectory(of: "alice")
        #expect(entry.identityKey == alice.identityKey)
        let certificates = entry.verifiedDevices
        #expect(certificates.map(\.device) == ["laptop", "phone"])
        #expect(certificates.map(\.deviceKey) == [laptopKey.publicKey.rawRepresentation, phoneKey.publicKey.rawRepresentation])

        // One package per device; the laptop's only one goes, the phone's pool shrinks to its last resort.
        let first = try await bob.claimKeyPackages(of: "alice")
        #expect(first.map(\.device) == ["laptop", "phone"] && first.allSatisfy { !$0.lastResort })
        for claimed in first { try expectValid(claimed, certificates: certificates) }
        let second = try await bob.claimKeyPackages(of: "alice")
        #expect(second.map(\.device) == ["phone"] && second.allSatisfy { !$0.lastResort }, "the laptop has nothing left")
        #expect(Set((first + second).map(\.keyPackage)).count == 3, "each one-time package handed out once")
        #expect(try await bob.claimKeyPackages(of: "alice").map(\.lastResort) == [false])
        let last = try await bob.claimKeyPackages(of: "alice")
        let again = try await bob.claimKeyPackages(of: "alice")
        #expect(last.map(\.lastResort) == [true] && again == last, "the last resort stays")
        try expectValid(last[0], certificates: certificates)

        // alice's own claim leaves the asking device out.
        #expect(try await laptop.uploadKeyPackages([try alice.keyPackage("laptop", laptopKey)]).oneTime == 1)
        #expect(try await laptop.claimKeyPackages(of: "alice").map(\.device) == ["phone"])
        #expect(try await phone.claimKeyPackages(of: "alice").map(\.device) == ["laptop"])

        for client in [phone, laptop, bob] { await client.close() }
        await cluster.stop()
    }

    /// Who may claim (docs/E2EE.md, "Who may claim"): a user that blocked the claimer, or takes
    /// contacts only from a stranger, hands out nothing (`NOT_A_CONTACT`, as a message would
    /// be refused); a contact or a fellow group member may; and one claimer takes at most
    /// `oneTimeClaimsPerHour` one-time packages an hour, then only the last-resort one, so the
    /// one-time pool cannot be drained by a stranger.
    @Test func claimsFollowTheUsersSettingsAndAreBoundedPerHour() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "carol", "dave"] { try await cluster.register(user) }
        let (phone, _) = try await cluster.connectedDevice("alice", "phone")
        let (bob, _) = try await cluster.connectedDevice("bob", "desk")
        let (carol, _) = try await cluster.connectedDevice("carol", "desk")
        let (dave, _) = try await cluster.connectedDevice("dave", "desk")
        let phoneKey = try KeyFixtures.deviceSigner()
        try await phone.publishIdentity(alice.identityKey)
        try await phone.publishDevice(try alice.certified("phone", phoneKey))
        let packages = KeyDirectoryRules.oneTimeClaimsPerHour + 5
        for start in stride(from: 0, to: packages, by: KeyDirectoryRules.maxKeyPackagesPerUpload) {
            let count = min(KeyDirectoryRules.maxKeyPackagesPerUpload, packages - start)
            _ = try await phone.uploadKeyPackages(try (0..<count).map { _ in try alice.keyPackage("phone", phoneKey) },
                                                  lastResort: start == 0 ? try alice.keyPackage("phone", phoneKey) : nil)
        }

        // bob takes one-time packages up to the bound, then the last resort only.
        for _ in 0..<KeyDirectoryRules.oneTimeClaimsPerHour {
            #expect(try await bob.claimKeyPackages(of: "alice").map(\.lastResort) == [false])
        }
        #expect(try await bob.claimKeyPackages(of: "alice").map(\.lastResort) == [true], "bounded: the last resort")
        #expect(try await carol.claimKeyPackages(of: "alice").map(\.lastResort) == [false], "another claimer has its own bound")

        // alice blocks bob: he gets nothing. Contacts only: carol (a stranger) gets nothing, dave
        // (a contact) does, and carol does once she and alice are in a group.
        try await phone.block("bob")
        await expectCode(.notAContact) { try await bob.claimKeyPackages(of: "alice") }
        try await phone.set(.contactsOnly(true))
        await expectCode(.notAContact) { try await carol.claimKeyPackages(of: "alice") }
        _ = try await dave.addContact("alice")
        _ = try await phone.acceptContact("dave")
        #expect(try await dave.claimKeyPackages(of: "alice").count == 1)
        try await carol.set(.groupAdds(.everyone))
        _ = try await phone.createGroup("pair", members: ["carol"])
        #expect(try await carol.claimKeyPackages(of: "alice").count == 1, "a fellow group member")
        for client in [phone, bob, carol, dave] { await client.close() }
        await cluster.stop()
    }

    /// `simp-admin keypackages USER` (a real process against the server's Redis): the identity,
    /// and per device its certificate and pool, as claims drain it.
    @Test func simpAdminShowsEachDevicesPool() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        try await cluster.register("bob")
        let (phone, _) = try await cluster.connectedDevice("alice", "phone")
        let (bob, _) = try await cluster.connectedDevice("bob", "desk")
        func report(_ user: String, json: Bool = true) throws -> ChildProcess {
            let run = try ChildProcess(try productPath("simp-admin"),
                                       ["keypackages", user, "--redis", "redis://127.0.0.1:\(cluster.redis.port)"] + (json ? ["--json"] : []))
            run.closeStdin()
            return run
        }
        func devices() throws -> [[String: Any]] {
            let run = try report("alice")
            #expect(run.waitForExit(timeout: 10) == 0, "stderr: \(run.stderr)")
            let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
            #expect(object?["identity"] as? Bool == true)
            return object?["devices"] as? [[String: Any]] ?? []
        }
        func pools(_ listed: [[String: Any]]) -> [String] {
            listed.map { "\($0["device"] as? String ?? "?") \($0["certified"] as? Bool ?? false) \($0["oneTime"] as? Int ?? -1) \($0["lastResort"] as? Bool ?? false)" }
        }

        let none = try report("alice", json: false)
        #expect(none.waitForExit(timeout: 10) == 0)
        #expect(none.stdout == "alice: no identity published\nno device certificates or KeyPackages\n")

        let (phoneKey, laptopKey) = (try KeyFixtures.deviceSigner(), try KeyFixtures.deviceSigner())
        try await phone.publishIdentity(alice.identityKey)
        try await phone.publishDevice(try alice.certified("phone", phoneKey))
        try await phone.publishDevice(try alice.certified("laptop", laptopKey))
        _ = try await phone.uploadKeyPackages(try (0..<3).map { _ in try alice.keyPackage("phone", phoneKey) },
                                              lastResort: try alice.keyPackage("phone", phoneKey))
        #expect(pools(try devices()) == ["laptop true 0 false", "phone true 3 true"])
        _ = try await bob.claimKeyPackages(of: "alice")
        #expect(pools(try devices()) == ["laptop true 0 false", "phone true 2 true"])

        let text = try report("alice", json: false)
        #expect(text.waitForExit(timeout: 10) == 0)
        #expect(text.stdout.hasPrefix("alice: identity published 20"), "\(text.stdout)")
        #expect(text.stdout.contains("DEVICE") && text.stdout.contains("LAST RESORT"), "\(text.stdout)")
        let unknown = try report("nobody")
        #expect(unknown.waitForExit(timeout: 10) == 3)
        #expect(unknown.stderr == "simp-admin: no user named nobody\n")

        for client in [phone, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func aRevokedDeviceLosesItsCertificateAndKeyPackagesAndANewIdentityEndsThemAll() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        try await cluster.register("bob")
        let (phone, _) = try await cluster.connectedDevice("alice", "phone")
        let (laptop, _) = try await cluster.connectedDevice("alice", "laptop")
        let (bob, _) = try await cluster.connectedDevice("bob", "desk")
        let (phoneKey, laptopKey) = (try KeyFixtures.deviceSigner(), try KeyFixtures.deviceSigner())
        try await phone.publishIdentity(alice.identityKey)
        try await phone.publishDevice(try alice.certified("phone", phoneKey))
        try await phone.publishDevice(try alice.certified("laptop", laptopKey))
        _ = try await phone.uploadKeyPackages([try alice.keyPackage("phone", phoneKey)], lastResort: try alice.keyPackage("phone", phoneKey))
        _ = try await laptop.uploadKeyPackages([try alice.keyPackage("laptop", laptopKey)], lastResort: try alice.keyPackage("laptop", laptopKey))

        try await phone.revokeDevice("laptop")
        #expect(try await bob.keyDirectory(of: "alice").devices.map(\.device) == ["phone"])
        let claimed = try await bob.claimKeyPackages(of: "alice")
        #expect(claimed.map(\.device) == ["phone"], "neither the laptop's one-time nor its last-resort package is handed out")

        // A new identity: every certificate and package of the old one goes.
        let replacement = KeyFixtures("alice")
        await expectCode(.identityExists) { try await phone.publishIdentity(replacement.identityKey) }
        try await phone.publishIdentity(replacement.identityKey, replace: true)
        let entry = try await bob.keyDirectory(of: "alice")
        #expect(entry.identityKey == replacement.identityKey && entry.devices.isEmpty)
        #expect(try await bob.claimKeyPackages(of: "alice").isEmpty)
        await expectCode(.deviceNotCertified) { try await phone.uploadKeyPackages([try replacement.keyPackage("phone", phoneKey)]) }
        await expectCode(.unknownUser) { try await bob.keyDirectory(of: "nobody") }

        for client in [phone, bob] { await client.close() }
        await cluster.stop()
    }

    /// On a Redis Cluster, through two nodes: every script touches one user's slot.
    @Test func theDirectoryWorksOnARedisClusterAcrossNodes() async throws {
        let deployment = try Deployment(nodes: 2, cluster: true)
        defer { deployment.stop() }
        let owner = try await deployment.connect("kdalice", startingAt: 0)
        let claimer = try await deployment.connect("kdbob", startingAt: 1)
        let keys = KeyFixtures("kdalice")
        let device = await owner.client.deviceName()
        let signer = try KeyFixtures.deviceSigner()
        try await owner.client.publishIdentity(keys.identityKey)
        try await owner.client.publishDevice(try keys.certified(device, signer))
        #expect(try await owner.client.uploadKeyPackages([try keys.keyPackage(device, signer)], lastResort: try keys.keyPackage(device, signer))
            == KeyPackagePool(oneTime: 1, lastResort: true))
        #expect(try await claimer.client.keyDirectory(of: "kdalice").verifiedDevices.map(\.device) == [device])
        #expect(try await claimer.client.claimKeyPackages(of: "kdalice").map(\.lastResort) == [false])
        #expect(try await claimer.client.claimKeyPackages(of: "kdalice").map(\.lastResort) == [true])
        // Its own device: the session ends with the revocation, which is stored before that.
        _ = try? await owner.client.revokeDevice(device)
        #expect(try await claimer.client.claimKeyPackages(of: "kdalice").isEmpty)
        for user in [owner, claimer] { await user.client.close() }
    }
}
