import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Linking a device (docs/E2EE.md, "Linking a device") against a real server and Redis: a
/// second device of alice's gets her identity only after the code shown on it was typed on
/// her first device; then it reads encrypted conversations as the first does. A wrong code
/// declines the link and gives nothing; the server takes the steps only in order, each from
/// the device that may take it.
@Suite(.serialized) struct DeviceLinkingTests {
    /// alice's phone (made her identity), alice's laptop (to be linked), bob's phone; each with
    /// its own data directory.
    static func devices(_ cluster: TestCluster, _ directories: [String]) async throws
        -> (phone: (SIMPClient, EventLog), laptop: (SIMPClient, EventLog), bob: (SIMPClient, EventLog)) {
        let pair = try await EncryptedConversationTests.aliceAndBob(cluster, directories)
        let laptop = try await EncryptedConversationTests.connected(cluster, "alice", directories[2], device: "laptop")
        #expect(try await laptop.0.setUpIdentity() == .needsLinking)
        return (pair.alice, laptop, pair.bob)
    }

    /// What the new device's `linkThisDevice` showed: its code, once.
    final class ShownCode: @unchecked Sendable {
        private let lock = NSLock()
        private var codes: [String] = []
        func show(_ code: String) { lock.withLock { codes.append(code) } }
        var all: [String] { lock.withLock { codes } }
    }

    /// The existing device's links, listed until `device` shows a code (the new device reveals
    /// as soon as it sees the offer).
    static func code(of device: String, on client: SIMPClient) async throws -> String? {
        for _ in 0..<20 {
            if let code = try await client.pendingLinks(waitSeconds: 2).first(where: { $0.device == device })?.code { return code }
        }
        return nil
    }

