import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// SIGHUP to a real simp-server process: it reads its config file again and applies the TLS
/// certificate and the limits that can change while running, without dropping anyone.
@Suite(.serialized) struct ReloadTests {
    /// A redis-server and a simp-server started with `--config` and a metrics port.
    func node(_ config: ConfigFileFixture) throws -> ServerNode {
        try ServerNode(extra: ["--config", config.path, "--metrics-port", "0"])
    }

    @Test func aNewCertificateServesNewConnectionsAndOpenSessionsCarryOn() async throws {
        let (certA, certB) = (try DevCertificate(), try DevCertificate())
        let live = try LiveCertificate(certA)
        let config = try ConfigFileFixture(#"{"tls-cert": "\#(live.certificate)", "tls-key": "\#(live.key)"}"#)
        let node = try node(config)
        defer { node.stop() }
        let trustingA = clientConfiguration(node, trusting: certA)
        let alice = SIMPClient(configuration: trustingA), bob = SIMPClient(configuration: trustingA)
        let aliceLog = EventLog(alice), bobLog = EventLog(bob)
        for (client, name) in [(alice, "alice"), (bob, "bob")] {
            try await client.register(user: name, password: "pw")
            try await client.connect(user: name, password: "pw")
        }
        _ = try await alice.send(to: "bob", text: "before the reload")
        #expect(await bobLog.wait { $0.messages.count == 1 })

        try live.replace(with: certB)
        try await node.hangUp(expecting: "ok")
        #expect(await eventually { node.server.process.stderr.contains("TLS certificate replaced") }, "\(node.server.process.stderr)")

        // A new connection gets certificate B: a client trusting only A refuses it.
        do {
            try await SIMPClient(configuration: trustingA).register(user: "mallory", password: "pw")
            Issue.record("a new connection still got certificate A")
        } catch {
            #expect(error.message.contains("CERTIFICATE_VERIFY_FAILED"), "\(error.message)")
        }
        let carol = SIMPClient(configuration: clientConfiguration(node, trusting: certB))
        try await carol.register(user: "carol", password: "pw")
        try await carol.connect(user: "carol", password: "pw")

        // The sessions opened over certificate A still send and receive.
        _ = try await alice.send(to: "bob", text: "after the reload")
        _ = try await bob.send(to: "alice", text: "bob after the reload")
        _ = try await carol.send(to: "alice", text: "carol over B")
        #expect(await bobLog.wait { $0.messages.map(\.text) == ["before the reload", "after the reload"] })
        #expect(await aliceLog.wait { Set($0.messages.map(\.text)) == ["bob after the reload", "carol over B"] })
        #expect(await aliceLog.wait { $0.delivered.count == 2 }, "alice's messages were confirmed over her old TLS session")
        for client in [alice, bob, carol] { await client.close() }
    }

    /// An unreadable certificate or a broken file: the reload fails, says why, and the server
    /// keeps serving with what it had.
    @Test func aBadReloadKeepsTheRunningConfiguration() async throws {
        let certA = try DevCertificate()
        let live = try LiveCertificate(certA)
        let config = try ConfigFileFixture(#"{"tls-cert": "\#(live.certificate)", "tls-key": "\#(live.key)", "max-conns-per-ip": 50}"#)
        let node = try node(config)
        defer { node.stop() }

        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: live.certificate), options: .atomic)
        try await node.hangUp(expecting: "failed")
        // The failure is counted just before it is logged.
        #expect(await eventually { node.server.process.stderr.contains("configuration reload failed") }, "\(node.server.process.stderr)")
        try live.replace(with: certA)
        try config.write(#"{"tls-cert": "\#(live.certificate)", "tls-key": "\#(live.key)", "max-conns-per-ip": "lots"}"#)
        try await node.hangUp(expecting: "failed")
        #expect(await eventually { node.server.process.stderr.contains(#""max-conns-per-ip" must be a whole number"#) })
        try config.write(#"{"tls-cert": "\#(live.certificate)", "tls-key": "\#(live.key)", "max-conn-per-ip": 5}"#)
        try await node.hangUp(expecting: "failed")
        #expect(await eventually { node.server.process.stderr.contains(#"unknown key "max-conn-per-ip""#) })

        let client = SIMPClient(configuration: clientConfiguration(node, trusting: certA))
        try await client.register(user: "alice", password: "pw")
        try await client.connect(user: "alice", password: "pw")
        await client.close()
        #expect(try node.metric(#"simp_config_reloads_total{result="ok"}"#) == 0)
    }

    /// max-conns-per-ip from the file, raised by a reload: the next connection is admitted
    /// without restarting, and the open ones stay. A setting that needs a restart is reported.
    @Test func aRaisedConnectionLimitAppliesAfterSighup() async throws {
        let config = try ConfigFileFixture(#"{"max-conns-per-ip": 2}"#)
        let node = try node(config)
        defer { node.stop() }
        let (tcp, udp) = (node.server.tcpPort, node.server.udpPort)
        let refused = #"simp_limit_exceeded_total{limit="connections_per_ip"}"#
        let open = [try RawPeer(tcpPort: tcp, udpPort: udp), try RawPeer(tcpPort: tcp, udpPort: udp)]
        #expect(await eventually { try node.metric("simp_control_connections") == 2 })
        let third = try RawPeer(tcpPort: tcp, udpPort: udp)
        #expect(try third.read()?.error.code == .tooManyConnections)
        #expect(try node.metric(refused) == 1)

        try config.write(#"{"max-conns-per-ip": 3, "heartbeat": 7}"#)
        try await node.hangUp(expecting: "ok")
        // The log lines may reach the pipe after the reload's metric.
        #expect(await eventually { node.server.process.stderr.contains("max-conns-per-ip 2 -> 3 (file \(config.path))") },
                "\(node.server.process.stderr)")
        #expect(await eventually { node.server.process.stderr.contains("only applied at the next restart: heartbeat") },
                "\(node.server.process.stderr)")

        let admitted = try RawPeer(tcpPort: tcp, udpPort: udp)
        #expect(await eventually { try node.metric("simp_control_connections") == 3 })
        let fourth = try RawPeer(tcpPort: tcp, udpPort: udp)
        #expect(try fourth.read()?.error.code == .tooManyConnections)
        #expect(try node.metric(refused) == 2)
        withExtendedLifetime((open, admitted)) {}
    }

    /// A per-connection limit from the file (login-deadline, 30 s -> 1 s): a connection opened
    /// after the reload that never logs in is closed at the new deadline, well inside the 15 s
    /// the raw peer waits (at 30 s it would still be open then).
    @Test func aShorterLoginDeadlineAppliesToNewConnections() async throws {
        let config = try ConfigFileFixture(#"{"login-deadline": 30}"#)
        let node = try node(config)
        defer { node.stop() }
        try config.write(#"{"login-deadline": 1}"#)
        try await node.hangUp(expecting: "ok")
        #expect(await eventually { node.server.process.stderr.contains("login-deadline 30 s -> 1 s") }, "\(node.server.process.stderr)")
        let silent = try RawPeer(tcpPort: node.server.tcpPort, udpPort: node.server.udpPort)
        let error = try silent.read()
        #expect(error?.error.code == .notAuthenticated && silent.isClosedByServer(), "\(String(describing: error))")
        #expect(try node.metric(#"simp_limit_exceeded_total{limit="login_deadline"}"#) == 1)
    }

    /// The inbox limits are the store's: after the reload the fourth unconfirmed message from
    /// one sender is refused with the new share.
    @Test func aLowerInboxShareAppliesToTheNextStore() async throws {
        let config = try ConfigFileFixture(#"{"inbox-share": 2500}"#)
        let node = try node(config)
        defer { node.stop() }
        try config.write(#"{"inbox-share": 3}"#)
        try await node.hangUp(expecting: "ok")
        #expect(await eventually { node.server.process.stderr.contains("inbox-share 2500 -> 3") }, "\(node.server.process.stderr)")
        let alice = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: node.server.tcpPort))
        try await alice.register(user: "alice", password: "pw-alice")
        try await alice.register(user: "bob", password: "pw-bob")
        let log = EventLog(alice)
        try await alice.connect(user: "alice", password: "pw-alice")
        for k in 0..<4 { _ = try await alice.send(to: "bob", text: "m\(k)") }
        #expect(await log.wait { $0.accepted.count + $0.failed.count == 4 })
        #expect(log.accepted.count == 3)
        #expect(log.failed.map(\.reason).allSatisfy { $0.contains("3 messages bob has not confirmed") }, "\(log.failed)")
        await alice.close()
    }

    func clientConfiguration(_ node: ServerNode, trusting certificate: DevCertificate) -> ClientConfiguration {
        var config = ClientConfiguration(host: "127.0.0.1", port: node.server.tcpPort)
        config.requestTimeout = .seconds(5)
        config.tls = ClientTLS(caFile: certificate.certificate)
        return config
    }
}

/// The certificate and key files the server is configured with, which a test replaces the
/// way an operator (or certbot) would: new files renamed over the old ones.
struct LiveCertificate {
    let directory: URL
    var certificate: String { directory.appendingPathComponent("cert.pem").path }
    var key: String { directory.appendingPathComponent("key.pem").path }

    init(_ initial: DevCertificate) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-live-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try replace(with: initial)
    }

    func replace(with new: DevCertificate) throws {
        try Data(contentsOf: URL(fileURLWithPath: new.key)).write(to: URL(fileURLWithPath: key), options: .atomic)
        try Data(contentsOf: URL(fileURLWithPath: new.certificate)).write(to: URL(fileURLWithPath: certificate), options: .atomic)
    }
}

extension ServerNode {
    func metric(_ name: String) throws -> Double {
        metricValue(try httpExchange(port: try server.metricsPort(), path: "/metrics"), name)
    }

    /// Sends SIGHUP and waits until the reload is counted under `result`.
    func hangUp(expecting result: String) async throws {
        let name = #"simp_config_reloads_total{result="\#(result)"}"#
        let before = try metric(name)
        server.process.signal(SIGHUP)
        let counted = await eventually { try metric(name) == before + 1 }
        #expect(counted, "no \(result) reload counted; stderr: \(server.process.stderr)")
    }
}
