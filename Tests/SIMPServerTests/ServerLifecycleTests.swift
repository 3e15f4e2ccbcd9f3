import Foundation
import Logging
import SIMPRedis
import SIMPServer
import SIMPTestSupport
import Testing

/// `stop()` undoes whatever `start()` made, however far it got, and ends a start still under way.
@Suite(.serialized) struct ServerLifecycleTests {
    func configuration(redisPort: Int, nodeID: String) -> ServerConfiguration {
        var config = ServerConfiguration()
        config.port = 0
        config.udpPort = 0
        config.nodeID = nodeID
        config.redis = .single(RedisConfiguration(port: redisPort, commandTimeout: .seconds(2)))
        config.scryptRounds = 1024
        // The tests' short passwords: the minimum has its own test (LoginAbuseTests).
        config.limits.minPasswordBytes = 1
        config.redisWait = .seconds(20)
        // Plaintext clients, where a test sends.
        config.endToEnd = .optional
        return config
    }

    /// The second node claims its id, then cannot bind the first one's port: its stop lets go
    /// of the id at once, so it is not held until the record expires.
    @Test func aStartThatFailsHalfWayIsUndoneByStop() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let first = SIMPServer(configuration: configuration(redisPort: redis.port, nodeID: "node-a"))
        let addresses = try await first.start()
        var clashing = configuration(redisPort: redis.port, nodeID: "node-b")
        clashing.port = addresses.tcpPort
        let second = SIMPServer(configuration: clashing)
        await #expect(throws: (any Error).self) { _ = try await second.start() }
        #expect(try redis.command(["EXISTS", "simp:node:node-b"]) == ":1\r\n")
        await second.stop()
        #expect(try redis.command(["EXISTS", "simp:node:node-b"]) == ":0\r\n")
        #expect(await second.sessionCount() == 0)
        await first.stop()
    }

    /// With an hour to wait for Redis, only `stop()` can end the start, and the start says so.
    @Test func stopEndsAStartStillWaitingForRedis() async throws {
        var patient = configuration(redisPort: try freeTCPPort(), nodeID: "node-a")
        patient.redisWait = .seconds(3600)
        let log = LogCapture()
        let server = SIMPServer(configuration: patient, logger: log.logger())
        let starting = Task { try await server.start() }
        #expect(await waitFor { log.lines.contains { $0.contains("waiting for Redis at") } }, "the start waits for Redis")
        await server.stop()
        await #expect { _ = try await starting.value } throws: { error in
            (error as? StartupError)?.description == "the server was stopped while it was starting"
        }
    }
}