    @Test func aLinkedDeviceReadsWhatItsUserIsSent() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<3).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob) = try await Self.devices(cluster, directories)
        let before = try await bob.0.safetyNumber(with: "alice").number

        let shown = ShownCode()
        let linking = Task { try await laptop.0.linkThisDevice(timeoutSeconds: 60) { shown.show($0) } }
        let code = try #require(try await Self.code(of: "laptop", on: phone.0))
        // The two devices show one code: the user compares them, then types it on the phone.
        #expect(await laptop.1.wait { _ in shown.all == [code] })
        try await phone.0.approveLink(device: "laptop", code: code)
        #expect(try await linking.value == .ready)
        #expect(try await laptop.0.setUpIdentity() == .ready, "kept in the laptop's data directory")

        // The directory certifies both devices under the one identity; bob's number is unchanged.
        let entry = try await bob.0.keyDirectory(of: "alice")
        #expect(Set(entry.devices.map(\.device)) == ["phone", "laptop"])
        #expect(try await bob.0.safetyNumber(with: "alice").number == before, "a device added leaves the safety number")
        #expect(try await laptop.0.safetyNumber(with: "bob").number == before)

        // bob writes to alice: both her devices decrypt it.
        let secret = "meet me where the river bends"
        let id = try await bob.0.send(to: "alice", text: secret)
        #expect(await phone.1.wait { $0.messages.contains { $0.id == id && $0.text == secret && $0.encrypted } })
        #expect(await laptop.1.wait { $0.messages.contains { $0.id == id && $0.text == secret && $0.encrypted } })
        // And the laptop writes back, encrypted.
        let reply = try await laptop.0.send(to: "bob", text: "on the laptop now")
        #expect(await bob.1.wait { $0.messages.contains { $0.id == reply && $0.text == "on the laptop now" && $0.encrypted } })
        #expect(!(try EncryptedConversationTests.everythingInRedis(cluster)).contains(secret))

        // Revoked from the phone, the laptop leaves the conversation at once, by the phone's commit.
        let epoch = try await bob.0.fetchCommits(in: "alice", fromEpoch: 0).epoch
        try await phone.0.revokeDevice("laptop")
        #expect(try await bob.0.fetchCommits(in: "alice", fromEpoch: 0).epoch == epoch + 1)
        let after = try await bob.0.send(to: "alice", text: "for the phone alone")
        #expect(await phone.1.wait { $0.messages.contains { $0.id == after && $0.encrypted } })
        #expect(bob.0.decryptionFailures().isEmpty && phone.0.decryptionFailures().isEmpty)
        for client in [phone.0, laptop.0, bob.0] { await client.close() }
        await cluster.stop()
    }

    /// The phone that approved the laptop commits it into their conversations as soon as the
    /// laptop can be added (its first KeyPackages stored: the server's KEYS datagram), with no
    /// send of anyone's: the laptop's Welcome is there, and it writes to bob at once. Before
    /// 2026-11-30 the laptop waited for a send of the phone's or bob's ("not in the encrypted
    /// conversation with bob").
    @Test func aLinkedDeviceIsAddedToItsUsersConversationsWithoutASend() async throws {
        let talking = try await EncryptedConversationTests.talking()
        defer { talking.removeDirectories() }
        let (phone, bob) = (talking.alice, talking.bob)
        let laptop = try await EncryptedConversationTests.connected(talking.cluster, "alice", talking.directories[2], device: "laptop")
        #expect(try await laptop.0.setUpIdentity() == .needsLinking)
        let linking = Task { try await laptop.0.linkThisDevice(timeoutSeconds: 60) { _ in } }
        let code = try #require(try await Self.code(of: "laptop", on: phone.0))
        try await phone.0.approveLink(device: "laptop", code: code)
        #expect(try await linking.value == .ready)

        #expect(await eventually { try await laptop.0.fetchCommits(in: "bob", fromEpoch: 0, join: true).welcome != nil },
                "the phone commits the laptop in without a send")
        let id = try await laptop.0.send(to: "bob", text: "written on the laptop first")
        #expect(await bob.1.wait { $0.messages.contains { $0.id == id && $0.text == "written on the laptop first" && $0.encrypted } })
        #expect(bob.0.decryptionFailures().isEmpty)
        for client in [phone.0, laptop.0, bob.0] { await client.close() }
        await talking.cluster.stop()
    }

    @Test func aWrongCodeDeclinesTheLinkAndGivesNothing() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<3).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob) = try await Self.devices(cluster, directories)

        let linking = Task { try await laptop.0.linkThisDevice(timeoutSeconds: 60) { _ in } }
        let code = try #require(try await Self.code(of: "laptop", on: phone.0))
        let wrong = String(format: "%06d", (Int(code)! + 1) % 1_000_000)
        await #expect(throws: ClientError.self) { try await phone.0.approveLink(device: "laptop", code: wrong) }
        // The new device hears of the decline and holds no identity.
        let failure = await #expect(throws: ClientError.self) { try await linking.value }
        #expect(failure?.message.contains("declined") == true)
        #expect(try await laptop.0.setUpIdentity() == .needsLinking)
        #expect(try await bob.0.keyDirectory(of: "alice").devices.map(\.device) == ["phone"])
        // The right code cannot be used after the decline either.
        await #expect(throws: ClientError.self) { try await phone.0.approveLink(device: "laptop", code: code) }
        for client in [phone.0, laptop.0, bob.0] { await client.close() }
        await cluster.stop()
    }

    /// The server's checks (docs/PROTOCOL.md, "Linking a device"), with raw steps: each step
    /// only after the one before it, each by the device that may take it (LINK_STEP), and a
    /// second offer refused: the first device to offer is the only one that can grant.
    @Test func theServerTakesStepsInOrderFromTheirDevices() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<3).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob) = try await Self.devices(cluster, directories)
        let body = [UInt8](repeating: 1, count: 97)

        func refused(_ client: SIMPClient, _ kind: Simp_LinkStepKind, _ device: String, _ body: [UInt8] = [1]) async -> ErrorCode? {
            do {
                try await client.linkStep(kind, device: device, body: body)
                return nil
            } catch {
                return error.errorCode
            }
        }
        #expect(await refused(phone.0, .linkOffer, "laptop") == .linkStep, "no request yet")
        #expect(await refused(phone.0, .linkRequest, "laptop", body) == .linkStep, "only the laptop asks for itself")
        try await laptop.0.linkStep(.linkRequest, device: "laptop", body: body)
        #expect(await refused(laptop.0, .linkReveal, "laptop") == .linkStep, "no offer yet")
        #expect(await refused(laptop.0, .linkOffer, "laptop") == .linkStep, "a device does not offer to itself")
        #expect(await refused(phone.0, .linkOffer, "laptop", []) == .badRequest, "an empty body")
        #expect(await refused(phone.0, .linkOffer, "laptop", [UInt8](repeating: 0, count: 257)) == .badRequest, "over 256 bytes")
        try await phone.0.linkStep(.linkOffer, device: "laptop", body: [2])
        let tablet = try await EncryptedConversationTests.connected(cluster, "alice", LocalHistoryTests.directory(), device: "tablet")
        #expect(await refused(tablet.0, .linkOffer, "laptop") == .linkStep, "offered already")
        #expect(await refused(phone.0, .linkGrant, "laptop") == .linkStep, "no reveal yet")
        try await laptop.0.linkStep(.linkReveal, device: "laptop", body: [3])
        #expect(await refused(tablet.0, .linkGrant, "laptop") == .linkStep, "only the device that offered grants")
        #expect(await refused(bob.0, .linkGrant, "laptop") == .linkStep, "bob has no link of alice's")
        try await phone.0.linkStep(.linkGrant, device: "laptop", body: [4])
        #expect(await refused(phone.0, .linkGrant, "laptop") == .linkStep, "granted once")

        let record = try #require(try await laptop.0.linkRecords(device: "laptop").first)
        #expect(record.request == Data(body) && record.offeredBy == "phone" && record.offer == Data([2]) && record.reveal == Data([3])
            && record.grant == Data([4]) && !record.declined)
        #expect(try await bob.0.linkRecords(device: nil).isEmpty, "each user sees only their own links")
        // A new request starts the link again.
        try await laptop.0.linkStep(.linkRequest, device: "laptop", body: body)
        let again = try #require(try await phone.0.linkRecords(device: nil).first)
        #expect(again.offeredBy.isEmpty && again.grant.isEmpty)
        try await laptop.0.linkStep(.linkDecline, device: "laptop", body: [])
        #expect(await refused(phone.0, .linkOffer, "laptop") == .linkStep, "declined")
        for client in [phone.0, laptop.0, bob.0, tablet.0] { await client.close() }
        await cluster.stop()
    }

    /// `simp --new-identity` in an installation whose identity was made before (its other
    /// devices lost, say): the REPL's device makes a new identity, and the installation's
    /// one-shot device, which still holds the old one, takes the new one from it (it said it
    /// could not, and stayed out of the directory). Without the flag, a device that does not
    /// hold the identity says how to make one.
    @Test func simpNewIdentityReplacesTheIdentityForTheWholeInstallation() async throws {
        let cluster = try await TestCluster.start()
        let homes = (0..<2).map { _ in FileManager.default.temporaryDirectory.appendingPathComponent("simp-home-\(UUID().uuidString)").path }
        defer { for home in homes { try? FileManager.default.removeItem(atPath: home) } }
        try await cluster.register("alice")
        func repl(_ home: String, _ extra: [String] = []) throws -> ChildProcess {
            try ChildProcess(try productPath("simp"), ["--server", "127.0.0.1:\(cluster.addresses.tcpPort)", "--user", "alice",
                                                       "--password", "pw-alice", "--json"] + extra,
                             environment: ["XDG_CONFIG_HOME": home + "/config", "XDG_DATA_HOME": home + "/data"])
        }
        func session(_ home: String, _ extra: [String] = [], until event: String) throws -> ChildProcess {
            let process = try repl(home, extra)
            #expect(process.waitForLine(timeout: 60) { $0.contains(#""event":"\#(event)""#) } != nil, "printed: \(process.stdout) \(process.stderr)")
            process.closeStdin()
            #expect(process.waitForExit(timeout: 30) == 0)
            return process
        }
        var checker = cluster.clientConfiguration()
        checker.device = "checker"
        checker.endToEnd = false
        let client = SIMPClient(configuration: checker)
        try await client.connect(user: "alice", password: "pw-alice")

        _ = try session(homes[0], until: "connected")
        let first = try await client.keyDirectory(of: "alice")
        #expect(first.devices.count == 2 && first.devices.contains { $0.device.hasSuffix("-cli") }, "the REPL's device and the one-shot one")

        let elsewhere = try repl(homes[1])
        #expect(elsewhere.waitForLine(timeout: 60) { $0.contains(#""event":"needs-linking""#) } != nil, "printed: \(elsewhere.stdout)")
        elsewhere.closeStdin()
        _ = elsewhere.waitForExit(timeout: 30)

        let renewed = try session(homes[0], ["--new-identity"], until: "identity-created")
        #expect(!(renewed.stdout + renewed.stderr).contains("could not take your identity"), "printed: \(renewed.stdout) \(renewed.stderr)")
        let second = try await client.keyDirectory(of: "alice")
        #expect(second.identityKey != first.identityKey)
        #expect(Set(second.devices.map(\.device)) == Set(first.devices.map(\.device)),
                "both devices of the installation certified under the new identity: \(second.devices.map(\.device))")
        await client.close()
        await cluster.stop()
    }

    /// The flow in `simp --json` on both devices, as a script would drive it: the new device's
    /// code is an event, the other device lists the link with the same code, and the approval
    /// is a command.
    @Test func simpJSONLinksADevice() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        let configHomes = (0..<2).map { _ in FileManager.default.temporaryDirectory.appendingPathComponent("simp-config-\(UUID().uuidString)").path }
        defer { for directory in directories + configHomes { try? FileManager.default.removeItem(atPath: directory) } }
        try await cluster.register("alice")
        func repl(_ index: Int, device: String) throws -> ChildProcess {
            try ChildProcess(try productPath("simp"), ["--server", "127.0.0.1:\(cluster.addresses.tcpPort)", "--user", "alice", "--password", "pw-alice",
                                                       "--device", device, "--data-dir", directories[index], "--e2e", "--json"],
                             environment: ["XDG_CONFIG_HOME": configHomes[index]])
        }
        let phone = try repl(0, device: "phone")
        #expect(phone.waitForLine(timeout: 30) { $0.contains(#""event":"connected""#) } != nil, "stderr: \(phone.stderr)")
        // With --e2e the first device made the identity as it connected: nothing to link.
        phone.write("/device link\n")
        #expect(phone.waitForLine(timeout: 30) { $0.contains(#""event":"linked""#) && $0.contains("ready") } != nil, "printed: \(phone.stdout)")

        let laptop = try repl(1, device: "laptop")
        #expect(laptop.waitForLine(timeout: 30) { $0.contains(#""event":"connected""#) } != nil, "stderr: \(laptop.stderr)")
        #expect(laptop.waitForLine(timeout: 30) { $0.contains(#""event":"needs-linking""#) } != nil, "printed: \(laptop.stdout)")
        laptop.write("/device link\n")
        var listed: String?
        // Listed before the laptop's request is stored, there is nothing yet: list again.
        for _ in 0..<10 where listed == nil {
            phone.write("/device links\n")
            listed = phone.waitForLine(timeout: 6) { $0.contains(#""event":"link-requests""#) && $0.contains(#""code""#) }
        }
        let shown = try #require(laptop.waitForLine(timeout: 30) { $0.contains(#""event":"link-code""#) }, "printed: \(laptop.stdout)")
        let code = try #require(shown.firstMatch(of: /"code":"(\d{6})"/)?.1)
        #expect(listed?.contains(#""code":"\#(code)""#) == true, "the phone lists the laptop with the same code: \(listed ?? phone.stdout)")
        phone.write("/device approve laptop \(code)\n")
        #expect(phone.waitForLine(timeout: 30) { $0.contains(#""event":"link-approved""#) } != nil, "printed: \(phone.stdout)")
        #expect(laptop.waitForLine(timeout: 30) { $0.contains(#""event":"linked""#) && $0.contains("ready") } != nil, "printed: \(laptop.stdout)")
        for process in [phone, laptop] {
            process.write("/quit\n")
            #expect(process.waitForExit(timeout: 30) == 0, "stderr: \(process.stderr)")
        }
        // The directory now certifies both devices.
        let (reader, _) = try await cluster.connectedClient("bob")
        #expect(Set(try await reader.keyDirectory(of: "alice").devices.map(\.device)) == ["phone", "laptop"])
        await reader.close()
        await cluster.stop()
    }
}
