import Foundation
import SIMPClient
import SIMPRedis
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// SIMP nodes on a Redis Cluster (3 masters, a replica each) when a Redis master dies: its
/// replica takes over and the nodes follow the new slot map. With `--redis-min-replicas 1` a
/// message is "accepted" only once a replica has it, so every accepted message outlives the
/// master; the sends of the failover window are delivered or failed with a reason.
@Suite(.serialized) struct RedisMasterFailoverTests {
    @Test func acceptedMessagesOutliveAKilledMaster() async throws {
        let deployment = try Deployment(nodes: 3, cluster: true, extra: ["--redis-min-replicas", "1"])
        defer { deployment.stop() }
        guard case .cluster(let cluster) = deployment.redis else { throw TestSupportError("not a cluster") }
        var users: [NodeUser] = []
        for index in 0..<10 {
            users.append(try await deployment.connect("rm\(index)", startingAt: index % 3) { $0.requestTimeout = .seconds(10) })
        }
        try await deployment.waitForPresence(of: users.map(\.name))

        // The master that holds rm0's inbox, and with it about a third of the users'.
        let victim = try #require(cluster.masterPort(forSlot: RedisCluster.hashSlot("simp:{rm0}:inbox")))
        let onVictim = users.filter { cluster.masterPort(forSlot: RedisCluster.hashSlot("simp:{\($0.name)}:inbox")) == victim }.map(\.name)
        print("killing the Redis master on \(victim), which holds the inboxes of \(onVictim)")

        var traffic = RandomTraffic(users)
        for n in 0..<400 {
            if n == 100 { cluster.kill9(port: victim) }
            if n == 200 {
                // The killed node comes back (as a supervisor would start it) and rejoins as the
                // replica of the one that took over: WAIT 1 can be met again on that shard.
                try await waitForPromotion(cluster, replacing: victim)
                try cluster.restart(port: victim)
                try cluster.waitUntilHealthy(timeout: 30)
            }
            try await traffic.send(n)
        }

        // Every sender hears each message's fate: delivered, or failed with a reason.
        #expect(await traffic.waitForEveryFate(timeout: .seconds(90)) == [], "senders that did not hear every message's fate")
        // Every message a sender was told was accepted is shown to its recipient.
        let accepted = Set(users.flatMap(\.log.accepted))
        #expect(await eventually { accepted.isSubset(of: Set(users.flatMap { $0.log.messages.map(\.id) })) },
                "accepted, never shown: \(accepted.subtracting(users.flatMap { $0.log.messages.map(\.id) }))")
        for failure in users.flatMap(\.log.failed) {
            #expect(!failure.reason.isEmpty, "a failed send says why")
            print("failed \(failure.id): \(failure.reason)")
        }

        let result = traffic.tally("3 nodes on a Redis Cluster, a master killed -9 mid-stream, --redis-min-replicas 1")
        #expect(result.sent == 400)
        #expect(result.lost == 0, "neither received nor reported failed")
        #expect(result.duplicates == 0)
        #expect(result.failedButReceived == 0, "reported failed, yet shown")
        #expect(result.orderViolations == 0)
        #expect(result.unsettled == 0)
        // The shard had no master for a while; the nodes kept serving the others and followed
        // the new map (a message to a user on the victim's shard was accepted after the kill).
        let late = traffic.sent.filter { onVictim.contains(String($0.key.split(separator: ">")[1])) }.values.flatMap { $0.suffix(5) }
        #expect(late.contains { id in users.contains { $0.log.accepted.contains(id) } }, "stores on the promoted replica")
        for user in users { await user.client.close() }
    }

    /// Until a running node serves the slots the killed master had.
    private func waitForPromotion(_ cluster: RedisClusterProcess, replacing victim: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let master = cluster.masterPort(forSlot: RedisCluster.hashSlot("simp:{rm0}:inbox")), master != victim { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw TestSupportError("no replica took over from \(victim) within 30 s")
    }
}

/// `simp-admin` on a Redis Cluster: what it lists walks every master (SCAN is per node).
@Suite(.serialized) struct ClusterAdminTests {
    func admin(_ deployment: Deployment, _ args: [String]) throws -> ChildProcess {
        let process = try ChildProcess(try productPath("simp-admin"), args + deployment.redis.arguments)
        process.closeStdin()
        return process
    }

