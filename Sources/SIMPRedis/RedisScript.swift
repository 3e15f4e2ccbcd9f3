import Crypto

/// A Lua script run with EVALSHA. Each connection loads it (SCRIPT LOAD, pipelined ahead of
/// its first use) the first time it runs it, so a Redis that restarted with an empty script
/// cache is served again by itself.
public struct RedisScript: Sendable, Hashable {
    public let source: String
    /// Redis' name for the script: the hex SHA-1 of its source, computed once.
    public let sha: String

    public init(_ source: String) {
        self.source = source
        sha = Insecure.SHA1.hash(data: Array(source.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    // Compared and hashed by digest: hashing the whole source on every lookup cost 3% of the server.
    public static func == (a: RedisScript, b: RedisScript) -> Bool { a.sha == b.sha }
    public func hash(into hasher: inout Hasher) { hasher.combine(sha) }
}
