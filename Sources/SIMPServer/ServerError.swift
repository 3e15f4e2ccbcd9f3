import SIMPCore
import SIMPRedis

/// An error a client gets as an Error frame: a code from docs/PROTOCOL.md and a reason.
struct ServerError: Error, Sendable, CustomStringConvertible {
    var code: Simp_ErrorCode
    var reason: String

    init(_ code: Simp_ErrorCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    static func store(_ error: RedisError) -> ServerError {
        ServerError(.storeUnavailable, "message store unavailable: \(error.message)")
    }

    /// A CONNECT (or login) of a device whose revocation ends its token.
    static func deviceRevoked(_ device: String, of user: String) -> ServerError {
        ServerError(.deviceRevoked, "device \(device) of \(user) was revoked; log in again")
    }

    static func wrap(_ error: any Error) -> ServerError {
        if let e = error as? ServerError { return e }
        if let e = error as? RedisError { return .store(e) }
        return ServerError(.internal, "\(error)")
    }

    var description: String { "\(code.name): \(reason)" }
}