    @Test func listsSessionsAndInboxesOnEveryMaster() async throws {
        let deployment = try Deployment(nodes: 2, cluster: true)
        defer { deployment.stop() }
        guard case .cluster(let cluster) = deployment.redis else { throw TestSupportError("not a cluster") }
        let online = (0..<9).map { "ca\($0)" }
        let offline = (0..<6).map { "cb\($0)" }
        func master(of user: String) -> Int? { cluster.masterPort(forSlot: RedisCluster.hashSlot("simp:{\(user)}:presence")) }
        #expect(Set(online.map(master)).count == 3, "the users' keys are on all three masters")
        #expect(Set(offline.map(master)).count == 3)

        var clients: [SIMPClient] = []
        for (index, user) in (online + offline).enumerated() {
            let client = SIMPClient(configuration: deployment.configuration(startingAt: index % 2))
            try await client.register(user: user, password: "pw-\(user)")
            if online.contains(user) {
                try await client.connect(user: user, password: "pw-\(user)")
                clients.append(client)
            }
        }
        try await deployment.waitForPresence(of: online)
        // cb0 gets 6 messages, cb1 5, ... cb5 1: every inbox a different depth.
        let sender = clients[0]
        let log = EventLog(sender)
        for (index, user) in offline.enumerated() {
            for k in 0..<(6 - index) { _ = try await sender.send(to: user, text: "for \(user) #\(k)") }
        }
        #expect(await log.wait { $0.accepted.count == 21 })

        let sessions = try admin(deployment, ["sessions", "--json"])
        #expect(sessions.waitForExit(timeout: 15) == 0, "stderr: \(sessions.stderr)")
        let listed = (try JSONSerialization.jsonObject(with: Data(sessions.stdout.utf8)) as? [[String: Any]]) ?? []
        #expect(listed.compactMap { $0["user"] as? String } == online, "\(sessions.stdout)")
        #expect(listed.allSatisfy { $0["nodeAlive"] as? Bool == true })

        let top = try admin(deployment, ["inbox", "--top", "4"])
        #expect(top.waitForExit(timeout: 15) == 0, "stderr: \(top.stderr)")
        let rows = top.stdout.split(separator: "\n").map { $0.split(separator: " ").first.map(String.init) ?? "" }
        #expect(rows == ["USER", "cb0", "cb1", "cb2", "cb3"], "\(top.stdout)")

        let close = try admin(deployment, ["disconnect", "ca4"])
        #expect(close.waitForExit(timeout: 15) == 0, "stderr: \(close.stderr)")
        #expect(close.stdout.contains("of ca4's device default on node node-"), "\(close.stdout)")
        for client in clients { await client.close() }
    }
}

/// How simp-server finds out it is on a cluster, and what it says when told wrong.
@Suite(.serialized) struct ClusterStartTests {
    func start(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(try productPath("simp-server"),
                         ["--port", "0", "--udp-port", "0", "--scrypt-rounds", "1024", "--min-password-length", "1", "--redis-wait", "5",
                          "--e2e", "optional"] + arguments)
    }

    @Test func oneNodeOfAClusterIsEnoughToFindItAll() async throws {
        let cluster = try RedisClusterProcess()
        defer { cluster.stopAll() }
        let server = try ServerProcess(redis: ["--redis", "redis://127.0.0.1:\(cluster.ports[0])"])
        defer { server.process.signal(SIGTERM); _ = server.process.waitForExit(timeout: 10) }
        #expect(server.process.stderr.contains("using a Redis Cluster"), "\(server.process.stderr)")
        // Users whose keys are on different masters than the seed.
        let names = ["alice", "bob", "carol", "dave", "erin"]
        #expect(Set(names.map { cluster.masterPort(forSlot: RedisCluster.hashSlot("simp:{\($0)}:inbox")) }).count == 3)
        var config = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
        config.requestTimeout = .seconds(5)
        var clients: [(SIMPClient, EventLog)] = []
        for name in names {
            let client = SIMPClient(configuration: config)
            try await client.register(user: name, password: "pw-\(name)")
            let log = EventLog(client)
            try await client.connect(user: name, password: "pw-\(name)")
            clients.append((client, log))
        }
        for (index, (client, _)) in clients.enumerated() {
            _ = try await client.send(to: names[(index + 1) % names.count], text: "hello from \(names[index])")
        }
        for (index, (_, log)) in clients.enumerated() {
            let from = names[(index + names.count - 1) % names.count]
            #expect(await log.wait { $0.messages.map(\.text) == ["hello from \(from)"] })
            #expect(await log.wait { $0.delivered.count == 1 })
        }
        // Each user keeps a copy of the conversation in their own slot: the sender's is written
        // after the store (another slot), the recipient's by it.
        for (index, (client, _)) in clients.enumerated() {
            let to = names[(index + 1) % names.count]
            #expect(try await client.history(with: to).map(\.text) == ["hello from \(names[index])"], "\(names[index])'s copy")
            let from = names[(index + names.count - 1) % names.count]
            #expect(try await client.history(with: from).map(\.text) == ["hello from \(from)"], "\(names[index])'s copy")
        }
        for (client, _) in clients { await client.close() }
    }

    @Test func aDatabaseNumberOnAClusterNodeIsAClearError() throws {
        let cluster = try RedisClusterProcess()
        defer { cluster.stopAll() }
        let server = try start(["--redis", "redis://127.0.0.1:\(cluster.ports[0])/2"])
        #expect(server.waitForExit(timeout: 20) == 1)
        #expect(server.stderr.contains("is a Redis Cluster node, and a cluster has only database 0"), "\(server.stderr)")
    }

    @Test func clusterModeOnAPlainRedisIsAClearError() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let server = try start(["--redis", redis.url, "--redis-cluster"])
        #expect(server.waitForExit(timeout: 20) == 1)
        #expect(server.stderr.contains("--redis-cluster given, but Redis at 127.0.0.1:\(redis.port) is not a cluster node"), "\(server.stderr)")
    }

    @Test func severalNodesWithClusterModeOffAreRefused() throws {
        let server = try start(["--redis", "redis://127.0.0.1:7000,127.0.0.1:7001", "--no-redis-cluster"])
        #expect(server.waitForExit(timeout: 20) == 1)
        #expect(server.stderr.contains("several Redis nodes given (2) but cluster mode is off"), "\(server.stderr)")
    }
}
