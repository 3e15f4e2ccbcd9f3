/// A Lua script run with EVALSHA. Each connection loads it (SCRIPT LOAD) the first time it
/// runs it, so a Redis that restarted with an empty script cache is served again by itself.
public struct RedisScript: Sendable, Hashable {
    public let source: String

    public init(_ source: String) {
        self.source = source
    }
}
