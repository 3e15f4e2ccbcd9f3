import Foundation
import SIMPClient
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The binaries as a user runs them: simp-server's ready line, signals and exit codes;
/// simp reading commands from a pipe.
@Suite(.serialized) struct ProcessTests {
    func simp(_ server: ServerProcess, _ args: [String]) throws -> ChildProcess {
        try ChildProcess(try productPath("simp"), ["--no-e2e", "--server", "127.0.0.1:\(server.tcpPort)"] + args)
    }

    func jsonLines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test func readyLineThenSigtermExitsZero() throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url)
        #expect(server.readyLine.range(of: #"^simp-server listening tcp=127\.0\.0\.1:\d+ udp=127\.0\.0\.1:\d+ node=node-1 tls=off \(plain TCP: for local development only\)$"#,
                                       options: .regularExpression) != nil)
        #expect(server.process.stdout.split(separator: "\n").count == 1, "exactly one line on stdout")
        server.process.signal(SIGTERM)
        #expect(server.process.waitForExit(timeout: 10) == 0)
    }

    @Test func environmentConfiguresAndSigintExitsZero() throws {
        let redis = try RedisServerProcess()
        let process = try ChildProcess(try productPath("simp-server"), ["--scrypt-rounds", "1024", "--min-password-length", "1"],
                                       environment: ["SIMP_PORT": "0", "SIMP_E2E": "optional", "SIMP_UDP_PORT": "0", "SIMP_NODE_ID": "n7",
                                                     "SIMP_REDIS_URL": redis.url, "SIMP_HOST": "127.0.0.1"])
        let line = process.waitForLine(timeout: 20) { $0.hasPrefix("simp-server listening") }
        #expect(line?.contains(" node=n7 ") == true)
        process.signal(SIGINT)
        #expect(process.waitForExit(timeout: 10) == 0)
    }

    @Test func metricsEndpointServesPrometheusText() throws {
        let node = try ServerNode(extra: ["--metrics-port", "0"])
        defer { node.stop() }
        let server = node.server
        let text = try httpExchange(port: try server.metricsPort(), path: "/metrics")
        #expect(text.hasPrefix("HTTP/1.1 200 OK"))
        #expect(text.contains("text/plain; version=0.0.4"))
        #expect(text.contains("# TYPE simp_datagrams_received_total counter"))
        #expect(text.contains(#"simp_limit_exceeded_total{limit="messages_per_second"} 0"#))
        #expect(text.contains("simp_sessions 0"))
    }

    @Test func unreachableRedisIsAClearErrorAndExitOne() throws {
        let port = try freeTCPPort()
        let process = try ChildProcess(try productPath("simp-server"),
                                       ["--port", "0", "--redis", "redis://127.0.0.1:\(port)", "--redis-wait", "1"])
        #expect(process.waitForExit(timeout: 15) == 1)
        #expect(process.stderr.contains("Redis at redis://127.0.0.1:\(port)/0 unreachable"))
        #expect(process.stdout.isEmpty)
    }

    @Test func badFlagsAreRefused() throws {
        let process = try ChildProcess(try productPath("simp-server"), ["--redis", "http://nope"])
        #expect(process.waitForExit(timeout: 10) != 0)
        #expect(process.stderr.contains("redis://"))
    }

    @Test func replConversationFromPipesWithBadInput() throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url)
        let bob = try simp(server, ["--user", "bob", "--password", "b", "--register", "--json"])
        #expect(bob.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil)

        let alice = try simp(server, ["--user", "alice", "--password", "a", "--register", "--json", "--linger", "10"])
        alice.write("/frobnicate\n/send\n/send nobody are you there\n/send bob hello bob\n/image bob https://example.org/a.png\n")
        #expect(bob.waitForLine(timeout: 20) { $0.contains("https://example.org/a.png") } != nil)
        alice.closeStdin()
        #expect(alice.waitForExit(timeout: 20) == 0)

        let events = jsonLines(alice.stdout)
        let errors = events.filter { $0["event"] as? String == "error" }.compactMap { $0["message"] as? String }
        #expect(errors == ["unknown command /frobnicate (try /help)", "usage: /send USER TEXT..."])
        let failed = events.filter { $0["event"] as? String == "failed" }
        #expect(failed.count == 1)
        #expect(failed.first?["to"] as? String == "nobody")
        #expect(failed.first?["reason"] as? String == "no such user: nobody")
        #expect(failed.first?["code"] as? String == "UNKNOWN_USER", "a script reads the protocol's code, not the reason")
        #expect(events.filter { $0["event"] as? String == "error" }.allSatisfy { $0["code"] == nil }, "the REPL's own errors have no server code")
        let accepted = events.filter { $0["event"] as? String == "accepted" }.compactMap { $0["id"] as? String }
        let delivered = events.filter { $0["event"] as? String == "delivered" }.compactMap { $0["id"] as? String }
        #expect(accepted.count == 2)
        #expect(Set(delivered) == Set(accepted))

        let received = jsonLines(bob.stdout).filter { $0["event"] as? String == "message" }
        #expect(received.map { $0["id"] as? String } == accepted.map { Optional($0) })
        #expect(received.first?["from"] as? String == "alice")
        #expect(received.first?["text"] as? String == "hello bob")
        #expect(received.last?["imageURL"] as? String == "https://example.org/a.png")
        #expect(received.allSatisfy { $0["seq"] is Int })
        bob.write("/quit\n")
        #expect(bob.waitForExit(timeout: 20) == 0)
    }

    @Test func takenNameAndWrongPasswordExitNonZeroWithAClearError() throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url)
        let first = try simp(server, ["--user", "zed", "--password", "z", "--register", "--linger", "0"])
        first.closeStdin()
        #expect(first.waitForExit(timeout: 20) == 0)
        #expect(first.stdout.contains("connected as zed"))

        let again = try simp(server, ["--user", "zed", "--password", "z", "--register"])
        again.closeStdin()
        #expect(again.waitForExit(timeout: 20) == 1)
        #expect(again.stderr.contains("user zed already exists"))

        let wrong = try simp(server, ["--user", "zed", "--password", "nope", "--json"])
        wrong.closeStdin()
        #expect(wrong.waitForExit(timeout: 20) == 1)
        #expect(wrong.stdout.contains(#""event":"error""#) && wrong.stdout.contains("wrong user name or password"))
    }

    @Test func unreachableServerIsAClearErrorAndExitOne() throws {
        let port = try freeTCPPort()
        let client = try ChildProcess(try productPath("simp"), ["--no-e2e", "--server", "127.0.0.1:\(port)", "--user", "x", "--password", "y"])
        #expect(client.waitForExit(timeout: 20) == 1)
        #expect(client.stderr == "error: cannot reach 127.0.0.1:\(port): connection refused\n")
    }

    @Test func historyFromTheREPL() throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url)
        let bob = try simp(server, ["--user", "bob", "--password", "b", "--register"])
        #expect(bob.waitForLine(timeout: 20) { $0 == "connected as bob" } != nil)
        let alice = try simp(server, ["--user", "alice", "--password", "a", "--register"])
        alice.write("/send bob one\n/send bob two\n")
        #expect(bob.waitForLine(timeout: 20) { $0 == "alice: two" } != nil)
        bob.write("/history alice 5\n/history\n")
        #expect(bob.waitForLine(timeout: 20) { $0 == "alice: one" } != nil)
        bob.closeStdin()
        alice.closeStdin()
        #expect(bob.waitForExit(timeout: 20) == 0)
        #expect(alice.waitForExit(timeout: 20) == 0)
        #expect(bob.stderr.contains("error: usage: /history USER [N]"))
        #expect(alice.stdout.contains("[delivered]"))
    }
}

