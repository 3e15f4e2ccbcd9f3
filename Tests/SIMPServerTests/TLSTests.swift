import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A self-signed certificate, by default for 127.0.0.1 and localhost (the README's one-liner).
struct DevCertificate {
    let directory: URL
    var certificate: String { directory.appendingPathComponent("cert.pem").path }
    var key: String { directory.appendingPathComponent("key.pem").path }

    init(names: String = "DNS:localhost,IP:127.0.0.1") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let openssl = try ChildProcess(try findExecutable("openssl").path, [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-keyout", directory.appendingPathComponent("key.pem").path,
            "-out", directory.appendingPathComponent("cert.pem").path,
            "-subj", "/CN=localhost", "-addext", "subjectAltName=\(names)",
        ])
        guard openssl.waitForExit(timeout: 20) == 0 else { throw TestSupportError("openssl failed: \(openssl.stderr)") }
    }
}

@Suite(.serialized) struct TLSTests {
    /// One conversation between two library clients against a real simp-server process,
    /// with a raw capture of everything on the server's ports.
    func converse(tls: DevCertificate?, secret: String, password: String) async throws -> (packets: [CapturedPacket], readyLine: String) {
        let node = try ServerNode(extra: tls.map { ["--tls-cert", $0.certificate, "--tls-key", $0.key] } ?? [])
        defer { node.stop() }
        let server = node.server
        let capture = try LoopbackCapture(ports: [server.tcpPort, server.udpPort])
        var config = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
        config.tls = tls.map { ClientTLS(caFile: $0.certificate) }
        let alice = SIMPClient(configuration: config)
        let bob = SIMPClient(configuration: config)
        let bobLog = EventLog(bob)
        try await alice.register(user: "alice", password: password)
        try await bob.register(user: "bob", password: password)
        try await bob.connect(user: "bob", password: password)
        try await alice.connect(user: "alice", password: password)
        _ = try await alice.send(to: "bob", text: secret)
        #expect(await bobLog.wait { $0.messages.count == 1 })
        #expect(bobLog.messages.first?.text == secret)
        let history = try await alice.history(with: "bob")
        #expect(history.map(\.text) == [secret], "the history crossed the control channel")
        await alice.close()
        await bob.close()
        return (capture.stop(), server.readyLine)
    }

    @Test func aTLSConversationLeavesNoTextOnTheWire() async throws {
        let secret = "the eagle lands at midnight \(UUID().uuidString.prefix(8))"
        let password = "hunter2-\(UUID().uuidString.prefix(8))"
        let (packets, readyLine) = try await converse(tls: try DevCertificate(), secret: secret, password: password)
        #expect(readyLine.hasSuffix(" tls=on"))
        let tcp = packets.filter(\.isTCP).flatMap(\.payload)
        let udp = packets.filter { !$0.isTCP }
        #expect(tcp.count > 2000, "the capture saw the control traffic (handshakes, login, history)")
        #expect(udp.count >= 2, "the capture saw the datagrams")
        let everything = packets.flatMap(\.payload)
        #expect(!everything.contains(bytes: Array(secret.utf8)), "message text on the wire")
        #expect(!everything.contains(bytes: Array(password.utf8)), "password on the wire")
        #expect(!everything.contains(bytes: Array("alice".utf8)), "user names on the wire")
    }

    /// The same capture without TLS sees the password in the login frame: the capture works,
    /// and plain TCP is what the ready line says it is.
    @Test func aPlainConversationShowsThePasswordSoTheCaptureIsReal() async throws {
        let password = "hunter2-\(UUID().uuidString.prefix(8))"
        let (packets, readyLine) = try await converse(tls: nil, secret: "hello", password: password)
        #expect(readyLine.contains("tls=off (plain TCP: for local development only)"))
        #expect(packets.flatMap(\.payload).contains(bytes: Array(password.utf8)))
    }

