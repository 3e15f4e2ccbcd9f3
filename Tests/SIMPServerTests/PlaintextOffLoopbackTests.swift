import Foundation
import NIOCore
import NIOPosix
@_spi(NIO) import SIMPClient
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 46, finding 6: neither `simp` nor the library sends a password in clear to a server
/// that is not this machine, unless told to. The "server" is a listener that never answers, on
/// 10.199.0.1 in a network namespace of the test's own (`NetworkNamespace`): `simp` runs in
/// there, and so does the library clients' event loop. Nothing leaves the namespace.
@Suite(.serialized, .enabled(if: NetworkNamespace.available, "needs root, iproute2 and iptables for a network namespace"))
struct PlaintextOffLoopbackTests {
    /// Only ever in the test's own namespace.
    let address = "10.199.0.1"
    let password = "secretpw"
    /// A credentials directory of the test's own: no saved login is read or written.
    let configHome = FileManager.default.temporaryDirectory.appendingPathComponent("simp-config-\(UUID().uuidString)").path

    /// `simp COMMAND... --server ADDRESS:PORT --user alice --password secretpw FLAGS...`, run inside the namespace.
    func simp(_ namespace: NetworkNamespace, _ listener: RecordingListener, _ command: [String] = [], flags: [String] = []) throws -> ChildProcess {
        // --no-e2e: what is tested is the login's transport, before any data directory.
        let arguments = command + ["--no-e2e", "--server", "\(address):\(listener.port)", "--user", "alice", "--password", password] + flags
        let process = try namespace.spawn(try productPath("simp"), arguments, environment: ["XDG_CONFIG_HOME": configHome])
        process.closeStdin()
        return process
    }

