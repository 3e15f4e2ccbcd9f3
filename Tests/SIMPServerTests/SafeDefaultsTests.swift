import Foundation
import SIMPServer
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// simp-server as an operator starts it: plain TCP only on loopback unless told otherwise,
/// and the metrics endpoint on loopback whatever `--host` is.
@Suite(.serialized) struct SafeDefaultsTests {
    /// Every way of saying "listen on everything" without TLS is refused before anything
    /// binds, with one line naming the way out; nothing on stdout.
    @Test func plainTCPOnAReachableAddressIsRefusedNamingAllowPlaintext() throws {
        let file = try ConfigFileFixture(#"{"host": "0.0.0.0"}"#)
        let ways: [(args: [String], environment: [String: String])] = [
            (["--host", "0.0.0.0"], [:]),
            (["--host", "::"], [:]),
            (["--host", "192.0.2.10"], [:]),
            ([], ["SIMP_HOST": "0.0.0.0"]),
            (["--config", file.path], [:]),
            (["--host", "0.0.0.0", "--print-config"], [:]),
        ]
        for way in ways {
            let process = try ChildProcess(try productPath("simp-server"), ["--port", "0", "--redis-wait", "1"] + way.args,
                                           environment: way.environment)
            let status = process.waitForExit(timeout: 10)
            #expect(status != nil && status != 0, "\(way) started")
            #expect(process.stderr.contains("--allow-plaintext") && process.stderr.contains("--tls-cert"), "\(way): \(process.stderr)")
            #expect(process.stderr.split(separator: "\n").count == 1, "\(way): \(process.stderr)")
            #expect(process.stdout.isEmpty, "\(way): \(process.stdout)")
        }
    }

    @Test func loopbackAddressesNeedNoTLS() {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost", "LOCALHOST"] {
            #expect(ServerConfiguration.isLoopback(host), "\(host)")
        }
        for host in ["0.0.0.0", "::", "10.0.0.1", "192.0.2.10", "128.0.0.1", "::2", "::ffff:10.0.0.1", "example.org", ""] {
            #expect(!ServerConfiguration.isLoopback(host), "\(host)")
        }
    }

    /// With `--allow-plaintext` (flag, environment or file) it starts on every address, the
    /// metrics stay on 127.0.0.1, and the ready line says where each is.
    @Test func allowPlaintextStartsOnEveryAddressWithMetricsOnLoopback() throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url, extra: ["--host", "0.0.0.0", "--allow-plaintext", "--metrics-port", "0"])
        defer { stop(server) }
        #expect(server.readyLine.range(of: #" tcp=0\.0\.0\.0:\d+ udp=0\.0\.0\.0:\d+ .* metrics=127\.0\.0\.1:\d+ tls=off"#,
                                       options: .regularExpression) != nil, "\(server.readyLine)")
        let metrics = try server.metricsPort()
        #expect(try httpExchange(port: metrics, path: "/health").hasPrefix("HTTP/1.1 200 OK"))
        // The control port answers on every address (127.0.0.2 stands for "not 127.0.0.1");
        // the metrics port only on the one it was given.
        #expect(canConnect(host: "127.0.0.2", port: server.tcpPort))
        #expect(!canConnect(host: "127.0.0.2", port: metrics))

        for environment in [["SIMP_ALLOW_PLAINTEXT": "yes"], ["SIMP_CONFIG": try ConfigFileFixture(#"{"allow-plaintext": true}"#).path]] {
            let other = try ServerProcess(redisURL: redis.url, extra: ["--host", "0.0.0.0", "--node-id", "node-env"], environment: environment)
            #expect(other.readyLine.contains(" tcp=0.0.0.0:"), "\(environment): \(other.readyLine)")
            stop(other)
        }
    }

    /// `--metrics-host` moves the endpoint, and only the endpoint.
    @Test func metricsBindToTheMetricsHost() throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url, extra: ["--metrics-port", "0", "--metrics-host", "127.0.0.2"])
        defer { stop(server) }
        #expect(server.readyLine.contains(" tcp=127.0.0.1:"), "\(server.readyLine)")
        #expect(server.readyLine.range(of: #" metrics=127\.0\.0\.2:\d+ "#, options: .regularExpression) != nil, "\(server.readyLine)")
        let metrics = try server.metricsPort()
        #expect(canConnect(host: "127.0.0.2", port: metrics))
        #expect(!canConnect(host: "127.0.0.1", port: metrics))
        #expect(!canConnect(host: "127.0.0.2", port: server.tcpPort))
    }

    /// `--print-config` shows both new settings with their sources.
    @Test func printConfigShowsTheNewSettings() throws {
        let defaults = try ChildProcess(try productPath("simp-server"), ["--print-config"])
        #expect(defaults.waitForExit(timeout: 10) == 0, "\(defaults.stderr)")
        #expect(defaults.stdout.contains("metrics-host = 127.0.0.1  (default)"), "\(defaults.stdout)")
        #expect(defaults.stdout.contains("allow-plaintext = false  (default)"), "\(defaults.stdout)")
        let given = try ChildProcess(try productPath("simp-server"), ["--print-config", "--host", "0.0.0.0", "--metrics-host", "10.0.0.5"],
                                     environment: ["SIMP_ALLOW_PLAINTEXT": "1"])
        #expect(given.waitForExit(timeout: 10) == 0, "\(given.stderr)")
        #expect(given.stdout.contains("metrics-host = 10.0.0.5  (flag)"), "\(given.stdout)")
        #expect(given.stdout.contains("allow-plaintext = true  (env SIMP_ALLOW_PLAINTEXT)"), "\(given.stdout)")
        let bad = try ChildProcess(try productPath("simp-server"), ["--print-config"], environment: ["SIMP_ALLOW_PLAINTEXT": "perhaps"])
        #expect(bad.waitForExit(timeout: 10) == 1)
        #expect(bad.stderr.contains("SIMP_ALLOW_PLAINTEXT=perhaps: allow-plaintext must be true or false"), "\(bad.stderr)")
    }

    private func stop(_ server: ServerProcess) {
        server.process.signal(SIGTERM)
        _ = server.process.waitForExit(timeout: 10)
    }

    /// Whether a TCP connection to `host:port` (IPv4) is accepted.
    private func canConnect(host: String, port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