@Suite(.serialized) struct DeadPeerTests {
    /// The server freezes (SIGSTOP: its sockets stay open, nothing answers). The client
    /// notices within three heartbeat intervals, reconnects once the server runs again, and
    /// the conversation goes on.
    @Test func clientDetectsASilentServerWithinThreeHeartbeats() async throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url, extra: ["--heartbeat", "0.3"])
        var config = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
        config.reconnectBase = .milliseconds(100)
        config.reconnectCap = .milliseconds(300)
        let alice = SIMPClient(configuration: config)
        let log = EventLog(alice)
        try await alice.register(user: "alice", password: "pw")
        try await alice.connect(user: "alice", password: "pw")

        server.process.signal(SIGSTOP)
        let noticed = await log.wait(timeout: .seconds(5)) { log in
            log.all.contains { if case .disconnected = $0 { return true } else { return false } }
        }
        // A stopped process keeps its sockets open: only the heartbeat can notice (HeartbeatTests
        // checks the three intervals on a clock the test moves).
        #expect(noticed)
        server.process.signal(SIGCONT)
        #expect(await log.wait(timeout: .seconds(10)) { log in
            log.all.filter { if case .connected = $0 { return true } else { return false } }.count == 2
        })
        let id = try await alice.send(to: "alice", text: "note to self")
        #expect(await log.wait { $0.delivered == [id] })
        await alice.close()
        server.process.signal(SIGTERM)
        _ = server.process.waitForExit(timeout: 10)
    }
}
