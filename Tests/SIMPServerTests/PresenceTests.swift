import SIMPClient
import SIMPRedis
import Testing

/// Presence (`simp:presence:USER`): written once the session's UDP path is bound, batched with
/// other sessions' on the router's tick, with a TTL; removed when the session ends.
@Suite(.serialized) struct PresenceTests {
    @Test func aBoundSessionIsPresentUntilItCloses() async throws {
        let cluster = try await TestCluster.start()
        let redis = RedisPool(configuration: RedisConfiguration(port: cluster.redis.port))
        func presence(_ user: String) async throws -> [String: String] {
            let flat = try await redis.run(RedisCommand("HGETALL", ["simp:{\(user)}:presence"])).array?.compactMap(\.string) ?? []
            return Dictionary(uniqueKeysWithValues: stride(from: 0, to: flat.count - 1, by: 2).map { (flat[$0], flat[$0 + 1]) })
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
        #expect(try await waitFor { try await presence("bob")["addr"]?.hasPrefix("127.0.0.1:") == true })
        #expect(try await waitFor { try await presence("carol")["node"] != nil })
        let ttl = try await redis.run(RedisCommand("TTL", ["simp:{bob}:presence"])).int ?? -2
        #expect(ttl > 0 && ttl <= 90)
        await bob.close()
        #expect(try await waitFor { try await presence("bob").isEmpty })
        #expect(try await presence("carol")["node"] != nil)
        await carol.close()
        await redis.shutdown()
        await cluster.stop()
    }
}
