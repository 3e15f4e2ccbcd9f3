import SIMPClient
import SIMPTerminal
import Testing

/// `simp`'s TLS choice (issue 46, finding 6): TLS by default off this machine, plain TCP there
/// only with `--no-tls --allow-plaintext`; loopback keeps plain TCP by default.
@Suite struct TransportChoiceTests {
    static let local = [ServerAddress(host: "127.0.0.1", port: 7700)]
    static let remote = [ServerAddress(host: "10.199.0.1", port: 7700)]
    static let mixed = [ServerAddress(host: "localhost", port: 7700), ServerAddress(host: "chat.example.org", port: 7700)]

    func choice(_ servers: [ServerAddress], tls: Bool?, allowPlaintext: Bool = false) -> Result<Bool, TransportChoice.Refusal> {
        Result { () throws(TransportChoice.Refusal) in try TransportChoice.usesTLS(servers: servers, tls: tls, allowPlaintext: allowPlaintext) }
    }

    @Test func withoutFlagsTLSUnlessEveryServerIsThisMachine() {
        #expect(choice(Self.local, tls: nil) == .success(false), "the README's local session stays plain TCP")
        #expect(choice([ServerAddress(host: "::1", port: 7700), ServerAddress(host: "localhost", port: 7701)], tls: nil) == .success(false))
        #expect(choice(Self.remote, tls: nil) == .success(true))
        #expect(choice(Self.mixed, tls: nil) == .success(true))
    }

    @Test func tlsIsTLSAnywhere() {
        #expect(choice(Self.local, tls: true) == .success(true))
        #expect(choice(Self.remote, tls: true) == .success(true))
    }

    @Test func noTLSOffThisMachineNeedsAllowPlaintext() throws {
        #expect(choice(Self.local, tls: false) == .success(false))
        #expect(choice(Self.local, tls: false, allowPlaintext: true) == .success(false))
        #expect(choice(Self.remote, tls: false, allowPlaintext: true) == .success(false))
        #expect(choice(Self.mixed, tls: false, allowPlaintext: true) == .success(false))
        for servers in [Self.remote, Self.mixed] {
            guard case .failure(let refusal) = choice(servers, tls: false) else {
                Issue.record("--no-tls to \(servers) was not refused")
                continue
            }
            #expect(refusal.message.contains("--allow-plaintext"), "\(refusal)")
            #expect(refusal.message.contains(servers.first { !$0.isLoopback }!.description), "names the server: \(refusal)")
        }
        #expect(choice(Self.remote, tls: false) == .failure(TransportChoice.Refusal(message:
            "--no-tls would send your password, login token and messages unencrypted to 10.199.0.1:7700, which is not this "
            + "machine: add --allow-plaintext to do that anyway, or leave out --no-tls to use TLS")))
    }

    @Test func allowPlaintextGoesOnlyWithNoTLS() {
        #expect(choice(Self.remote, tls: nil, allowPlaintext: true)
            == .failure(TransportChoice.Refusal(message: "--allow-plaintext only allows --no-tls to another machine: add --no-tls")))
        #expect(choice(Self.local, tls: true, allowPlaintext: true)
            == .failure(TransportChoice.Refusal(message: "--allow-plaintext goes with --no-tls, not with --tls")))
    }
}
