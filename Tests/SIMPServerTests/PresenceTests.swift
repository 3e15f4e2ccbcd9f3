import SIMPClient
import SIMPRedis
import Testing
@testable import SIMPServer

/// Presence (`simp:{USER}:presence`, one field per device, `PresenceEntry`): written once the
/// session's UDP path is bound, batched with other sessions' on the router's tick, with a TTL;
/// removed when the session ends.
@Suite(.serialized) struct PresenceTests {
    @Test func aBoundSessionIsPresentUntilItCloses() async throws {
        let cluster = try await TestCluster.start()
        let redis = RedisPool(configuration: RedisConfiguration(port: cluster.redis.port))
        func presence(_ user: String) async throws -> [String: PresenceEntry] {
            let flat = try await redis.run(RedisCommand("HGETALL", ["simp:{\(user)}:presence"])).array?.compactMap(\.string) ?? []
            return Dictionary(uniqueKeysWithValues: stride(from: 0, to: flat.count - 1, by: 2).map { (flat[$0], PresenceEntry(flat[$0 + 1])!) })
        }
        func waitFor(_ condition: () async throws -> Bool) async throws -> Bool {
            for _ in 0..<250 {
                if try await condition() { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
        let (bob, _) = try await cluster.connectedClient("bob")
        let (carol, _) = try await cluster.connectedClient("carol")
        #expect(try await waitFor { try await presence("bob")["default"]?.address.hasPrefix("127.0.0.1:") == true })
        #expect(try await waitFor { try await presence("carol")["default"]?.node == "node-1" })
        let ttl = try await redis.run(RedisCommand("TTL", ["simp:{bob}:presence"])).int ?? -2
        #expect(ttl > 0 && ttl <= 90)
        await bob.close()
        #expect(try await waitFor { try await presence("bob").isEmpty })
        #expect(try await presence("carol")["default"] != nil)
        await carol.close()
        await redis.shutdown()
        await cluster.stop()
    }

    /// Keepalives renew the entry and the TTL; a presence that vanished (a Redis restarted without it)
    /// is written whole again by the next renewal.
    @Test func keepalivesRenewPresenceAndRestoreItWhenGone() async throws {
        let cluster = try await TestCluster.start { $0.presenceTTLSeconds = 3 }
        let redis = RedisPool(configuration: RedisConfiguration(port: cluster.redis.port))
        var config = cluster.clientConfiguration()
        config.keepaliveInterval = .milliseconds(200)
        let bob = SIMPClient(configuration: config)
        try await bob.register(user: "bob", password: "pw-bob")
        try await bob.connect(user: "bob", password: "pw-bob")
        func ttl() async throws -> Int64 { try await redis.run(RedisCommand("TTL", ["simp:{bob}:presence"])).int ?? -2 }
        func fields() async throws -> [String] {
            try await redis.run(RedisCommand("HKEYS", ["simp:{bob}:presence"])).array?.compactMap(\.string).sorted() ?? []
        }
        #expect(await eventually { try await fields() == ["default"] })
        // Set far above the server's TTL: only a renewal brings it back to 3 s or less.
        _ = try await redis.run(RedisCommand("EXPIRE", ["simp:{bob}:presence", 1_000]))
        #expect(await eventually { try await ttl() <= 3 })
        #expect(try await fields() == ["default"])
        _ = try await redis.run(RedisCommand("DEL", ["simp:{bob}:presence"]))
        #expect(await eventually { try await fields() == ["default"] })
        #expect(try await ttl() > 0)
        await bob.close()
        await redis.shutdown()
        await cluster.stop()
    }
}
