import Foundation

/// Where the run happens: one node on one Redis, or three nodes on a Redis Cluster (3 masters,
/// 3 replicas), with or without `--redis-min-replicas 1`.
public enum Topology: String, CaseIterable, Codable, Sendable {
    case single
    case cluster

    public var nodes: Int { self == .single ? 1 : 3 }
    /// Redis shards (a master and, in a cluster, its replica).
    public var shards: Int { self == .single ? 1 : 3 }
}

public enum FaultKind: String, CaseIterable, Codable, Sendable {
    /// kill -9 of a simp-server, started again on the same ports when healed.
    case nodeKill = "node-kill"
    /// SIGSTOP of a simp-server, SIGCONT when healed.
    case nodePause = "node-pause"
    /// kill -9 of the Redis (single) or of a shard's current master (cluster), started again
    /// when healed (a cluster's comes back as a replica of the one that took over).
    case redisKill = "redis-kill"
    /// kill -9 of a cluster shard's master, left down until the end of the run: its replica
    /// takes over, and the shard has no replica meanwhile.
    case redisKillNoRestart = "redis-kill-no-restart"
    /// kill -9 of a cluster shard's replica, started again when healed.
    case replicaLoss = "replica-loss"
    /// kill -9 of a client that has a data directory, started again on it when healed.
    case clientKill = "client-kill"
    /// kill -9 of the single Redis, its AOF cut back to where it was some seconds before, and
    /// started again: Redis loses acknowledged writes (the `appendfsync everysec` trade-off).
    case aofCut = "aof-cut"
    /// 10-30% of the datagrams of some clients dropped, both ways, for the whole run (a relay
    /// between them and their node: the test suite's UDPFaultProxy).
    case datagramLoss = "datagram-loss"
    /// Every datagram of one client dropped, both ways, for some seconds, then let through again
    /// (its relay, as for datagram loss, blocked and opened): its session moves to the stream
    /// (datagrams inside the control connection) and back to UDP when a probe gets through.
    case udpBlocked = "udp-blocked"

    /// Injected at a time and healed later; datagram loss lasts the whole run.
    public var timed: Bool { self != .datagramLoss }

    public func applies(to topology: Topology) -> Bool {
        switch self {
        case .nodeKill, .nodePause, .redisKill, .clientKill, .datagramLoss, .udpBlocked: true
        case .redisKillNoRestart, .replicaLoss: topology == .cluster
        case .aofCut: topology == .single
        }
    }
}

/// One fault: injected `at` seconds into the run, healed at `heal` (nil: when the run's faults
/// end). `target` is a node, a client or a shard index, after `kind`.
public struct Fault: Equatable, Codable, Sendable, CustomStringConvertible {
    public var at: Double
    public var kind: FaultKind
    public var target: Int
    public var heal: Double?

    public init(at: Double, kind: FaultKind, target: Int, heal: Double?) {
        self.at = at
        self.kind = kind
        self.target = target
        self.heal = heal
    }

    public var description: String {
        let what: String
        switch kind {
        case .nodeKill: what = "kill -9 node-\(target + 1)"
        case .nodePause: what = "SIGSTOP node-\(target + 1)"
        case .redisKill: what = "kill -9 Redis master of shard \(target)"
        case .redisKillNoRestart: what = "kill -9 Redis master of shard \(target), no restart"
        case .replicaLoss: what = "kill -9 Redis replica of shard \(target)"
        case .clientKill: what = "kill -9 client \(target)"
        case .aofCut: what = "kill -9 Redis, cut its AOF tail"
        case .datagramLoss: what = "datagram loss for client \(target)"
        case .udpBlocked: what = "UDP blocked both ways for client \(target)"
        }
        return String(format: "t=%6.2fs %@, healed %@", at, what, heal.map { String(format: "at t=%.2fs", $0) } ?? "at the end")
    }
}

/// What the seed decides, besides the faults: the users, which of them keep a data directory,
/// and who sends to whom when.
public struct ChaosPlan: Equatable, Codable, Sendable {
    public var seed: UInt64
    public var duration: Double
    public var topology: Topology
    public var minReplicas: Int
    public var users: [String]
    /// Indexes into `users`: the clients run with `--data-dir` (the only ones a fault kills).
    public var dataDirClients: [Int]
    public var faults: [Fault]
    /// Clients whose datagrams are dropped at a rate, both ways, for the whole run.
    public var datagramLoss: [DatagramLoss]
    public var sends: [Send]

    public struct DatagramLoss: Equatable, Codable, Sendable, CustomStringConvertible {
        public var client: Int
        public var rate: Double

        public var description: String { "client \(client) loses \(Int((rate * 100).rounded()))% of its datagrams both ways, the whole run" }
    }

    public struct Send: Equatable, Codable, Sendable {
        public var at: Double
        public var from: Int
        public var to: Int
    }

    /// When the last fault is healed: the checker's 60 s start from here.
    public var lastHeal: Double { faults.map { $0.heal ?? duration }.max() ?? 0 }

    /// The clients some `udp-blocked` fault targets, in order: each goes through a relay the
    /// whole run, so that the fault can block and open it.
    public var udpBlockedClients: [Int] { Set(faults.filter { $0.kind == .udpBlocked }.map(\.target)).sorted() }

    /// The clients whose datagrams go through a relay: the lossy ones and the ones UDP is
    /// blocked for at times.
    public var relayedClients: [Int] { Set(datagramLoss.map(\.client) + udpBlockedClients).sorted() }
}

