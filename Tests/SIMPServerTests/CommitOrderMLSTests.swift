import Foundation
import SIMPClient
import SIMPCore
import SIMPMLS
import Testing

/// Real MLS commits (SIMPMLS) through the server's commit order (docs/E2EE.md, Part 3): devices
/// keep a commit's state only once the server stored it, a losing device processes the winner
/// and makes its change again on the new epoch, a new device joins with the Welcome it fetches
/// and catches up; every device ends in the same epoch with the same epoch authenticator, and
/// reads the others' messages. Two commits for one epoch do not split the group.
@Suite(.serialized) struct CommitOrderMLSTests {
    static let suite = KeyFixtures.suite

    /// A device as a client would hold it: its MLS signer (certified), its KeyPackage bundles.
    struct Device {
        let client: SIMPClient
        let user: String
        let name: String
        let signer: SignaturePrivateKey
        var credential: Credential { .basic(identity: KeyDirectoryRules.credentialIdentity(user: user, device: name)) }
    }

    static func bundle(_ device: Device) throws -> MLSKeyPackageBundle {
        try MLSKeyPackageBundle(suite: suite, credential: device.credential, capabilities: KeyFixtures.capabilities,
                                lifetime: Lifetime(notBefore: 0, notAfter: .max), signer: device.signer, randomness: KeyFixtures.random)
    }

    /// Certifies the device and uploads `count` one-time KeyPackages; returns their bundles.
    /// alice's phone and laptop and bob's desk, connected and certified, in the SIMP group
    /// `#team` of alice's: the laptop with one KeyPackage, the desk with `deskPackages`.
    static func team(deskPackages: Int) async throws
        -> (TestCluster, Device, Device, Device, laptop: [MLSKeyPackageBundle], desk: [MLSKeyPackageBundle]) {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob"] { try await cluster.register(user) }
        try cluster.letAnyoneAdd(["bob"])
        let (alice, bob) = (KeyFixtures("alice"), KeyFixtures("bob"))
        let phone = Device(client: try await cluster.connectedDevice("alice", "phone").0, user: "alice", name: "phone",
                           signer: try KeyFixtures.deviceSigner())
        let laptop = Device(client: try await cluster.connectedDevice("alice", "laptop").0, user: "alice", name: "laptop",
                            signer: try KeyFixtures.deviceSigner())
        let desk = Device(client: try await cluster.connectedDevice("bob", "desk").0, user: "bob", name: "desk",
                          signer: try KeyFixtures.deviceSigner())
        _ = try await phone.client.createGroup("team", members: ["bob"])
        _ = try await publish(phone, alice, packages: 0)
        let laptopBundles = try await publish(laptop, alice, packages: 1)
        let deskBundles = try await publish(desk, bob, packages: deskPackages)
        return (cluster, phone, laptop, desk, laptopBundles, deskBundles)
    }

    static func publish(_ device: Device, _ keys: KeyFixtures, packages count: Int) async throws -> [MLSKeyPackageBundle] {
        try await device.client.publishIdentity(keys.identityKey)
        try await device.client.publishDevice(try keys.certified(device.name, device.signer))
        let bundles = try (0..<count).map { _ in try bundle(device) }
        if !bundles.isEmpty {
            _ = try await device.client.uploadKeyPackages(try bundles.map { try MLSMessage.keyPackage($0.keyPackage.wire).mlsEncoded() })
        }
        return bundles
    }

    /// The KeyPackage a claim handed out for `device`, validated.
    static func claim(_ by: SIMPClient, _ user: String, _ device: String) async throws -> KeyPackage {
        let claimed = try #require(try await by.claimKeyPackages(of: user).first { $0.device == device })
        guard case .keyPackage(let wire) = try MLSMessage(mlsDecoding: claimed.keyPackage) else { throw ClientError("not a KeyPackage") }
        return try wire.validate(suite: suite)
    }

    static func welcome(_ output: MLSGroup.CommitOutput, for user: String, _ device: String) throws -> CommitWelcome? {
        guard let welcome = output.welcome else { return nil }
        return CommitWelcome(try MLSMessage.welcome(welcome).mlsEncoded(), for: [AddedDevice(user: user, device: device)])
    }

    /// Fetches the conversation's commits from the group's epoch and processes them in order.
    static func catchUp(_ group: inout MLSGroup, _ client: SIMPClient, in conversation: String) async throws {
        let page = try await client.fetchCommits(in: conversation, fromEpoch: group.epoch)
        for stored in page.commits {
            #expect(stored.epoch == group.epoch)
            #expect(try group.process(try MLSMessage(mlsDecoding: stored.commit)) == .newEpoch(stored.epoch + 1))
        }
        #expect(group.epoch == page.epoch)
    }

