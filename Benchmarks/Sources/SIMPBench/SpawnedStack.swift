import Foundation
import SIMPClient

/// What `simp-bench --spawn` starts: how many nodes, on which Redis.
public struct SpawnOptions: Sendable {
    public var serverBinary: String
    /// Added to every simp-server's command line (limits, log level).
    public var serverArguments: [String]
    public var nodes = 1
    public var redisCluster = false
    public var minReplicas = 0

    public init(serverBinary: String, serverArguments: [String]) {
        self.serverBinary = serverBinary
        self.serverArguments = serverArguments
    }
}

/// A private Redis (one redis-server or a Redis Cluster) and N simp-servers node-1...node-N on
/// free ports, for `simp-bench --spawn`. All of them stop with `stop()`.
public final class SpawnedStack: @unchecked Sendable {
    public let topology: Topology
    public let serverAddresses: [ServerAddress]
    public let serverPIDs: [Int32]
    /// Each node's metrics endpoint (HOST:PORT), for the nodes started with `--metrics-port`.
    public let metricsAddresses: [String]
    public let redisPIDs: [Int32]
    private let servers: [Process]
    private let redis: [Process]
    private let directory: URL

    public static func start(_ options: SpawnOptions) async throws -> SpawnedStack {
        let directory = try Spawn.directory()
        let redis: SpawnedRedis
        do {
            redis = try await options.redisCluster ? SpawnedCluster.start(in: directory) : SpawnedRedis.single(in: directory)
        } catch {
            Spawn.removeDirectory(directory)
            throw error
        }
        var servers: [(process: Process, port: Int, metrics: String?)] = []
        do {
            for node in 1...options.nodes {
                servers.append(try await startServer(node: node, options, redis: redis))
            }
        } catch {
            await Spawn.terminate(servers.map(\.process) + redis.processes)
            Spawn.removeDirectory(directory)
            throw error
        }
        return SpawnedStack(servers: servers, redis: redis, minReplicas: options.minReplicas, directory: directory)
    }

    private static func startServer(node: Int, _ options: SpawnOptions,
                                    redis: SpawnedRedis) async throws -> (process: Process, port: Int, metrics: String?) {
        let server = try Spawn.launch(options.serverBinary, [
            "--port", "0", "--udp-port", "0", "--node-id", "node-\(node)",
        ] + redis.serverArguments + options.serverArguments
            + (options.minReplicas > 0 ? ["--redis-min-replicas", "\(options.minReplicas)"] : []), stdout: Pipe())
        do {
            let ready = try Spawn.ready(server)
            return (server, ready.port, ready.metrics)
        } catch {
            await Spawn.terminate([server])
            throw error
        }
    }

    private init(servers: [(process: Process, port: Int, metrics: String?)], redis: SpawnedRedis, minReplicas: Int, directory: URL) {
        self.servers = servers.map(\.process)
        self.redis = redis.processes
        self.directory = directory
        serverAddresses = servers.map { ServerAddress(host: "127.0.0.1", port: $0.port) }
        serverPIDs = self.servers.map(\.processIdentifier)
        metricsAddresses = servers.compactMap(\.metrics)
        redisPIDs = self.redis.map(\.processIdentifier)
        topology = Topology(nodes: servers.count, redis: redis.cluster ? "cluster" : "single",
                            redisMasters: redis.masters, redisReplicas: redis.replicas, minReplicas: minReplicas)
    }

    /// The servers first, so none of them sees its Redis go away.
    public func stop() async {
        await Spawn.terminate(servers)
        await Spawn.terminate(redis)
        Spawn.removeDirectory(directory)
    }
}
