import Foundation
import SIMPClient
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import Testing

/// `--redis-min-replicas 1` on a Redis Cluster whose killed master is not restarted: its replica
/// takes over and runs without a replica of its own, as it would until an operator adds one.
/// What was accepted before is still delivered; a new message to a user on that shard waits,
/// then fails REPLICAS_UNAVAILABLE (never accepted); users on the other shards are not held up.
@Suite(.serialized) struct ShardWithoutReplicaTests {
    @Test func acceptedOnesAreDeliveredNewOnesFailAndOtherShardsCarryOn() async throws {
        let deployment = try Deployment(nodes: 2, cluster: true,
                                        extra: ["--redis-min-replicas", "1", "--redis-replica-timeout", "0.2", "--metrics-port", "0"])
        defer { deployment.stop() }
        guard case .cluster(let cluster) = deployment.redis else { throw TestSupportError("not a cluster") }
        func master(of user: String) -> Int? { cluster.masterPort(forSlot: RedisCluster.hashSlot("simp:{\(user)}:inbox")) }

        let names = (0..<12).map { "sr\($0)" }
        let victim = try #require(master(of: names[0]))
        let onVictim = names.filter { master(of: $0) == victim }
        let healthy = names.filter { master(of: $0) != victim }
        try #require(onVictim.count >= 2 && healthy.count >= 3, "users on the victim shard: \(onVictim)")
        let away = onVictim[0]
        let awayClient = SIMPClient(configuration: deployment.configuration(startingAt: 0))
        try await awayClient.register(user: away, password: "pw-\(away)")
        await awayClient.close()
        var users: [NodeUser] = []
        for (index, name) in ([onVictim[1]] + healthy).enumerated() {
            users.append(try await deployment.connect(name, startingAt: index % 2) { $0.requestTimeout = .seconds(30) })
        }
        try await deployment.waitForPresence(of: users.map(\.name))
        let stranded = users[0]
        let others = Array(users.dropFirst())

        // Accepted while the shard had its replica: a replica has them.
        var before: [String] = []
        for k in 0..<5 { before.append(try await others[0].client.send(to: away, text: "before #\(k)")) }
        #expect(await others[0].log.wait { log in before.allSatisfy(log.accepted.contains) })

        cluster.kill9(port: victim)
        try await waitForPromotion(cluster, of: names[0], replacing: victim)
        try cluster.waitUntilHealthy(timeout: 30)
        let promoted = try #require(master(of: names[0]))
        // A node learns the new slot map when a store meets the dead master (that store fails,
        // "connection refused"): one message through each node first.
        var first: [String] = []
        for user in users.prefix(2) {
            let id = try await user.client.send(to: away, text: "map")
            first.append(id)
            #expect(await user.log.wait { $0.accepted.contains(id) || $0.failed.contains { $0.id == id } })
        }

        // Traffic to the shard without a replica, and among the others at the same time.
        var toStranded: [String] = []
        for sender in others.prefix(2) {
            for k in 0..<3 { toStranded.append(try await sender.client.send(to: stranded.name, text: "after #\(k)")) }
        }
        var traffic = RandomTraffic(others)
        for n in 0..<60 { try await traffic.send(n) }
        // From the stranded user to the others: its own shard is not where these are stored.
        var fromStranded: [String] = []
        for (k, other) in others.prefix(3).enumerated() {
            fromStranded.append(try await stranded.client.send(to: other.name, text: "from stranded #\(k)"))
        }

        #expect(await traffic.waitForEveryFate(timeout: .seconds(30)) == [], "senders that did not hear every message's fate")
        let result = traffic.tally("2 nodes, a shard failed over and left without a replica, --redis-min-replicas 1")
        #expect(result.sent == 60 && result.lost == 0 && result.duplicates == 0 && result.orderViolations == 0)
        #expect(others.allSatisfy { $0.log.failed.filter { !toStranded.contains($0.id) && !first.contains($0.id) }.isEmpty },
                "between users of healthy shards nothing fails: \(others.flatMap(\.log.failed))")
        #expect(await stranded.log.wait { log in fromStranded.allSatisfy(log.delivered.contains) })

        // Never accepted; failed with the code's reason once the wait ran out.
        let failures = { others.flatMap(\.log.failed).filter { toStranded.contains($0.id) } }
        #expect(await others[0].log.wait(timeout: .seconds(40)) { _ in failures().count == toStranded.count })
        #expect(failures().allSatisfy { $0.reason.contains("replicas this server requires") }, "\(failures())")
        #expect(!others.contains { $0.log.accepted.contains(where: toStranded.contains) })
        #expect(!stranded.log.messages.contains { toStranded.contains($0.id) })

        // The operator sees which shard: a metric on each node that held stores for it.
        let metrics = try deployment.servers.map { try httpExchange(port: try $0.metricsPort(), path: "/metrics") }
        #expect(metrics.contains { $0.contains("simp_redis_shard_replicas_short{shard=\"127.0.0.1:\(promoted)\"} 0") }, "\(metrics)")
        let ready = try deployment.servers.map { try httpExchange(port: try $0.metricsPort(), path: "/ready") }
        #expect(ready.allSatisfy { $0.contains("200 OK") }, "the nodes still serve: \(ready)")
        #expect(ready.contains { $0.contains("degraded: Redis shard 127.0.0.1:\(promoted) has 0 of the 1 replicas") }, "\(ready)")

        // What was accepted before reaches its recipient from the shard without a replica.
        let back = SIMPClient(configuration: deployment.configuration(startingAt: 1))
        let backLog = EventLog(back)
        try await back.connect(user: away, password: "pw-\(away)")
        #expect(await backLog.wait { log in Set(log.messages.map(\.id)).isSuperset(of: before) })
        await back.close()

        // The node kept each failure with its id (score minus REPLICAS_UNAVAILABLE's code), and
        // the sender, on a new session, sending one again (as a client that never heard the
        // failure would) gets the same failure; nothing is stored.
        let sender = others[0]
        let kept = try cluster.command(port: promoted, ["ZSCORE", "simp:{\(stranded.name)}:mids:\(sender.name)", toStranded[0]])
        #expect(kept.contains("-23"), "\(kept)")
        await sender.client.close()
        let peer = try RawPeer(tcpPort: deployment.servers[0].tcpPort, udpPort: 0)
        try peer.connectAndBind(token: try peer.login(sender.name, "pw-\(sender.name)"))
        var again = Simp_Message()
        again.version = 1
        again.messageID = toStranded[0]
        again.toUser = stranded.name
        again.type = .text
        again.content = "after #0"
        again.clientSeq = 1
        peer.sendDatagram(.data, try again.serializedBytes())
        let (failed, _) = try peer.readFailedAndAccepted()
        // While the shard stays short its stores wait without asking Redis, so this one waits
        // and fails the same way; once the shard has its replica, the kept failure answers it.
        #expect(failed?.messageID == toStranded[0] && failed?.code == .replicasUnavailable, "\(String(describing: failed))")
        #expect(!stranded.log.messages.contains { toStranded.contains($0.id) })
        for user in users { await user.client.close() }
    }

    /// Until a running node serves the slots the killed master had.
    private func waitForPromotion(_ cluster: RedisClusterProcess, of user: String, replacing victim: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let master = cluster.masterPort(forSlot: RedisCluster.hashSlot("simp:{\(user)}:inbox")), master != victim { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw TestSupportError("no replica took over from \(victim) within 30 s")
    }
}