    @Test func racingCommitsKeepOneGroupAndTheLoserCommitsAgainOnTheNewEpoch() async throws {
        let (cluster, phone, laptop, desk, laptopBundles, deskBundles) = try await Self.team(deskPackages: 2)

        // The phone makes the MLS group and adds the laptop: epoch 0 -> 1 in the server's order.
        var phoneGroup = try MLSGroup.create(groupID: Array("#team".utf8), suite: Self.suite, credential: phone.credential,
                                             capabilities: KeyFixtures.capabilities, lifetime: Lifetime(notBefore: 0, notAfter: .max),
                                             signer: phone.signer, randomness: KeyFixtures.random)
        let addLaptop = try phoneGroup.commit(adding: [try await Self.claim(phone.client, "alice", "laptop")], randomness: KeyFixtures.random)
        #expect(try await phone.client.submitCommit(try addLaptop.message.mlsEncoded(), to: "#team", epoch: 0,
                                                    welcome: try Self.welcome(addLaptop, for: "alice", "laptop")) == 1)
        phoneGroup = addLaptop.group
        let laptopPage = try await laptop.client.fetchCommits(in: "#team", fromEpoch: 0, join: true)
        guard case .welcome(let laptopWelcome) = try MLSMessage(mlsDecoding: try #require(laptopPage.welcome).welcome) else {
            Issue.record("no Welcome for the laptop"); return
        }
        var laptopGroup = try MLSGroup(joining: laptopWelcome, with: laptopBundles[0])
        #expect(laptopGroup.epoch == 1 && laptopPage.commits.isEmpty)

        // Both commit on epoch 1 at once: the phone adds bob's desk, the laptop updates its keys.
        let deskPackage = try await Self.claim(phone.client, "bob", "desk")
        let phoneCommit = try phoneGroup.commit(adding: [deskPackage], randomness: KeyFixtures.random)
        let laptopCommit = try laptopGroup.commit(randomness: KeyFixtures.random)
        let phoneBytes = try phoneCommit.message.mlsEncoded()
        let phoneWelcomes = try Self.welcome(phoneCommit, for: "bob", "desk")
        let laptopBytes = try laptopCommit.message.mlsEncoded()
        async let phoneTry = Self.result { () async throws(ClientError) in
            try await phone.client.submitCommit(phoneBytes, to: "#team", epoch: 1, welcome: phoneWelcomes)
        }
        async let laptopTry = Self.result { () async throws(ClientError) in try await laptop.client.submitCommit(laptopBytes, to: "#team", epoch: 1) }
        let (phoneResult, laptopResult) = await (phoneTry, laptopTry)
        let phoneWon = (try? phoneResult.get()) == 2
        #expect(phoneWon != ((try? laptopResult.get()) == 2), "exactly one wins: \(phoneResult), \(laptopResult)")
        let loss = phoneWon ? laptopResult : phoneResult
        guard case .failure(let error) = loss, error.code == .commitConflict else { Issue.record("the loser got \(loss)"); return }

        // The winner keeps its commit's state; the loser processes the winner's, then commits again on epoch 2.
        if phoneWon {
            phoneGroup = phoneCommit.group
            try await Self.catchUp(&laptopGroup, laptop.client, in: "#team")
            let again = try laptopGroup.commit(randomness: KeyFixtures.random)
            #expect(try await laptop.client.submitCommit(try again.message.mlsEncoded(), to: "#team", epoch: 2) == 3)
            laptopGroup = again.group
            try await Self.catchUp(&phoneGroup, phone.client, in: "#team")
        } else {
            laptopGroup = laptopCommit.group
            try await Self.catchUp(&phoneGroup, phone.client, in: "#team")
            // A new claim: the first package went into a commit that was never stored.
            let again = try phoneGroup.commit(adding: [try await Self.claim(phone.client, "bob", "desk")], randomness: KeyFixtures.random)
            #expect(try await phone.client.submitCommit(try again.message.mlsEncoded(), to: "#team", epoch: 2,
                                                        welcome: try Self.welcome(again, for: "bob", "desk")) == 3)
            phoneGroup = again.group
            try await Self.catchUp(&laptopGroup, laptop.client, in: "#team")
        }

        // bob's desk joins with the Welcome of the commit that was stored, and catches up from it.
        let deskPage = try await desk.client.fetchCommits(in: "#team", fromEpoch: 0, join: true)
        let deskWelcome = try #require(deskPage.welcome)
        #expect(deskWelcome.welcome != phoneWelcomes?.welcome || phoneWon, "never the losing commit's Welcome")
        guard case .welcome(let welcome) = try MLSMessage(mlsDecoding: deskWelcome.welcome) else { Issue.record("not a Welcome"); return }
        let bundle = try #require(deskBundles.first { (try? welcome.decrypt(for: $0.keyPackage, initPrivateKey: $0.initPrivateKey, psk: MLSGroup.noExternalPSK)) != nil })
        var deskGroup = try MLSGroup(joining: welcome, with: bundle)
        #expect(deskGroup.epoch == deskWelcome.epoch)
        try await Self.catchUp(&deskGroup, desk.client, in: "#team")

        // One group: the same epoch and epoch authenticator everywhere, and messages read by all.
        #expect([phoneGroup.epoch, laptopGroup.epoch, deskGroup.epoch] == [3, 3, 3])
        #expect(phoneGroup.epochAuthenticator == laptopGroup.epochAuthenticator && laptopGroup.epochAuthenticator == deskGroup.epochAuthenticator)
        let sealed = try phoneGroup.encrypt(Array("hello team".utf8), randomness: KeyFixtures.random)
        for var group in [laptopGroup, deskGroup] {
            guard case .application(_, let data, _, 3) = try group.process(MLSMessage.privateMessage(sealed)) else { Issue.record("not read"); continue }
            #expect(data == Array("hello team".utf8))
        }
        for device in [phone, laptop, desk] { await device.client.close() }
        await cluster.stop()
    }

    /// A commit adding two devices of two users has one Welcome (RFC 9420 section 12.4.3.1), sent
    /// once: each device fetches the same bytes, finds its own secrets by its KeyPackageRef,
    /// and joins the one group.
    @Test func oneWelcomeSentOnceJoinsEachDeviceTheCommitAdds() async throws {
        let (cluster, phone, laptop, desk, laptopBundles, deskBundles) = try await Self.team(deskPackages: 1)

        var phoneGroup = try MLSGroup.create(groupID: Array("#team".utf8), suite: Self.suite, credential: phone.credential,
                                             capabilities: KeyFixtures.capabilities, lifetime: Lifetime(notBefore: 0, notAfter: .max),
                                             signer: phone.signer, randomness: KeyFixtures.random)
        let packages = [try await Self.claim(phone.client, "alice", "laptop"), try await Self.claim(phone.client, "bob", "desk")]
        let output = try phoneGroup.commit(adding: packages, randomness: KeyFixtures.random)
        let welcome = try MLSMessage.welcome(try #require(output.welcome)).mlsEncoded()
        #expect(try await phone.client.submitCommit(try output.message.mlsEncoded(), to: "#team", epoch: 0,
                                                    welcome: CommitWelcome(welcome, for: [AddedDevice(user: "alice", device: "laptop"),
                                                                                          AddedDevice(user: "bob", device: "desk")])) == 1)
        phoneGroup = output.group

        var joined: [MLSGroup] = []
        for (device, bundle) in [(laptop, laptopBundles[0]), (desk, deskBundles[0])] {
            let page = try await device.client.fetchCommits(in: "#team", fromEpoch: 0, join: true)
            let stored = try #require(page.welcome, "\(device.name) was handed no Welcome")
            #expect(stored.welcome == welcome && stored.epoch == 1, "the one Welcome, into epoch 1")
            guard case .welcome(let made) = try MLSMessage(mlsDecoding: stored.welcome) else { Issue.record("not a Welcome"); return }
            joined.append(try MLSGroup(joining: made, with: bundle))
        }
        #expect(joined.map(\.epoch) == [1, 1])
        #expect(joined.allSatisfy { $0.epochAuthenticator == phoneGroup.epochAuthenticator }, "one group")
        let sealed = try phoneGroup.encrypt(Array("hello both".utf8), randomness: KeyFixtures.random)
        for var group in joined {
            guard case .application(_, let data, _, 1) = try group.process(MLSMessage.privateMessage(sealed)) else { Issue.record("not read"); continue }
            #expect(data == Array("hello both".utf8))
        }
        for device in [phone, laptop, desk] { await device.client.close() }
        await cluster.stop()
    }

    static func result(_ body: () async throws(ClientError) -> UInt64) async -> Result<UInt64, ClientError> {
        do throws(ClientError) {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }
}
