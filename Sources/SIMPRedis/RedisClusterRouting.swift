/// Where a command must run in a cluster.
public enum RedisRoute: Sendable, Equatable {
    /// On the master of this slot (the slot of the command's first key).
    case slot(Int)
    /// Anywhere: the command has no key (PING, INFO, PUBLISH, which the cluster itself
    /// carries to every node, ...).
    case anyNode
}

extension RedisCommand {
    /// The key the command is routed by: its first key. Commands whose keys are not all in one
    /// slot are refused by Redis itself (CROSSSLOT); the client does not split them.
    public var routingKey: [UInt8]? {
        if script != nil {
            // EVALSHA is added by the connection: arguments are numkeys, keys..., args...
            return Self.keyAfterCount(arguments, countAt: 0)
        }
        guard let first = arguments.first else { return nil }
        let name = String(decoding: first, as: UTF8.self).uppercased()
        if Self.keyless.contains(name) { return nil }
        switch name {
        case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
            return Self.keyAfterCount(arguments, countAt: 2)
        case "ZUNION", "ZINTER", "ZDIFF", "SINTERCARD", "ZINTERCARD", "LMPOP", "ZMPOP":
            return Self.keyAfterCount(arguments, countAt: 1)
        case "BLMPOP", "BZMPOP":
            return Self.keyAfterCount(arguments, countAt: 2)
        case "BITOP", "OBJECT", "XGROUP", "XINFO":
            return arguments.count > 2 ? arguments[2] : nil
        case "MEMORY":
            return arguments.count > 2 && String(decoding: arguments[1], as: UTF8.self).uppercased() == "USAGE" ? arguments[2] : nil
        case "XREAD", "XREADGROUP":
            guard let streams = arguments.firstIndex(where: { String(decoding: $0, as: UTF8.self).uppercased() == "STREAMS" }),
                  streams + 1 < arguments.count else { return nil }
            return arguments[streams + 1]
        default:
            return arguments.count > 1 ? arguments[1] : nil
        }
    }

    public var route: RedisRoute {
        routingKey.map { .slot(RedisCluster.hashSlot($0)) } ?? .anyNode
    }

    /// Commands that name no key. (SPUBLISH is sharded: its channel routes like a key.)
    static let keyless: Set<String> = [
        "PING", "ECHO", "INFO", "PUBLISH", "SCRIPT", "CLUSTER", "TIME", "DBSIZE", "FLUSHALL", "FLUSHDB",
        "SELECT", "WAIT", "CLIENT", "CONFIG", "COMMAND", "KEYS", "SCAN", "RANDOMKEY", "ASKING", "READONLY",
        "READWRITE", "LASTSAVE", "SAVE", "BGSAVE", "BGREWRITEAOF", "ROLE", "MULTI", "EXEC", "DISCARD",
        "FUNCTION", "SLOWLOG", "LATENCY", "MONITOR", "SUBSCRIBE", "PSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE",
        "PUBSUB", "QUIT", "HELLO", "AUTH", "SWAPDB", "DEBUG", "SHUTDOWN", "REPLICAOF", "SLAVEOF", "WAITAOF",
    ]

    /// The first key after a key count at `countAt`, nil when the count is 0.
    private static func keyAfterCount(_ arguments: [[UInt8]], countAt index: Int) -> [UInt8]? {
        guard index < arguments.count, let count = Int(String(decoding: arguments[index], as: UTF8.self)), count > 0,
              index + 1 < arguments.count else { return nil }
        return arguments[index + 1]
    }
}
