import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A server that answers a user's key directory with two identities, one after the other
/// (`TamperingProxy.Rule.twoIdentities`): the device a client encrypts to must be certified by
/// the identity it pinned (and would have warned of, had it changed), never by a key from a
/// later fetch of the same check (issue 44: "a device added without the user's approval is
/// not encrypted to").
@Suite(.serialized) struct DirectoryTamperingTests {
    typealias E = EncryptedConversationTests

    @Test func aDeviceCertifiedByAnotherIdentityThanThePinnedOneIsNeverEncryptedTo() async throws {
        let cluster = try await TestCluster.start()
        let proxy = try TamperingProxy(serverTCP: cluster.addresses.tcpPort, serverUDP: cluster.addresses.udpPort,
                                       rule: .twoIdentities(of: "bob"))
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
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
        let (bob, _) = try await E.connected(cluster, "bob", directories[1])
        #expect(try await alice.setUpIdentity() == .created)
        #expect(try await bob.setUpIdentity() == .created)

        // The pin reads bob's real identity; the devices' fetch right after gets the forged one.
        for attempt in 0..<2 {
            let error = await #expect(throws: ClientError.self, "attempt \(attempt)") {
                _ = try await alice.send(to: "bob", text: "not for a slipped-in device")
            }
            #expect(error?.code == .identityChanged, "\(String(describing: error))")
            #expect(error?.message.contains("two identity keys for bob") == true, "\(String(describing: error))")
        }
        let store = try await alice.identityStore()
        #expect(try store.groupState(of: "bob") == nil, "no group was made with bob")
        #expect(aliceLog.accepted.isEmpty, "nothing was sent")
        for client in [alice, bob] { await client.close() }
        proxy.stop()
        await cluster.stop()
    }
}
