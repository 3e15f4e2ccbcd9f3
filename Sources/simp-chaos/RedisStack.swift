import Foundation
import SIMPChaos
import SIMPTestSupport

/// The Redis of a run: one redis-server (AOF, appendfsync always) or a Redis Cluster of 3
/// masters and 3 replicas, through the test suite's process wrappers. A cluster's shard is
/// found by a slot it serves, so a fault hits whichever node is that shard's master (or
/// replica) at the time, after earlier failovers swapped them.
final class RedisStack: @unchecked Sendable {
    private let single: RedisServerProcess?
    private let cluster: RedisClusterProcess?
    /// Which port each cluster fault killed, to start it again when the fault heals.
    private var killed: [Double: Int] = [:]

    private init(single: RedisServerProcess?, cluster: RedisClusterProcess?) {
        self.single = single
        self.cluster = cluster
    }

    static func start(_ topology: Topology) throws -> RedisStack {
        switch topology {
        case .single: RedisStack(single: try RedisServerProcess(), cluster: nil)
        case .cluster: RedisStack(single: nil, cluster: try RedisClusterProcess())
        }
    }

    var serverArguments: [String] {
        if let single { return ["--redis", single.url] }
        return ["--redis", cluster!.ports.map { "redis://127.0.0.1:\($0)" }.joined(separator: ","), "--redis-cluster"]
    }

    var summary: String {
        if let single { return "redis-server on \(single.port), appendfsync always" }
        return "Redis Cluster, 3 masters + 3 replicas on \(cluster!.ports.map(String.init).joined(separator: ","))"
    }

    /// A slot of each shard (the three ranges `redis-cli --cluster create` makes).
    private static let shardSlots = [0, 5461, 10923]

    /// Kills what the fault names; says which process it was.
    @discardableResult
    func kill(_ fault: Fault) throws -> String {
        if let single {
            single.kill9()
            return "redis-server on \(single.port) killed"
        }
        let cluster = cluster!
        guard let master = cluster.masterPort(forSlot: Self.shardSlots[fault.target]) else {
            throw ChaosError("no master serves shard \(fault.target)")
        }
        let port: Int
        if fault.kind == .replicaLoss {
            guard let replica = replicaPort(of: master) else { throw ChaosError("shard \(fault.target) has no replica to lose") }
            port = replica
        } else {
            port = master
        }
        cluster.kill9(port: port)
        killed[fault.at] = port
        return "\(fault.kind == .replicaLoss ? "replica" : "master") on \(port) killed"
    }

    func heal(_ fault: Fault) throws -> String {
        if let single {
            try single.start()
            return "redis-server on \(single.port) started again"
        }
        guard let port = killed.removeValue(forKey: fault.at) else { return "nothing to heal" }
        try cluster!.restart(port: port)
        // It rejoins as a replica; the cluster is whole once it has synced.
        try? cluster!.waitUntilHealthy(timeout: 20)
        return "node on \(port) started again"
    }

    func aofSize() throws -> Int {
        guard let single else { throw ChaosError("an AOF cut needs the single Redis") }
        return try single.writeLogSize()
    }

    /// Cuts the stopped Redis' AOF back to `size` bytes (it starts when the fault heals);
    /// returns the bytes cut.
    func cutAOF(to size: Int) throws -> Int {
        guard let single else { throw ChaosError("an AOF cut needs the single Redis") }
        let before = try single.writeLogSize()
        try single.dropWrites(after: size)
        return before - size
    }

    /// The running replica of the master on `port`, from CLUSTER NODES.
    private func replicaPort(of master: Int) -> Int? {
        let lines = cluster!.clusterNodes(port: master).map { $0.split(separator: " ").map(String.init) }
        guard let masterID = lines.first(where: { $0.count > 2 && $0[2].contains("myself") })?[0] else { return nil }
        for fields in lines where fields.count > 3 && fields[3] == masterID && fields[2].contains("slave") && !fields[2].contains("fail") {
            if let port = fields[1].split(separator: "@").first?.split(separator: ":").last.flatMap({ Int($0) }),
               cluster!.runningPorts.contains(port) {
                return port
            }
        }
        return nil
    }

    func stop() {
        single?.stop()
        cluster?.stopAll()
    }
}
