import Testing
@testable import SIMPClient

/// Which servers the library sends a password or token to without TLS (issue 46, finding 6):
/// this machine's loopback only, unless `allowPlaintext` says otherwise.
@Suite struct PlaintextGuardTests {
    @Test func loopbackIsJudgedByTheHostAsConfigured() {
        for host in ["127.0.0.1", "127.1.2.3", "127.255.255.254", "::1", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1",
                     "localhost", "LocalHost"] {
            #expect(ServerAddress(host: host, port: 7700).isLoopback, "\(host)")
        }
        // Names are not resolved: only "localhost" counts, whatever another name points at;
        // and only the usual spellings of an address.
        for host in ["10.199.0.1", "192.0.2.10", "128.0.0.1", "126.255.255.255", "0.0.0.0", "::", "::2",
                     "::ffff:10.0.0.1", "127.1", "[::1]", "example.org", "localhost.example.org", "evil.localhost",
                     "127.0.0.1.example.org", ""] {
            #expect(!ServerAddress(host: host, port: 7700).isLoopback, "\(host)")
        }
    }

    @Test func plainTCPOffThisMachineIsRefusedUnlessAllowed() {
        var config = ClientConfiguration(servers: [ServerAddress(host: "127.0.0.1", port: 1),
                                                   ServerAddress(host: "10.199.0.1", port: 7700)])
        #expect(config.plaintextExposure == ServerAddress(host: "10.199.0.1", port: 7700), "one server off this machine is enough")
        #expect(config.refusal?.message == "refusing to send the password or login token unencrypted to 10.199.0.1:7700, "
                + "which is not this machine: configure TLS, or allow plaintext explicitly (ClientConfiguration.allowPlaintext)")
        #expect(config.refusal?.code == nil, "a local refusal, not the server's")

        config.allowPlaintext = true
        #expect(config.plaintextExposure == nil)
        #expect(config.refusal == nil)

        config.allowPlaintext = false
        config.tls = ClientTLS()
        #expect(config.refusal == nil, "TLS may go anywhere")

        #expect(ClientConfiguration().refusal == nil, "the default server is 127.0.0.1")
        #expect(ClientConfiguration(host: "localhost", port: 7700).refusal == nil)
        #expect(ClientConfiguration(host: "::1", port: 7700).refusal == nil)
        #expect(ClientConfiguration(host: "chat.example.org", port: 7700).refusal != nil)
    }

    @Test func anInvalidDeviceNameIsRefusedToo() {
        var config = ClientConfiguration()
        config.device = "Not Valid"
        #expect(config.refusal?.code == .invalidName)
    }
}
