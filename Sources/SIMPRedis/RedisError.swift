/// Every failure of the Redis layer, with Redis' or hiredis' own message.
public struct RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Could not connect (refused, unresolvable, connect timeout).
        case connectionFailed
        /// A command got no answer within the configured timeout.
        case timeout
        /// The connection broke while in use; it is discarded and replaced.
        case io
        /// Redis answered with an error reply.
        case server
        /// Redis is up but cannot serve yet: LOADING (reading its AOF), BUSY (a script runs),
        /// MASTERDOWN, TRYAGAIN, CLUSTERDOWN (a cluster slot without a master). Temporary, like
        /// an outage.
        case notReady
        /// The pool was shut down.
        case closed
        /// Something that should not happen, e.g. an unparseable reply shape.
        case protocolViolation
    }

    public var kind: Kind
    public var message: String
    /// True when the commands may have run in Redis although no answer came back: the
    /// connection broke or timed out after they were sent. False when they surely did not
    /// run (no connection, a connection found closed before sending, an error reply).
    public var mayHaveRun = false

    public init(_ kind: Kind, _ message: String, mayHaveRun: Bool = false) {
        self.kind = kind
        self.message = message
        self.mayHaveRun = mayHaveRun
    }

    /// True when the store itself is unavailable (as opposed to a bad command).
    public var isUnavailable: Bool { kind != .server && kind != .protocolViolation }


    /// Classifies an error reply: temporary conditions are not the caller's fault.
    public static func reply(_ message: String) -> RedisError {
        let temporary = ["LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"]
        let code = message.prefix(while: { $0 != " " })
        return RedisError(temporary.contains(String(code)) ? .notReady : .server, message)
    }

    public var description: String { "redis \(kind.rawValue): \(message)" }
}
