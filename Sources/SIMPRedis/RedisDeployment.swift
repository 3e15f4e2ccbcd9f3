import Logging
import NIOCore

/// Where a process finds Redis: one instance, the seed nodes of a Redis Cluster, or one
/// address whose kind is asked at start (`resolved()`).
public enum RedisDeployment: Sendable, Equatable, CustomStringConvertible {
    case single(RedisConfiguration)
    case cluster(seeds: [RedisConfiguration])
    /// One address given without saying whether it is a cluster node.
    case detect(RedisConfiguration)

    /// From the `--redis` text: `redis://h1:p1` or several nodes (`redis://h1:p1,h2:p2` or
    /// `redis://h1:p1,redis://h2:p2`). `cluster` nil: several nodes mean a cluster, one is
    /// asked at start.
    public init(urls: String, cluster: Bool?) throws(RedisError) {
        let parts = RedisConfiguration.listed(urls)
        guard let first = parts.first else { throw RedisError(.protocolViolation, "no Redis URL given") }
        if cluster == true || (cluster == nil && parts.count > 1) {
            self = .cluster(seeds: try RedisConfiguration.clusterSeeds(urls))
            return
        }
        guard parts.count == 1 else {
            throw RedisError(.protocolViolation, "several Redis nodes given (\(parts.count)) but cluster mode is off; a single Redis has one address")
        }
        let configuration = try RedisConfiguration(url: first)
        self = cluster == false ? .single(configuration) : .detect(configuration)
    }

    /// The same deployment logging in to every node with `password` (read from a file or the
    /// environment), as the URL's user if it names one. A URL with a password of its own is
    /// refused: of two passwords one would be silently unused.
    public func withPassword(_ password: String) throws(RedisError) -> RedisDeployment {
        switch self {
        case .single(let configuration): .single(try configuration.withPassword(password))
        case .detect(let configuration): .detect(try configuration.withPassword(password))
        case .cluster(let seeds): .cluster(seeds: try seeds.map { seed throws(RedisError) in try seed.withPassword(password) })
        }
    }

    /// The nodes to try, in order: the instance, or the seeds.
    public var nodes: [RedisConfiguration] {
        switch self {
        case .single(let configuration), .detect(let configuration): [configuration]
        case .cluster(let seeds): seeds
        }
    }

    public var isCluster: Bool {
        if case .cluster = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .single(let configuration), .detect(let configuration): configuration.url
        case .cluster(let seeds): "Redis Cluster seeds " + seeds.map { "\($0.host):\($0.port)" }.joined(separator: ",")
        }
    }

    /// `.detect` becomes `.single` or `.cluster` by asking the node (`INFO cluster`); the
    /// others are returned as they are. Fails while the node does not answer.
    public func resolved() async throws(RedisError) -> RedisDeployment {
        guard case .detect(let configuration) = self else { return self }
        // Database 0: a cluster node refuses SELECT, and INFO is the same in every database.
        var asked = configuration
        asked.database = 0
        let probe = RedisPool(configuration: asked)
        defer { Task { await probe.shutdown() } }
        let info = try await probe.run(RedisCommand("INFO", ["cluster"]))
        guard let text = info.string else { throw RedisError(.protocolViolation, "INFO cluster returned \(info)") }
        if text.contains("cluster_enabled:1") {
            guard configuration.database == 0 else {
                throw RedisError(.protocolViolation, "\(configuration.url) is a Redis Cluster node, and a cluster has only database 0")
            }
            return .cluster(seeds: [configuration])
        }
        return .single(configuration)
    }

    /// The client for this deployment; `.detect` must be resolved first.
    public func makeClient(logger: Logger = Logger(label: "simp.redis"), observeRoundTrip: RedisPool.RoundTripObserver? = nil) -> any RedisClient {
        switch self {
        case .single(let configuration), .detect(let configuration):
            RedisPool(configuration: configuration, logger: logger, observeRoundTrip: observeRoundTrip)
        case .cluster(let seeds):
            RedisClusterPool(seeds: seeds, logger: logger, observeRoundTrip: observeRoundTrip)
        }
    }
}
