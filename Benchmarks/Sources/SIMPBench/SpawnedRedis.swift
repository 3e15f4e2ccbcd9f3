import Foundation
import MQTTLoad

/// The Redis that spawned servers share: one redis-server or a Redis Cluster, AOF everysec,
/// logs and data in the bench's temporary directory.
struct SpawnedRedis {
    var processes: [Process]
    /// What simp-server needs on its command line to use this Redis.
    var serverArguments: [String]
    var cluster: Bool
    var masters: Int
    var replicas: Int

    static func single(in directory: URL) async throws -> SpawnedRedis {
        let port = try await LocalPorts.free()
        let redis = try await startServer(port: port, in: directory)
        return SpawnedRedis(processes: [redis], serverArguments: ["--redis", "redis://127.0.0.1:\(port)"],
                            cluster: false, masters: 1, replicas: 0)
    }

    /// One redis-server listening on `port`; `extra` arguments are added (cluster mode).
    static func startServer(port: Int, in directory: URL, extra: [String] = []) async throws -> Process {
        let log = directory.appendingPathComponent("redis.log")
        let redis = try Spawn.launch(Spawn.executable("redis-server"), [
            "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
            "--appendfsync", "everysec", "--dir", directory.path, "--daemonize", "no", "--loglevel", "warning",
            // Off stdout, which carries the report.
            "--logfile", log.path,
        ] + extra)
        guard try await LocalPorts.waitUntilListening(port, seconds: 10) else {
            await Spawn.terminate([redis])
            throw BenchError("redis-server did not listen on 127.0.0.1:\(port) within 10 s: \(Spawn.tail(log))")
        }
        return redis
    }
}

/// A real Redis Cluster: 6 redis-servers on free loopback ports, 3 masters each with one
/// replica (made by `redis-cli --cluster create`), each node in its own directory.
enum SpawnedCluster {
    static let nodes = 6

    static func start(in directory: URL) async throws -> SpawnedRedis {
        let ports = try await Spawn.freePorts(2 * nodes)
        // Redis 7 takes the cluster bus port apart from the client port (else it is port + 10000).
        let (clientPorts, busPorts) = (Array(ports[..<nodes]), Array(ports[nodes...]))
        var processes: [Process] = []
        do {
            for (port, bus) in zip(clientPorts, busPorts) {
                processes.append(try await startNode(port: port, busPort: bus, in: directory))
            }
            try await create(clientPorts, in: directory)
            let replicas = try await waitUntilHealthy(clientPorts)
            return SpawnedRedis(processes: processes, serverArguments: ["--redis", seedList(clientPorts), "--redis-cluster"],
                                cluster: true, masters: nodes - replicas, replicas: replicas)
        } catch {
            await Spawn.terminate(processes)
            throw error
        }
    }

    /// simp-server's --redis value: every node, so it finds the cluster from any of them.
    static func seedList(_ ports: [Int]) -> String {
        ports.map { "redis://127.0.0.1:\($0)" }.joined(separator: ",")
    }

    private static func startNode(port: Int, busPort: Int, in directory: URL) async throws -> Process {
        let folder = directory.appendingPathComponent("redis-\(port)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return try await SpawnedRedis.startServer(port: port, in: folder, extra: [
            "--cluster-enabled", "yes", "--cluster-port", "\(busPort)",
            "--cluster-config-file", folder.appendingPathComponent("nodes.conf").path, "--cluster-node-timeout", "1000",
        ])
    }

    private static func create(_ ports: [Int], in directory: URL) async throws {
        let logURL = directory.appendingPathComponent("cluster-create.log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let log = try FileHandle(forWritingTo: logURL)
        defer { try? log.close() }
        let cli = try Spawn.launch(Spawn.executable("redis-cli"), ["--cluster", "create"] + ports.map { "127.0.0.1:\($0)" }
                                   + ["--cluster-replicas", "1", "--cluster-yes"], stdout: log, stderr: log)
        guard await Spawn.waitForExit(cli, seconds: 60) else {
            await Spawn.terminate([cli])
            throw BenchError("redis-cli --cluster create did not finish within 60 s: \(Spawn.tail(logURL))")
        }
        // Its exit status may already be reaped by Foundation; its last word is reliable.
        let output = (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
        guard output.contains("All 16384 slots covered") else {
            throw BenchError("redis-cli --cluster create failed: \(Spawn.tail(logURL))")
        }
    }

    /// Asks every node until all say cluster_state:ok and every replica's link to its master
    /// is up; returns the number of replicas.
    private static func waitUntilHealthy(_ ports: [Int], seconds: Double = 30) async throws -> Int {
        let cli = try Spawn.executable("redis-cli")
        let deadline = Date().addingTimeInterval(seconds)
        var states: [String] = []
        while Date() < deadline {
            var clusterInfo: [String] = []
            var replication: [String] = []
            for port in ports {
                clusterInfo.append(try await Spawn.output(cli, ["-p", "\(port)", "CLUSTER", "INFO"]))
                replication.append(try await Spawn.output(cli, ["-p", "\(port)", "INFO", "replication"]))
            }
            if let replicas = replicasWhenHealthy(clusterInfo: clusterInfo, replication: replication) { return replicas }
            states = zip(ports, zip(clusterInfo, replication)).map { port, info in
                "\(port): " + Self.fields(["cluster_state", "role", "master_link_status"], in: info.0 + info.1)
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw BenchError("Redis Cluster not healthy after \(Int(seconds)) s: \(states.joined(separator: "; "))")
    }

    /// nil until every node says cluster_state:ok and half the nodes are replicas (one per
    /// master) whose link to their master is up; then the number of replicas.
    static func replicasWhenHealthy(clusterInfo: [String], replication: [String]) -> Int? {
        guard clusterInfo.allSatisfy({ $0.contains("cluster_state:ok") }) else { return nil }
        let replicas = replication.filter { $0.contains("role:slave") }
        guard replicas.count == replication.count / 2,
              replicas.allSatisfy({ $0.contains("master_link_status:up") }) else { return nil }
        return replicas.count
    }

    /// "name:value" lines of an INFO reply, for an error message.
    private static func fields(_ names: [String], in info: String) -> String {
        info.split(whereSeparator: \.isNewline)
            .filter { line in names.contains { line.hasPrefix("\($0):") } }
            .joined(separator: " ")
    }
}