    /// Blocking socket work off the concurrency pool, so the clients' tasks are not held up.
    func blocking<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
    }

    /// A whole TLS record: its 5-byte header and the length it gives.
    static func holdsATLSRecord(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 5 && bytes.count >= 5 + (Int(bytes[3]) << 8 | Int(bytes[4]))
    }

    @Test func withoutFlagsSimpTalksTLSToAnotherMachine() async throws {
        let namespace = try NetworkNamespace()
        defer { withExtendedLifetime(namespace) {} }
        try namespace.addAddress(address)
        let listener = try RecordingListener(in: namespace, at: address)
        let simp = try simp(namespace, listener)
        let connection = try #require(await blocking { listener.accept(timeout: 30) }, "simp did not connect; stderr: \(simp.stderr)")
        defer { close(connection) }
        let (bytes, closed) = await blocking { RecordingListener.read(connection, timeout: 30, until: Self.holdsATLSRecord) }
        #expect(bytes.first == 0x16 && bytes.dropFirst().first == 0x03, "a TLS handshake record (ClientHello) first: \(bytes.prefix(8))")
        #expect(Self.holdsATLSRecord(bytes))
        #expect(closed, "simp hung up when the server did")
        #expect(!bytes.contains(bytes: Array(password.utf8)), "the password crossed in clear")
        #expect(!bytes.contains(bytes: Array("alice".utf8)))
        let status = await blocking { simp.waitForExit(timeout: 30) }
        #expect(status != nil && status != 0, "stderr: \(simp.stderr)")
        #expect(!listener.hasPendingConnection, "no second try in plain TCP")
    }

    /// `--no-tls` to another machine is a usage error naming `--allow-plaintext`, in the REPL
    /// and the one-shot commands alike, and nothing reaches the server: not even a connection.
    @Test func noTLSAloneToAnotherMachineIsRefusedBeforeConnecting() async throws {
        let namespace = try NetworkNamespace()
        defer { withExtendedLifetime(namespace) {} }
        try namespace.addAddress(address)
        let listener = try RecordingListener(in: namespace, at: address)
        for command in [[], ["send", "--to", "bob", "hello"], ["login"], ["history", "bob"]] {
            let simp = try simp(namespace, listener, command, flags: ["--no-tls"])
            let status = await blocking { simp.waitForExit(timeout: 30) }
            #expect(status == 2, "\(command): stderr: \(simp.stderr)")
            #expect(simp.stderr.contains("--allow-plaintext"), "\(command): \(simp.stderr)")
            #expect(simp.stderr.contains("\(address):\(listener.port)"), "\(command): \(simp.stderr)")
            // It exited: a connection it made would be waiting to be accepted.
            #expect(!listener.hasPendingConnection, "\(command) connected")
        }
    }

    @Test func noTLSWithAllowPlaintextSendsInClear() async throws {
        let namespace = try NetworkNamespace()
        defer { withExtendedLifetime(namespace) {} }
        try namespace.addAddress(address)
        let listener = try RecordingListener(in: namespace, at: address)
        let needle = Array(password.utf8)
        let simp = try simp(namespace, listener, flags: ["--no-tls", "--allow-plaintext"])
        let connection = try #require(await blocking { listener.accept(timeout: 30) }, "simp did not connect; stderr: \(simp.stderr)")
        defer { close(connection) }
        let (bytes, _) = await blocking { RecordingListener.read(connection, timeout: 30) { $0.contains(bytes: needle) } }
        #expect(bytes.first != 0x16, "not TLS")
        #expect(bytes.contains(bytes: needle), "the login frame, password and all")
        let status = await blocking { simp.waitForExit(timeout: 30) }
        #expect(status != nil && status != 0, "the server hung up: stderr: \(simp.stderr)")
    }

    /// The library on its own: a client whose event loop runs inside the namespace refuses to
    /// log in, register or present a token in plain TCP to 10.199.0.1, with a clear error and
    /// without connecting; the same client allowed plaintext reaches the listener and sends the
    /// password, so it was the refusal, not the network, that kept it away.
    @Test func theLibraryRefusesPlaintextToAnotherMachineBeforeConnecting() async throws {
        let namespace = try NetworkNamespace()
        defer { withExtendedLifetime(namespace) {} }
        try namespace.addAddress(address)
        let listener = try RecordingListener(in: namespace, at: address)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let name = namespace.name
        try await group.next().submit { try NetworkNamespace.enter(named: name) }.get()
        #expect(try await group.next().submit { NetworkNamespace.holdsCurrentThread(name) }.get())
        #expect(!NetworkNamespace.holdsCurrentThread(name), "the test's own threads stay out")

        var config = ClientConfiguration(host: address, port: listener.port)
        config.connectTimeout = .seconds(5)
        config.requestTimeout = .seconds(5)
        let refused = SIMPClient(configuration: config, eventLoopGroup: group)
        let expected = "refusing to send the password or login token unencrypted to \(address):\(listener.port), "
            + "which is not this machine: configure TLS, or allow plaintext explicitly (ClientConfiguration.allowPlaintext)"
        await #expect(throws: ClientError(expected)) { try await refused.connect(user: "alice", password: password) }
        await #expect(throws: ClientError(expected)) { try await refused.register(user: "alice", password: password) }
        await #expect(throws: ClientError(expected)) {
            try await refused.connect(user: "alice", token: LoginToken(value: "alice.1.2.3", expiresAt: .distantFuture))
        }
        await refused.close()
        #expect(!listener.hasPendingConnection, "nothing connected")

        config.allowPlaintext = true
        let allowed = SIMPClient(configuration: config, eventLoopGroup: group)
        let needle = Array(password.utf8)
        let secret = password
        let attempt = Task { try await allowed.connect(user: "alice", password: secret) }
        let connection = try #require(await blocking { listener.accept(timeout: 30) }, "the allowed client did not connect")
        defer { close(connection) }
        let (bytes, _) = await blocking { RecordingListener.read(connection, timeout: 30) { $0.contains(bytes: needle) } }
        #expect(bytes.contains(bytes: needle), "allowed, it sends the password in clear")
        if case .success = await attempt.result { Issue.record("a silent server logged it in") }
        await allowed.close()
        try await group.shutdownGracefully()
    }
}
