import NIOCore

/// Where Redis is and how long to wait for it.
public struct RedisConfiguration: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var database: Int
    public var connectTimeout: TimeAmount
    public var commandTimeout: TimeAmount

    public init(host: String = "127.0.0.1", port: Int = 6379, database: Int = 0,
                connectTimeout: TimeAmount = .seconds(2), commandTimeout: TimeAmount = .seconds(3)) {
        self.host = host
        self.port = port
        self.database = database
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
    }

    /// Parses `redis://HOST:PORT[/DB]`.
    public init(url: String) throws(RedisError) {
        let prefix = "redis://"
        guard url.hasPrefix(prefix) else {
            throw RedisError(.protocolViolation, "Redis URL must start with redis://, got \(url)")
        }
        var rest = Substring(url.dropFirst(prefix.count))
        // The URL is not repeated here: it would hold the password.
        guard !rest.contains("@") else {
            throw RedisError(.protocolViolation, "a Redis URL with a user or password is not supported (SIMP sends no AUTH); keep Redis on loopback or a private network")
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            if !db.isEmpty {
                guard let n = Int(db), n >= 0 else { throw RedisError(.protocolViolation, "bad database number in \(url)") }
                database = n
            }
            rest = rest[..<slash]
        }
        var host = String(rest)
        var port = 6379
        if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else {
                throw RedisError(.protocolViolation, "bad port in \(url)")
            }
            port = p
        }
        guard !host.isEmpty else { throw RedisError(.protocolViolation, "missing host in \(url)") }
        self.init(host: host, port: port, database: database)
    }

    public var url: String { "redis://\(host):\(port)/\(database)" }

    /// Seeds of a Redis Cluster from comma-separated URLs (`redis://a:7000,redis://b:7001`),
    /// for `RedisClusterPool(seeds:)`. A cluster has only database 0: another one is refused.
    public static func clusterSeeds(_ urls: String) throws(RedisError) -> [RedisConfiguration] {
        let parts = listed(urls)
        guard !parts.isEmpty else { throw RedisError(.protocolViolation, "no Redis Cluster node given") }
        var seeds: [RedisConfiguration] = []
        for part in parts {
            let seed = try RedisConfiguration(url: part)
            guard seed.database == 0 else { throw RedisError(.protocolViolation, "a Redis Cluster has only database 0, got \(part)") }
            seeds.append(seed)
        }
        return seeds
    }

    /// The entries of a comma-separated list of nodes, each with the `redis://` scheme (the
    /// issue's form `redis://h1:p1,h2:p2` names it once).
    static func listed(_ urls: String) -> [String] {
        // No Foundation here: spaces are trimmed by hand.
        urls.split(separator: ",").map { String($0.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed()) }
            .filter { !$0.isEmpty }
            .map { $0.contains("://") ? $0 : "redis://" + $0 }
    }
}