    @Test func clientsRefuseAnUntrustedServerAndPlainClientsGetNowhere() async throws {
        let certificate = try DevCertificate()
        let node = try ServerNode(extra: ["--tls-cert", certificate.certificate, "--tls-key", certificate.key])
        defer { node.stop() }
        let server = node.server
        var config = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
        config.requestTimeout = .seconds(3)
        config.tls = ClientTLS()  // the system's roots do not know this self-signed certificate
        do {
            try await SIMPClient(configuration: config).register(user: "alice", password: "pw")
            Issue.record("registered over TLS with an untrusted certificate")
        } catch {
            #expect(error.message.contains("CERTIFICATE_VERIFY_FAILED"), "\(error.message)")
        }
        config.tls = nil
        do {
            try await SIMPClient(configuration: config).register(user: "alice", password: "pw")
            Issue.record("a plain client registered on a TLS server")
        } catch {
            #expect(error.message.contains("simp --tls"), "\(error.message)")
        }
        do {
            try await SIMPClient(configuration: config).connect(user: "alice", password: "pw")
            Issue.record("a plain client logged in on a TLS server")
        } catch {
            #expect(error.message.contains("simp --tls"), "\(error.message)")
        }
        config.tls = ClientTLS(caFile: certificate.certificate)
        try await SIMPClient(configuration: config).register(user: "alice", password: "pw")
    }

    /// A certificate that names only simp.test: trusted, it still must name what the client
    /// asked for (or the IP address it connected to, which this one does not carry).
    @Test func theCertificateMustNameTheServer() async throws {
        let certificate = try DevCertificate(names: "DNS:simp.test")
        let node = try ServerNode(extra: ["--tls-cert", certificate.certificate, "--tls-key", certificate.key])
        defer { node.stop() }
        let server = node.server
        var config = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
        config.requestTimeout = .seconds(3)
        for wrong in [nil, "other.test"] {
            config.tls = ClientTLS(caFile: certificate.certificate, serverName: wrong)
            do {
                try await SIMPClient(configuration: config).register(user: "alice", password: "pw")
                Issue.record("a certificate for simp.test was accepted for \(wrong ?? "127.0.0.1")")
            } catch {
                #expect(error.message.contains("hostname") || error.message.contains("Hostname"), "\(error.message)")
            }
        }
        config.tls = ClientTLS(caFile: certificate.certificate, serverName: "simp.test")
        try await SIMPClient(configuration: config).register(user: "alice", password: "pw")
    }

    @Test func theCLIOverTLS() throws {
        let certificate = try DevCertificate()
        let node = try ServerNode(extra: ["--tls-cert", certificate.certificate, "--tls-key", certificate.key])
        defer { node.stop() }
        let server = node.server
        let simp = try productPath("simp")
        let base = ["--no-e2e", "--server", "127.0.0.1:\(server.tcpPort)", "--tls", "--ca", certificate.certificate, "--json"]
        let bob = try ChildProcess(simp, base + ["--user", "bob", "--password", "pw", "--register"])
        #expect(bob.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil)
        let alice = try ChildProcess(simp, base + ["--user", "alice", "--password", "pw", "--register", "--linger", "5"])
        alice.write("/send bob over tls\n/logout\n")
        alice.closeStdin()
        #expect(alice.waitForExit(timeout: 30) == 0, "\(alice.stderr)")
        #expect(alice.stdout.contains(#""event":"delivered""#))
        #expect(alice.stdout.contains("logged out"))
        #expect(bob.waitForLine(timeout: 10) { $0.contains("over tls") } != nil)
        bob.closeStdin()
        #expect(bob.waitForExit(timeout: 20) == 0)
    }

    @Test func aMissingCertificateIsAClearStartupError() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let process = try ChildProcess(try productPath("simp-server"), [
            "--port", "0", "--udp-port", "0", "--redis", redis.url, "--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem",
        ])
        #expect(process.waitForExit(timeout: 20) == 1)
        #expect(process.stderr.contains("cannot use TLS certificate /nonexistent/cert.pem"))
        let half = try ChildProcess(try productPath("simp-server"), ["--tls-cert", "/x.pem"])
        #expect(half.waitForExit(timeout: 20) != 0)
        #expect(half.stderr.contains("--tls-cert and --tls-key go together"))
    }
}
