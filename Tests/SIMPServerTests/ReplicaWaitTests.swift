import Foundation
import SIMPClient
import SIMPTestSupport
import Testing

/// `--redis-min-replicas`: "accepted" means a replica has the message too, not only the master.
@Suite(.serialized) struct ReplicaWaitTests {
    func waitFor(_ condition: () throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try condition()
    }

    /// WAIT calls the master has answered (its command statistics).
    func waits(_ master: RedisServerProcess) throws -> Int {
        let info = try master.command(["INFO", "commandstats"])
        guard let range = info.range(of: #"cmdstat_wait:calls=(\d+)"#, options: .regularExpression) else { return 0 }
        return Int(info[range].split(separator: "=")[1]) ?? 0
    }

    @Test func acceptedWaitsForAReplica() async throws {
        let master = try RedisServerProcess()
        let replica = try RedisServerProcess()
        defer { replica.stop(); master.stop() }
        // A replica's full sync starts at once rather than after the default 5 s.
        _ = try master.command(["CONFIG", "SET", "repl-diskless-sync-delay", "0"])
        let follow = ["REPLICAOF", "127.0.0.1", "\(master.port)"]
        _ = try replica.command(follow)
        #expect(try await waitFor { try replica.command(["ROLE"]).contains("connected") })
        let server = try ServerProcess(redisURL: master.url, extra: ["--redis-min-replicas", "1", "--redis-replica-timeout", "0.2"])
        defer {
            server.process.signal(SIGTERM)
            _ = server.process.waitForExit(timeout: 10)
        }
        let config = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
        let alice = SIMPClient(configuration: config)
        try await alice.register(user: "alice", password: "pw-alice")
        try await alice.register(user: "bob", password: "pw-bob")
        let log = EventLog(alice)
        try await alice.connect(user: "alice", password: "pw-alice")

        let first = try await alice.send(to: "bob", text: "one")
        #expect(await log.wait { $0.accepted.contains(first) })
        // Accepted means the replica has it already.
        #expect(try replica.command(["ZCARD", "simp:{bob}:inbox"]) == ":1\r\n")

        // Without a replica the master keeps the next message, but it is not accepted: the
        // store is tried again (each try one more WAIT) until a replica confirms it.
        _ = try replica.command(["REPLICAOF", "NO", "ONE"])
        let before = try waits(master)
        let second = try await alice.send(to: "bob", text: "two")
        #expect(try await waitFor { try waits(master) >= before + 3 })
        #expect(!log.accepted.contains(second) && log.failed.isEmpty)

        _ = try replica.command(follow)
        #expect(await log.wait { $0.accepted.contains(second) })
        #expect(try replica.command(["ZCARD", "simp:{bob}:inbox"]) == ":2\r\n")
        #expect(log.failed.isEmpty)
        await alice.close()
    }
}
