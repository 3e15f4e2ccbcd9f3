import MQTTLoad
@testable import SIMPBench
import SIMPClient
import Testing

@Suite struct PlacementTests {
    let three = Placement(nodes: [7001, 7002, 7003].map { ServerAddress(host: "127.0.0.1", port: $0) })

    @Test func withThreeNodesEveryPairCrossesToTheNextNode() {
        #expect((0..<4).map { three.sender(pair: $0).port } == [7001, 7002, 7003, 7001])
        #expect((0..<4).map { three.receiver(pair: $0).port } == [7002, 7003, 7001, 7002])
    }

    @Test func everyClientGetsAllNodesStartingAtItsOwn() {
        #expect(three.receiver(pair: 1).servers.map(\.port) == [7003, 7001, 7002])
        #expect(three.configuration(startingAt: 0).servers.map(\.port) == [7001, 7002, 7003])
    }

    @Test func withOneNodeBothEndsOfAPairAreOnIt() {
        let one = Placement(nodes: [ServerAddress(host: "127.0.0.1", port: 7700)])
        #expect(one.sender(pair: 5).servers.map(\.port) == [7700])
        #expect(one.receiver(pair: 5).servers.map(\.port) == [7700])
    }

    @Test func theServerOptionTakesOneAddressOrAList() throws {
        #expect(try Placement.parse("10.0.0.1:7700") == [ServerAddress(host: "10.0.0.1", port: 7700)])
        #expect(try Placement.parse("a:1, b:2,[::1]:3") == [ServerAddress(host: "a", port: 1), ServerAddress(host: "b", port: 2),
                                                            ServerAddress(host: "::1", port: 3)])
        for bad in ["", "a", "a:", ":7700", "a:70000", "a:1,,b"] {
            #expect(throws: BenchError.self) { try Placement.parse(bad) }
        }
    }
}

@Suite struct SpawnedClusterTests {
    @Test func theServersAreGivenEveryNodeAsASeed() {
        #expect(SpawnedCluster.seedList([7001, 7002]) == "redis://127.0.0.1:7001,redis://127.0.0.1:7002")
    }

    @Test func theClusterIsHealthyOnceEveryNodeIsOkAndEveryReplicaLinked() {
        let ok = Array(repeating: "cluster_state:ok\r\n", count: 6)
        let master = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n"
        let linked = "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n"
        let syncing = "# Replication\r\nrole:slave\r\nmaster_link_status:down\r\n"
        let healthy = [master, master, master, linked, linked, linked]
        #expect(SpawnedCluster.replicasWhenHealthy(clusterInfo: ok, replication: healthy) == 3)
        var failing = ok
        failing[2] = "cluster_state:fail\r\n"
        #expect(SpawnedCluster.replicasWhenHealthy(clusterInfo: failing, replication: healthy) == nil)
        #expect(SpawnedCluster.replicasWhenHealthy(clusterInfo: ok, replication: [master, master, master, linked, linked, syncing]) == nil)
        #expect(SpawnedCluster.replicasWhenHealthy(clusterInfo: ok, replication: Array(repeating: master, count: 6)) == nil)
    }
}

@Suite struct TopologyReportTests {
    @Test func theTopologyReadsPlainly() {
        #expect(Topology(nodes: 3, redis: "cluster", redisMasters: 3, redisReplicas: 3, minReplicas: 1).description
                == "3 nodes, Redis Cluster 3 masters + 3 replicas, min-replicas 1")
        #expect(Topology(nodes: 1, redis: "single", redisMasters: 1, redisReplicas: 0, minReplicas: 0).description
                == "1 node, one redis-server, min-replicas 0")
    }

    @Test func processesAreSummedAndTheirNumberShown() {
        let sum = ProcessSample.sum([ProcessSample(cpuSeconds: 1, rssBytes: 100), ProcessSample(cpuSeconds: 2, rssBytes: 200),
                                     ProcessSample(cpuSeconds: 3, rssBytes: 300)])
        #expect(sum?.cpuSeconds == 6 && sum?.rssBytes == 600 && sum?.processes == 3)
        #expect(ProcessSample.sum([]) == nil)
        let start = ProcessSample(cpuSeconds: 0, rssBytes: 0, processes: 3)
        let end = ProcessSample(cpuSeconds: 2, rssBytes: 600, processes: 3)
        var simp = LoadResult()
        simp.usage = ["server": ProcessUsage(from: start, to: end, seconds: 2, messages: 1000)]
        var mosquitto = LoadResult()
        mosquitto.usage = ["server": ProcessUsage(from: ProcessSample(cpuSeconds: 0, rssBytes: 0), to: ProcessSample(cpuSeconds: 1, rssBytes: 10),
                                                  seconds: 2, messages: 1000)]
        let topology = Topology(nodes: 3, redis: "single", redisMasters: 1, redisReplicas: 0, minReplicas: 0)
        let report = BenchReport(pattern: LoadPattern(pairs: 1, window: 1), topology: topology,
                                 systems: [SystemReport(system: "SIMP", simp), SystemReport(system: "M", mosquitto)])
        #expect(report.table().contains("SIMP: 3 nodes, one redis-server"))
        #expect(line("server (3/1 processes) cores, us/msg", of: report)?.contains("1.00, 2000.0") == true)
        #expect(report.json().contains("\"nodes\":3"))
        #expect(report.json().contains("\"processes\":3"))
    }
}
