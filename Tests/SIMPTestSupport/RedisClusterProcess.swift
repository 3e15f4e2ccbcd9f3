import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real Redis Cluster: 6 `redis-server` processes on free loopback ports (3 masters, each
/// with one replica, made by `redis-cli --cluster create`), AOF on, data in a temporary
/// directory. A short node timeout (1 s) makes a replica take over soon after its master dies.
/// Every process is killed when the value goes away. With a `password`, every node requires
/// it (`requirepass`) and its replicas sync with it (`masterauth`).
public final class RedisClusterProcess: @unchecked Sendable {
    public let ports: [Int]
    public let directory: URL
    /// What AUTH takes for every node; empty: no AUTH.
    public let auth: [String]
    private var processes: [Int: ChildProcess] = [:]
    private var busPorts: [Int: Int] = [:]

    public init(nodes: Int = 6, replicas: Int = 1, password: String? = nil) throws {
        auth = password.map { [$0] } ?? []
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var taken = Set<Int>()
        var ports: [Int] = []
        var busPorts: [Int] = []
        // Distinct ports for clients and for the cluster bus (`cluster-port`, Redis 7).
        while ports.count < nodes || busPorts.count < nodes {
            let port = try freeTCPPort()
            guard taken.insert(port).inserted else { continue }
            if ports.count < nodes { ports.append(port) } else { busPorts.append(port) }
        }
        self.ports = ports
        do {
            for (port, bus) in zip(ports, busPorts) { try start(port: port, busPort: bus) }
            try create(replicas: replicas)
            try waitUntilHealthy(timeout: 30)
        } catch {
            stopAll()
            throw error
        }
    }

    /// `127.0.0.1:PORT` of every node, for seeding a client.
    public var addresses: [String] { ports.map { "127.0.0.1:\($0)" } }

    private func start(port: Int, busPort: Int) throws {
        busPorts[port] = busPort
        let folder = directory.appendingPathComponent("\(port)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let redis = try findExecutable("redis-server").path
        let login = auth.first.map { ["--requirepass", $0, "--masterauth", $0] } ?? []
        processes[port] = try ChildProcess(redis, [
            "--port", "\(port)", "--cluster-port", "\(busPort)", "--bind", "127.0.0.1",
            "--cluster-enabled", "yes", "--cluster-config-file", folder.appendingPathComponent("nodes-\(port).conf").path,
            "--cluster-node-timeout", "1000", "--appendonly", "yes", "--save", "", "--dir", folder.path,
            "--daemonize", "no",
        ] + login)
        try waitUntilListening(port: port, timeout: 10)
        try waitUntilPong(port: port, timeout: 10, auth: auth)
    }

    private func create(replicas: Int) throws {
        let cli = try findExecutable("redis-cli").path
        let login = auth.first.map { ["-a", $0, "--no-auth-warning"] } ?? []
        let create = try ChildProcess(cli, login + ["--cluster", "create"] + addresses + ["--cluster-replicas", "\(replicas)", "--cluster-yes"])
        guard let status = create.waitForExit(timeout: 60) else { throw TestSupportError("redis-cli --cluster create hung") }
        guard status == 0 else { throw TestSupportError("redis-cli --cluster create failed (\(status)): \(create.stdout) \(create.stderr)") }
    }

    /// Every running node says `cluster_state:ok` and every slot has a running master.
    public func waitUntilHealthy(timeout: TimeInterval) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if isHealthy() { return }
            usleep(100_000)
        }
        throw TestSupportError("Redis Cluster not healthy after \(timeout)s: \(runningPorts.map { "\($0): \(clusterNodes(port: $0))" })")
    }

    private func isHealthy() -> Bool {
        let running = runningPorts
        guard running.allSatisfy({ redisReply(port: $0, ["CLUSTER", "INFO"], auth: auth).contains("cluster_state:ok") }) else { return false }
        let mastersKnown = running.allSatisfy { port in
            [0, 5461, 10923, 16383].allSatisfy { slot in masterPort(forSlot: slot, askingPort: port).map(running.contains) ?? false }
        }
        // Replicas that have their master's data (else none could take over).
        let replicasSynced = running.allSatisfy { port in
            let replication = redisReply(port: port, ["INFO", "replication"], auth: auth)
            return replication.contains("role:master") || replication.contains("master_link_status:up")
        }
        return mastersKnown && replicasSynced
    }

    public var runningPorts: [Int] { ports.filter { processes[$0] != nil } }

    /// The port of the master that serves `slot`, as a running node sees it.
    public func masterPort(forSlot slot: Int) -> Int? {
        for port in runningPorts {
            if let master = masterPort(forSlot: slot, askingPort: port) { return master }
        }
        return nil
    }

    private func masterPort(forSlot slot: Int, askingPort: Int) -> Int? {
        for line in clusterNodes(port: askingPort) {
            let fields = line.split(separator: " ")
            guard fields.count >= 8, fields[2].contains("master"), !fields[2].contains("fail") else { continue }
            let owns = fields.dropFirst(8).contains { range in
                let bounds = range.split(separator: "-").compactMap { Int($0) }
                guard let low = bounds.first else { return false }
                return (low...(bounds.last ?? low)).contains(slot)
            }
            if owns, let address = fields[1].split(separator: "@").first, let port = address.split(separator: ":").last {
                return Int(port)
            }
        }
        return nil
    }

    /// CLUSTER NODES' lines as a node sees them.
    public func clusterNodes(port: Int) -> [String] {
        // The first line is the bulk header `$N` (and "\r\n" is one Character: split on newlines).
        redisReply(port: port, ["CLUSTER", "NODES"], auth: auth).split(whereSeparator: \.isNewline).dropFirst().map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// SIGKILL one node: its replica takes over after the node timeout.
    public func kill9(port: Int) {
        guard let process = processes.removeValue(forKey: port) else { return }
        process.signal(SIGKILL)
        _ = process.waitForExit(timeout: 5)
    }

    /// Starts a killed node again with its data and cluster config: it rejoins, as a replica
    /// of whichever node took over its slots.
    public func restart(port: Int) throws {
        guard processes[port] == nil, let bus = busPorts[port] else { return }
        try start(port: port, busPort: bus)
    }

    /// One command over a fresh connection to `port` (RESP as received).
    public func command(port: Int, _ arguments: [String]) throws -> String {
        let reply = redisReply(port: port, arguments, auth: auth)
        guard !reply.isEmpty else { throw TestSupportError("no answer from Redis on \(port) to \(arguments)") }
        return reply
    }

    public func stopAll() {
        for port in Array(processes.keys) { kill9(port: port) }
    }

    deinit {
        stopAll()
        try? FileManager.default.removeItem(at: directory)
    }
}
