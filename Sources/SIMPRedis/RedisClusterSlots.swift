/// The pure parts of Redis Cluster: hash slots, the slot map, redirects. No I/O.
public enum RedisCluster {
    /// Redis Cluster splits the key space into this many slots.
    public static let slotCount = 16384

    /// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster
    /// hashes keys with.
    public static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ crc16Table[Int((crc >> 8) ^ UInt16(byte))]
        }
        return crc
    }

    private static let crc16Table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }

    /// The slot of a key. A hash tag (the text between the first `{` and the next `}`, when
    /// not empty) is hashed instead of the whole key, so `{bob}:inbox` and `{bob}:seq` share
    /// a slot and one script may touch both.
    public static func hashSlot(_ key: some Collection<UInt8>) -> Int {
        Int(crc16(hashTag(key)) & 0x3FFF)
    }

    public static func hashSlot(_ key: String) -> Int { hashSlot(Array(key.utf8)) }

    /// The part of the key that is hashed: the tag when there is a non-empty one, else the key.
    static func hashTag<C: Collection<UInt8>>(_ key: C) -> C.SubSequence {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key[...] }
        let afterOpen = key.index(after: open)
        guard let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen else { return key[...] }
        return key[afterOpen..<close]
    }
}

/// Where a node listens.
public struct RedisNodeAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` (the last colon splits, so IPv6 hosts work); a `@cport` suffix of
    /// CLUSTER NODES' form is dropped.
    public init?(_ text: some StringProtocol) {
        let withoutBusPort = Substring(text).prefix(while: { $0 != "@" })
        guard let colon = withoutBusPort.lastIndex(of: ":"),
              let port = Int(withoutBusPort[withoutBusPort.index(after: colon)...]), (1...65535).contains(port) else { return nil }
        let host = String(withoutBusPort[..<colon])
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port)
    }

    public var description: String { "\(host):\(port)" }
}

/// One shard: a master and its replicas.
public struct RedisShard: Sendable, Equatable {
    public var master: RedisNodeAddress
    public var replicas: [RedisNodeAddress]

    public init(master: RedisNodeAddress, replicas: [RedisNodeAddress] = []) {
        self.master = master
        self.replicas = replicas
    }
}

/// Which master serves each slot.
public struct RedisSlotMap: Sendable, Equatable {
    public private(set) var shards: [RedisShard] = []
    /// The index into `shards` of each slot's shard, -1 when no master serves it.
    private var owner: [Int16] = Array(repeating: -1, count: RedisCluster.slotCount)

    public init() {}

    /// True when no slot has a master: nothing was read yet.
    public var isEmpty: Bool { shards.isEmpty }

    public func shard(forSlot slot: Int) -> RedisShard? {
        let index = owner[slot]
        return index < 0 ? nil : shards[Int(index)]
    }

    public func master(forSlot slot: Int) -> RedisNodeAddress? { shard(forSlot: slot)?.master }

    /// Every node the map knows, masters first.
    public var nodes: [RedisNodeAddress] {
        var seen = Set<RedisNodeAddress>()
        return (shards.map(\.master) + shards.flatMap(\.replicas)).filter { seen.insert($0).inserted }
    }

    /// Gives `slots` to the shard whose master is `shard.master` (added when new).
    public mutating func assign(_ slots: ClosedRange<Int>, to shard: RedisShard) {
        let index: Int
        if let known = shards.firstIndex(where: { $0.master == shard.master }) {
            index = known
            if shards[known].replicas.isEmpty { shards[known].replicas = shard.replicas }
        } else {
            index = shards.count
            shards.append(shard)
        }
        let clamped = max(0, slots.lowerBound)...min(RedisCluster.slotCount - 1, slots.upperBound)
        for slot in clamped { owner[slot] = Int16(index) }
    }

    /// What a MOVED redirect says: the slot now lives on `master`. (The master's replicas are
    /// unknown until the next full read of the map.)
    public mutating func move(slot: Int, to master: RedisNodeAddress) {
        assign(slot...slot, to: RedisShard(master: master))
    }

    /// Reads `CLUSTER SLOTS`' answer: [[start, end, [host, port, id, ...], replica...], ...].
    /// An empty host means "the node you asked", hence `asked`.
    public init(clusterSlots reply: RedisValue, asked: RedisNodeAddress) throws(RedisError) {
        guard let ranges = reply.array else { throw RedisError(.protocolViolation, "CLUSTER SLOTS answered \(reply)") }
        for range in ranges {
            guard let parts = range.array, parts.count >= 3, let start = parts[0].int, let end = parts[1].int, start <= end else {
                throw RedisError(.protocolViolation, "unreadable CLUSTER SLOTS range \(range)")
            }
            var nodes: [RedisNodeAddress] = []
            for node in parts[2...] {
                guard let fields = node.array, fields.count >= 2, let port = fields[1].int else {
                    throw RedisError(.protocolViolation, "unreadable CLUSTER SLOTS node \(node)")
                }
                nodes.append(RedisNodeAddress(host: Self.host(fields[0].string, asked), port: Int(port)))
            }
            assign(Int(start)...Int(end), to: RedisShard(master: nodes[0], replicas: Array(nodes.dropFirst())))
        }
    }

    /// Reads `CLUSTER SHARDS`' answer (Redis 7): per shard a flat map with "slots" (start and
    /// end pairs) and "nodes" (each a flat map with ip/endpoint, port, role, health).
    public init(clusterShards reply: RedisValue, asked: RedisNodeAddress) throws(RedisError) {
        guard let entries = reply.array else { throw RedisError(.protocolViolation, "CLUSTER SHARDS answered \(reply)") }
        for entry in entries {
            let fields = Self.fields(entry)
            guard let slots = fields["slots"]?.array, let nodes = fields["nodes"]?.array, slots.count % 2 == 0 else {
                throw RedisError(.protocolViolation, "unreadable CLUSTER SHARDS entry \(entry)")
            }
            var master: RedisNodeAddress?
            var replicas: [RedisNodeAddress] = []
            for node in nodes {
                let info = Self.fields(node)
                guard let port = info["port"]?.int else { continue }
                let address = RedisNodeAddress(host: Self.host(info["endpoint"]?.string ?? info["ip"]?.string, asked), port: Int(port))
                if info["role"]?.string == "master" { master = address } else if info["health"]?.string != "failed" { replicas.append(address) }
            }
            guard let master else { continue }
            for pair in stride(from: 0, to: slots.count, by: 2) {
                guard let start = slots[pair].int, let end = slots[pair + 1].int, start <= end else {
                    throw RedisError(.protocolViolation, "unreadable CLUSTER SHARDS slots \(slots)")
                }
                assign(Int(start)...Int(end), to: RedisShard(master: master, replicas: replicas))
            }
        }
    }

    private static func host(_ reported: String?, _ asked: RedisNodeAddress) -> String {
        guard let reported, !reported.isEmpty, reported != "?" else { return asked.host }
        return reported
    }

    /// A RESP2 flat map [name, value, name, value, ...] as a dictionary.
    private static func fields(_ value: RedisValue) -> [String: RedisValue] {
        guard let items = value.array else { return [:] }
        var fields: [String: RedisValue] = [:]
        for pair in stride(from: 0, to: items.count - 1, by: 2) {
            if let name = items[pair].string { fields[name] = items[pair + 1] }
        }
        return fields
    }
}

/// A cluster's answer that a key lives elsewhere.
public enum RedisRedirect: Sendable, Equatable {
    /// The slot moved for good: update the map, send again to `node`.
    case moved(slot: Int, node: RedisNodeAddress)
    /// The slot is being migrated: send this one command to `node` after ASKING; the map stays.
    case ask(slot: Int, node: RedisNodeAddress)

    /// Reads `MOVED 3999 127.0.0.1:6381` or `ASK 3999 127.0.0.1:6381`; nil for any other reply.
    public init?(errorMessage: String) {
        let parts = errorMessage.split(separator: " ")
        guard parts.count == 3, let slot = Int(parts[1]), (0..<RedisCluster.slotCount).contains(slot),
              let node = RedisNodeAddress(parts[2]) else { return nil }
        switch parts[0] {
        case "MOVED": self = .moved(slot: slot, node: node)
        case "ASK": self = .ask(slot: slot, node: node)
        default: return nil
        }
    }

    public init?(_ reply: RedisValue) {
        guard case .error(let message) = reply else { return nil }
        self.init(errorMessage: message)
    }

    public var node: RedisNodeAddress {
        switch self {
        case .moved(_, let node), .ask(_, let node): return node
        }
    }
}
