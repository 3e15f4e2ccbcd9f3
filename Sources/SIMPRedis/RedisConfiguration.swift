import NIOCore

/// Where Redis is, how to log in to it, and how long to wait for it.
///
/// The password never leaves this value except in AUTH: `url`, `description` and every
/// error say `***` instead, so a configuration may be logged or printed as it is.
public struct RedisConfiguration: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var host: String
    public var port: Int
    public var database: Int
    public var connectTimeout: TimeAmount
    public var commandTimeout: TimeAmount
    /// The ACL user AUTH names; nil: Redis' `default` user (`requirepass`).
    public var user: String?
    /// Sent with AUTH on every new connection before any other command; nil: no AUTH.
    public var password: String?

    public init(host: String = "127.0.0.1", port: Int = 6379, database: Int = 0,
                connectTimeout: TimeAmount = .seconds(2), commandTimeout: TimeAmount = .seconds(3),
                user: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.database = database
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
        self.user = user
        self.password = password
    }

    /// Parses `redis://[[USER]:PASSWORD@]HOST:PORT[/DB]` (also `redis://USER@HOST`, its
    /// password given separately). User and password are percent-decoded (`%40` for `@`).
    /// No error repeats the URL as given: it may hold the password.
    public init(url: String) throws(RedisError) {
        let prefix = "redis://"
        let shown = Self.masked(url)
        guard url.hasPrefix(prefix) else {
            throw RedisError(.protocolViolation, "Redis URL must start with redis://, got \(shown)")
        }
        var rest = Substring(url.dropFirst(prefix.count))
        var user: String?
        var password: String?
        // The last @: a password may hold an unencoded @ or /, never the host.
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let colon = userInfo.firstIndex(of: ":")
            let name = try Self.percentDecoded(userInfo[..<(colon ?? userInfo.endIndex)], "user")
            user = name.isEmpty ? nil : name
            if let colon {
                let secret = try Self.percentDecoded(userInfo[userInfo.index(after: colon)...], "password")
                password = secret.isEmpty ? nil : secret
            }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            if !db.isEmpty {
                guard let n = Int(db), n >= 0 else { throw RedisError(.protocolViolation, "bad database number in \(shown)") }
                database = n
            }
            rest = rest[..<slash]
        }
        var host = String(rest)
        var port = 6379
        if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else {
                throw RedisError(.protocolViolation, "bad port in \(shown)")
            }
            port = p
        }
        guard !host.isEmpty else { throw RedisError(.protocolViolation, "missing host in \(shown)") }
        self.init(host: host, port: port, database: database, user: user, password: password)
    }

    /// The configuration as a URL, its password (if any) shown as `***`.
    public var url: String {
        let credentials = switch (user, password) {
        case (nil, nil): ""
        case (let user?, nil): Self.percentEncoded(user) + "@"
        case (let user, _?): (user.map(Self.percentEncoded) ?? "") + ":***@"
        }
        return "redis://\(credentials)\(host):\(port)/\(database)"
    }

    public var description: String { url }
    public var debugDescription: String { url }

    /// AUTH as this configuration logs in, or nil when it sends none.
    var authentication: RedisCommand? {
        guard let password else { return nil }
        return user.map { RedisCommand("AUTH", [$0, password]) } ?? RedisCommand("AUTH", [password])
    }

    /// A user without a password cannot log in: refused before anything is sent.
    public func checkLogin() throws(RedisError) {
        guard user != nil, password == nil else { return }
        throw RedisError(.protocolViolation, "the Redis URL names a user but gives no password for it (in the URL, a password file or the environment)")
    }

    /// The error for a reply saying Redis refused this login, nil for any other error reply.
    /// Its kind is `.protocolViolation`, as for other misconfigurations: a wrong or missing
    /// password does not mend by waiting, so a start fails at once instead of retrying.
    /// Redis' own text is kept (it never repeats a password); the password is cut out anyway.
    func loginRefused(_ message: String, toAuth: Bool) -> RedisError? {
        let node = "\(host):\(port)"
        let said = password.flatMap { $0.isEmpty ? nil : $0 }.map { message.replacing($0, with: "***") } ?? message
        if toAuth {
            let what = user.map { "user \($0) or its password" } ?? "the password"
            return RedisError(.protocolViolation, "Redis at \(node) refused \(what) (\(said))")
        }
        if message.hasPrefix("NOAUTH") {
            return RedisError(.protocolViolation, "Redis at \(node) requires a password and none was given (\(said)); give it in the URL (redis://:PASSWORD@HOST:PORT), a password file or the environment")
        }
        return nil
    }

    /// `urls` (one or a comma-separated list) with every password replaced by `***`, for
    /// printing a setting or an error: `redis://:***@h:6379`, `redis://u:***@h`.
    public static func masked(_ urls: String) -> String {
        urls.split(separator: ",", omittingEmptySubsequences: false).map { part -> String in
            let start = part.firstRange(of: "://")?.upperBound ?? part.startIndex
            guard let at = part[start...].lastIndex(of: "@") else { return String(part) }
            let userInfo = part[start..<at]
            guard let colon = userInfo.firstIndex(of: ":") else { return String(part) }
            return String(part[..<colon]) + ":***" + String(part[at...])
        }.joined(separator: ",")
    }

    /// `%XX` escapes to their bytes (the text must be UTF-8 then). `what` names the part in
    /// the error, which never repeats its text.
    static func percentDecoded(_ text: Substring, _ what: String) throws(RedisError) -> String {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        var utf8 = text.utf8[...]
        while let byte = utf8.popFirst() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            let digits = utf8.prefix(2)
            guard digits.count == 2, let value = UInt8(String(decoding: digits, as: UTF8.self), radix: 16) else {
                throw RedisError(.protocolViolation, "bad percent-encoding in the Redis URL's \(what) (write % as %25)")
            }
            bytes.append(value)
            utf8 = utf8.dropFirst(2)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw RedisError(.protocolViolation, "the Redis URL's \(what) is not UTF-8 once percent-decoded")
        }
        return decoded
    }

    /// A user name as it may stand in a URL: RFC 3986's unreserved characters as they are.
    static func percentEncoded(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            let unreserved = (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || [0x2D, 0x2E, 0x5F, 0x7E].contains(byte)
            if unreserved {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return encoded
    }

    /// This configuration with `password` from elsewhere (a file, the environment). A URL
    /// that carries its own is refused: with two passwords one would be silently unused.
    public func withPassword(_ password: String) throws(RedisError) -> RedisConfiguration {
        guard self.password == nil else {
            throw RedisError(.protocolViolation, "the Redis URL has a password and another was given besides it (a password file or the environment); give only one")
        }
        var configuration = self
        configuration.password = password
        return configuration
    }

    /// Seeds of a Redis Cluster from comma-separated URLs (`redis://a:7000,redis://b:7001`),
    /// for `RedisClusterPool(seeds:)`. A cluster has only database 0: another one is refused.
    /// Every node of a cluster takes the same login, so a user and password given on one seed
    /// apply to all; seeds that give different ones are refused.
    public static func clusterSeeds(_ urls: String) throws(RedisError) -> [RedisConfiguration] {
        let parts = listed(urls)
        guard !parts.isEmpty else { throw RedisError(.protocolViolation, "no Redis Cluster node given") }
        var seeds: [RedisConfiguration] = []
        for part in parts {
            let seed = try RedisConfiguration(url: part)
            guard seed.database == 0 else { throw RedisError(.protocolViolation, "a Redis Cluster has only database 0, got \(masked(part))") }
            seeds.append(seed)
        }
        let logins = seeds.filter { $0.user != nil || $0.password != nil }
        if let login = logins.first {
            guard logins.allSatisfy({ $0.user == login.user && $0.password == login.password }) else {
                throw RedisError(.protocolViolation, "the Redis Cluster seeds give different users or passwords; the nodes of one cluster share one login")
            }
            for index in seeds.indices {
                seeds[index].user = login.user
                seeds[index].password = login.password
            }
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
