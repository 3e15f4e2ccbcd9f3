import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// Issue 46, finding 8: passwords of at least 8 bytes, hashed at OWASP's minimum scrypt
/// parameters by default, within a memory bound, and older hashes made again at a login.
@Suite(.serialized) struct PasswordPolicyTests {
    @Test func theDefaultsAreOWASPsMinimum() {
        #expect(ServerConfiguration().scryptRounds == 1 << 17)
        #expect(ServerLimits().minPasswordBytes == 8)
        #expect(PasswordHasher().kdfName == "scrypt:131072:8:1")
        // 128 MiB a hash against a 256 MiB budget: two at once; cheaper hashes, no more than two threads.
        #expect(PasswordHasher.threads(rounds: 1 << 17) == 2)
        #expect(PasswordHasher.threads(rounds: 1 << 18) == 1)
        #expect(PasswordHasher.threads(rounds: 1 << 20) == 1)
        #expect(PasswordHasher.threads(rounds: 1024) == 2)
    }

    @Test func aPasswordShorterThanTheMinimumIsRefused() async throws {
        let cluster = try await TestCluster.start { $0.limits.minPasswordBytes = 8 }
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        let short = try peer.request(1, .register(.with { $0.user = "alice"; $0.password = "1234567" }))
        #expect(errorCode(short) == .badRequest)
        if case .error(let error)? = short?.body { #expect(error.reason == "a password must be 8-1024 bytes") }
        guard case .ok? = try peer.request(2, .register(.with { $0.user = "alice"; $0.password = "12345678" }))?.body else {
            Issue.record("an 8-byte password was refused")
            return
        }
        let (client, _) = try await cluster.connectedDevice("alice", "phone", password: "12345678")
        await #expect(throws: ClientError.self) { try await client.changePassword(from: "12345678", to: "short") }
        await client.close()
        await cluster.stop()
    }

    /// A hash made with fewer rounds than the node's is made again at the next login, and the
    /// password still works after it.
    @Test func anOlderHashIsUpgradedAtTheNextLogin() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let kdf = { try redis.command(["HGET", "simp:{alice}:user", "kdf"]) }
        do {
            let old = try ServerProcess(redisURL: redis.url)
            defer { old.process.signal(SIGTERM); _ = old.process.waitForExit(timeout: 10) }
            let peer = try RawPeer(tcpPort: old.tcpPort, udpPort: old.udpPort)
            guard case .ok? = try peer.request(1, .register(.with { $0.user = "alice"; $0.password = "pw-alice" }))?.body else {
                Issue.record("register refused")
                return
            }
            #expect(try kdf().contains("scrypt:1024:8:1"))
        }
        let stronger = try ServerProcess(redisURL: redis.url, extra: ["--scrypt-rounds", "2048"])
        defer { stronger.process.signal(SIGTERM); _ = stronger.process.waitForExit(timeout: 10) }
        _ = try RawPeer(tcpPort: stronger.tcpPort, udpPort: stronger.udpPort).login("alice", "pw-alice")
        #expect(await eventually { try kdf().contains("scrypt:2048:8:1") }, "\((try? kdf()) ?? "no answer")")
        _ = try RawPeer(tcpPort: stronger.tcpPort, udpPort: stronger.udpPort).login("alice", "pw-alice")
    }
}