/// Generates a plan from a seed. Pure: the same parameters give the same plan, so `--seed S`
/// repeats a run's schedule.
public struct ChaosPlanner: Sendable {
    public var seed: UInt64
    public var duration: Double
    public var topology: Topology
    /// Cluster only: 0 or 1; nil lets the seed choose.
    public var minReplicas: Int?
    public var users = 8
    /// Messages per second over all users.
    public var rate = 10.0
    /// The kinds the seed picks from (those that apply to the topology).
    public var kinds = FaultKind.allCases
    /// No fault in the first seconds: every client logs in first.
    public var warmup = 3.0

    public init(seed: UInt64, duration: Double, topology: Topology, minReplicas: Int? = nil) {
        self.seed = seed
        self.duration = duration
        self.topology = topology
        self.minReplicas = minReplicas
    }

    public func plan() -> ChaosPlan {
        var rng = SplitMix64(seed: seed)
        let users = (0..<users).map { "u\($0)" }
        // About half keep a data directory; at least one does, so a client can be killed.
        var dataDir = users.indices.filter { _ in rng.next() % 2 == 0 }
        if dataDir.isEmpty { dataDir = [Int(rng.next() % UInt64(users.count))] }
        let replicas = topology == .cluster ? (minReplicas ?? Int(rng.next() % 2)) : 0
        let faults = self.faults(&rng, users: users.count, dataDirClients: dataDir)
        var sends: [ChaosPlan.Send] = []
        var t = 0.5
        while t < duration {
            let from = Int(rng.next() % UInt64(users.count))
            var to = Int(rng.next() % UInt64(users.count - 1))
            if to >= from { to += 1 }
            sends.append(.init(at: t, from: from, to: to))
            // Exponential gaps: bursts and lulls around the mean rate.
            t += -log(max(rng.nextDouble(), 1e-9)) / rate
        }
        // Drawn last, so that the rest of a seed's plan is the same with or without this kind.
        var lossy: [ChaosPlan.DatagramLoss] = []
        if kinds.contains(.datagramLoss) {
            // About a quarter of the clients, at least one.
            for client in users.indices where rng.next() % 4 == 0 {
                lossy.append(.init(client: client, rate: 0.1 + 0.2 * rng.nextDouble()))
            }
            if lossy.isEmpty { lossy.append(.init(client: Int(rng.next() % UInt64(users.count)), rate: 0.1 + 0.2 * rng.nextDouble())) }
        }
        return ChaosPlan(seed: seed, duration: duration, topology: topology, minReplicas: replicas, users: users,
                         dataDirClients: dataDir, faults: faults, datagramLoss: lossy, sends: sends)
    }

    /// One fault after another, each healed before the next starts (a short gap between), so a
    /// violation can be put down to one fault; a cluster shard killed for good stays out of
    /// later Redis faults, so no shard ever loses both its nodes.
    private func faults(_ rng: inout SplitMix64, users: Int, dataDirClients: [Int]) -> [Fault] {
        let kinds = kinds.filter { $0.applies(to: topology) && $0.timed }
        guard !kinds.isEmpty else { return [] }
        var degraded = Set<Int>()
        var faults: [Fault] = []
        var t = warmup
        while true {
            let kind = kinds[Int(rng.next() % UInt64(kinds.count))]
            let (low, high) = Self.downtime(kind)
            let down = low + rng.nextDouble() * (high - low)
            guard t + down <= duration else { break }
            let target: Int
            switch kind {
            case .nodeKill, .nodePause:
                target = Int(rng.next() % UInt64(topology.nodes))
            case .clientKill:
                target = dataDirClients[Int(rng.next() % UInt64(dataDirClients.count))]
            case .udpBlocked:
                target = Int(rng.next() % UInt64(users))
            case .datagramLoss:
                preconditionFailure("datagram loss is not a timed fault")
            case .redisKill, .redisKillNoRestart, .replicaLoss, .aofCut:
                let healthy = (0..<topology.shards).filter { !degraded.contains($0) }
                guard !healthy.isEmpty else {
                    t += 1
                    continue
                }
                target = healthy[Int(rng.next() % UInt64(healthy.count))]
            }
            if kind == .redisKillNoRestart {
                degraded.insert(target)
                faults.append(Fault(at: t, kind: kind, target: target, heal: nil))
            } else {
                faults.append(Fault(at: t, kind: kind, target: target, heal: t + down))
            }
            t += down + 1 + rng.nextDouble() * 3
        }
        return faults
    }

    /// Seconds a fault of this kind lasts: long enough to matter (past a heartbeat, a cluster
    /// failover, a reconnect backoff), short enough for several in a short run.
    static func downtime(_ kind: FaultKind) -> (Double, Double) {
        switch kind {
        case .nodeKill: (1, 5)
        case .nodePause: (2, 8)
        case .redisKill: (1, 5)
        case .redisKillNoRestart: (3, 6)
        case .replicaLoss: (3, 10)
        case .clientKill: (0.5, 4)
        case .aofCut: (1, 3)
        case .datagramLoss: (0, 0)
        // Past the second of UDP silence either end waits for before the move, and mostly past
        // the client's first probes (2 and 6 s after it), so that it probes a blocked path and
        // backs off before the block ends.
        case .udpBlocked: (3, 15)
        }
    }
}

/// A small seeded generator (SplitMix64): the plan depends on the seed and nothing else.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func nextDouble() -> Double {
        Double(next() >> 11) / Double(1 << 53)
    }
}
