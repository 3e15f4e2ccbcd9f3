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

    /// Script calls the master has answered (EVALSHA's command statistics).
    func scriptCalls(_ master: RedisServerProcess) throws -> Int {
        let info = try master.command(["INFO", "commandstats"])
        guard let range = info.range(of: #"cmdstat_evalsha:calls=(\d+)"#, options: .regularExpression) else { return 0 }
        return Int(info[range].split(separator: "=")[1]) ?? 0
    }

    /// Two redis-servers, the second a replica of the first, in sync.
    func masterAndReplica() async throws -> (RedisServerProcess, RedisServerProcess) {
        let master = try RedisServerProcess()
        let replica = try RedisServerProcess()
        // A replica's full sync starts at once rather than after the default 5 s.
        _ = try master.command(["CONFIG", "SET", "repl-diskless-sync-delay", "0"])
        _ = try replica.command(["REPLICAOF", "127.0.0.1", "\(master.port)"])
        guard try await waitFor({ try replica.command(["ROLE"]).contains("connected") }) else {
            replica.stop()
            master.stop()
            throw TestSupportError("the replica did not sync")
        }
        return (master, replica)
    }

    @Test func acceptedWaitsForAReplica() async throws {
        let (master, replica) = try await masterAndReplica()
        defer { replica.stop(); master.stop() }
        let follow = ["REPLICAOF", "127.0.0.1", "\(master.port)"]
        let server = try ServerProcess(redisURL: master.url, extra: ["--redis-min-replicas", "1", "--redis-replica-timeout", "0.2", "--metrics-port", "0"])
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

        // Without a replica the master does not take the next message (the store script
        // counts the replicas online): it waits on the node, neither accepted nor failed,
        // and the node names the shard it waits for.
        _ = try replica.command(["REPLICAOF", "NO", "ONE"])
        let second = try await alice.send(to: "bob", text: "two")
        let held = "simp_redis_shard_replicas_short{shard=\"127.0.0.1:\(master.port)\"} 0"
        #expect(try await waitFor { try httpExchange(port: try server.metricsPort(), path: "/metrics").contains(held) })
        #expect(try master.command(["ZCARD", "simp:{bob}:inbox"]) == ":1\r\n")
        #expect(!log.accepted.contains(second) && log.failed.isEmpty)

        _ = try replica.command(follow)
        #expect(await log.wait { $0.accepted.contains(second) })
        #expect(try replica.command(["ZCARD", "simp:{bob}:inbox"]) == ":2\r\n")
        #expect(log.failed.isEmpty)
        await alice.close()
    }

    /// A message sent while the master has no replica is neither stored nor sent to its
    /// recipient on another node; once a replica is back it is stored, sent and accepted.
    @Test func aRecipientOnAnotherNodeIsSentOnlyWhatAReplicaHas() async throws {
        let (master, replica) = try await masterAndReplica()
        defer { replica.stop(); master.stop() }
        let follow = ["REPLICAOF", "127.0.0.1", "\(master.port)"]
        let options = ["--redis-min-replicas", "1", "--redis-replica-timeout", "0.2"]
        let nodes = try [1, 2].map { try ServerProcess(redisURL: master.url, extra: options + ["--node-id", "node-\($0)"]) }
        defer {
            for node in nodes {
                node.process.signal(SIGTERM)
                _ = node.process.waitForExit(timeout: 10)
            }
        }
        let alice = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: nodes[0].tcpPort))
        let bob = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: nodes[1].tcpPort))
        try await alice.register(user: "alice", password: "pw-alice")
        try await bob.register(user: "bob", password: "pw-bob")
        let aliceLog = EventLog(alice)
        let bobLog = EventLog(bob)
        try await alice.connect(user: "alice", password: "pw-alice")
        try await bob.connect(user: "bob", password: "pw-bob")
        #expect(try await waitFor { try master.command(["HVALS", "simp:{bob}:presence"]).contains("node-2 ") })

        _ = try replica.command(["REPLICAOF", "NO", "ONE"])
        let probes = try scriptCalls(master)
        let id = try await alice.send(to: "bob", text: "only once a replica has it")
        // node-1 holds it and asks the master for its replicas again and again.
        #expect(try await waitFor { try scriptCalls(master) >= probes + 4 })
        #expect(try master.command(["ZCARD", "simp:{bob}:inbox"]) == ":0\r\n", "the master does not have it")
        #expect(bobLog.messages.isEmpty && !aliceLog.accepted.contains(id))

        _ = try replica.command(follow)
        #expect(await bobLog.wait { $0.messages.map(\.id) == [id] })
        #expect(await aliceLog.wait { $0.accepted.contains(id) && $0.delivered.contains(id) })
        await alice.close()
        await bob.close()
    }
}
