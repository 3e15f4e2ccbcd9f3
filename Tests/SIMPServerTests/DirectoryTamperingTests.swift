import Crypto
import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPMLS
import SIMPTestSupport
import Testing

/// A server that answers a user's key directory with two identities, one after the other
/// (`TamperingProxy.Rule.twoIdentities`): a member check reads each peer's devices from the
/// very answer it pinned the identity from, so a device certified by another key is never
/// encrypted to without the change being told (issue 44: "a device added without the user's
/// approval is not encrypted to, and its owner's peers are warned").
@Suite(.serialized) struct DirectoryTamperingTests {
    typealias E = EncryptedConversationTests

    /// alice (her device "phone") through a proxy breaking `rule`, bob straight to the server,
    /// each registered, connected on one of `directories` and with an identity made there.
    static func aliceThroughProxy(_ cluster: TestCluster, _ rule: TamperingProxy.Rule, _ directories: [String]) async throws
        -> (proxy: TamperingProxy, alice: (SIMPClient, EventLog), bob: (SIMPClient, EventLog)) {
        let proxy = try TamperingProxy(serverTCP: cluster.addresses.tcpPort, serverUDP: cluster.addresses.udpPort, rule: rule)
        for user in ["alice", "bob"] { try await cluster.register(user) }
        var configuration = cluster.clientConfiguration()
        configuration.port = proxy.tcpPort
        configuration.dataDirectory = directories[0]
        configuration.device = "phone"
        configuration.directoryCheckInterval = .zero
        configuration.endToEnd = true
        let alice = SIMPClient(configuration: configuration)
        let aliceLog = EventLog(alice)
        try await alice.connect(user: "alice", password: "pw-alice")
        let bob = try await E.connected(cluster, "bob", directories[1])
        #expect(try await alice.setUpIdentity() == .created)
        #expect(try await bob.0.setUpIdentity() == .created)
        return (proxy, (alice, aliceLog), bob)
    }

    /// An answer for bob that names another user is refused before anything is recorded: bob's
    /// key is not pinned from it (pinned, bob's real key would read as a change next time).
    @Test func anAnswerNamingAnotherUserPinsNothing() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (proxy, (alice, _), (bob, _)) = try await Self.aliceThroughProxy(cluster, .namesAnotherUser(for: "bob"), directories)

        let refused = await #expect(throws: ClientError.self) { _ = try await alice.pinIdentity(of: "bob") }
        #expect(refused?.message.contains("mallory's key directory for bob") == true, "\(String(describing: refused))")
        let bobsKey = try Curve25519.Signing.PrivateKey(rawRepresentation: try #require(try await bob.identityStore().ownKeys()).identityKey)
        let store = try await alice.identityStore()
        #expect(try store.record(peer: "bob", identityKey: Array(bobsKey.publicKey.rawRepresentation), nowMillis: 0) == .new,
                "nothing was recorded for bob")
        for client in [alice, bob] { await client.close() }
        proxy.stop()
        await cluster.stop()
    }

    @Test func aDeviceOfAnIdentityNotToldIsNeverEncryptedTo() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (proxy, (alice, aliceLog), (bob, bobLog)) = try await Self.aliceThroughProxy(cluster, .twoIdentities(of: "bob"), directories)

        // A member check before every send (an interval of zero); whichever answer each check
        // gets, bob's real device leaves alice's conversation only in a send that told of the
        // change. (The forged device has no KeyPackage here, so it could never join: what is
        // checked is that nothing is decided on an answer whose identity was not pinned.)
        let store = try await alice.identityStore()
        var wasMember = false
        // A check that never saw bob's device in the group would have checked nothing.
        var everMember = false
        func told() -> Int { aliceLog.all.filter { $0 == .identityChanged(user: "bob") }.count }
        for attempt in 0..<4 {
            let toldBefore = told()
            _ = try? await alice.send(to: "bob", text: "attempt \(attempt)")
            guard let state = try store.groupState(of: "bob") else { continue }
            let group = try MLSGroup(savedState: state, credentialValidator: nil, proposalApprover: nil)
            let members = Set(ConversationKeys.memberIdentities(group).values.map { String(decoding: $0, as: UTF8.self) })
            let isMember = members.contains("bob/phone")
            if wasMember, !isMember {
                #expect(await aliceLog.wait { _ in told() > toldBefore }, "attempt \(attempt): bob's device left the conversation untold")
            }
            wasMember = isMember
            everMember = everMember || isMember
        }
        #expect(everMember, "bob's real device was in the conversation at least once")
        #expect(told() >= 1, "the forged identity was told")
        _ = bobLog
        for client in [alice, bob] { await client.close() }
        proxy.stop()
        await cluster.stop()
    }
}
