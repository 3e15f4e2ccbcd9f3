import Foundation
import NIOCore
import NIOPosix
import SIMPClient
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 46, finding 6: the library does not send a password in clear to a server that is not
/// this machine, unless told to. The "server" is a listener that never answers, on 10.199.0.1
/// in a network namespace of the test's own (`NetworkNamespace`), where the clients' event
/// loop runs. Nothing leaves the namespace.
@Suite(.serialized, .enabled(if: NetworkNamespace.available, "needs root, iproute2 and iptables for a network namespace"))
struct PlaintextOffLoopbackTests {
    /// Only ever in the test's own namespace.
    let address = "10.199.0.1"
    let password = "secretpw"

    /// Blocking socket work off the concurrency pool, so the clients' tasks are not held up.
    func blocking<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
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
            try await refused.connect(user: "alice", token: LoginToken(value: "alice.1.2.3", expiresAt: .max))
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
