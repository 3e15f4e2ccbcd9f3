import SIMPClient

/// Whether `simp` talks TLS to its servers, from its flags and the servers, pure: TLS unless
/// every server is this machine (`ServerAddress.isLoopback`), where plain TCP stays the
/// default for a server run for local development. `--tls` asks for TLS anywhere; plain TCP
/// to another machine, which shows the password, the login token and every message to anyone
/// on the path, only with `--no-tls --allow-plaintext`.
public enum TransportChoice {
    public struct Refusal: Error, Equatable, CustomStringConvertible {
        public var message: String
        public var description: String { message }

        public init(message: String) {
            self.message = message
        }
    }

    /// `tls`: true for `--tls`, false for `--no-tls`, nil for neither.
    public static func usesTLS(servers: [ServerAddress], tls: Bool?, allowPlaintext: Bool) throws(Refusal) -> Bool {
        switch (tls, allowPlaintext) {
        case (true?, true):
            throw Refusal(message: "--allow-plaintext goes with --no-tls, not with --tls")
        case (nil, true):
            throw Refusal(message: "--allow-plaintext only allows --no-tls to another machine: add --no-tls")
        case (true?, false):
            return true
        case (nil, false):
            return !servers.allSatisfy(\.isLoopback)
        case (false?, let allowed):
            if !allowed, let remote = servers.first(where: { !$0.isLoopback }) {
                throw Refusal(message: "--no-tls would send your password, login token and messages unencrypted to \(remote), "
                              + "which is not this machine: add --allow-plaintext to do that anyway, or leave out --no-tls to use TLS")
            }
            return false
        }
    }
}
