import Foundation
import SIMPClient
import SIMPTestSupport
import Testing
import SIMPServer

/// `simp-admin` against real Redis and simp-server processes, with clients connected through
/// the library: what it lists, what it closes, and what a password reset takes away.
@Suite(.serialized) struct AdminTests {
    func admin(_ node: ServerNode, _ args: [String], stdin: String? = nil) throws -> ChildProcess {
        let process = try ChildProcess(try productPath("simp-admin"), args + ["--redis", node.redis.url])
        if let stdin { process.write(stdin) }
        process.closeStdin()
        return process
    }

    func client(_ node: ServerNode) -> SIMPClient {
        var config = ClientConfiguration(host: "127.0.0.1", port: node.server.tcpPort)
        config.reconnectBase = .milliseconds(50)
        config.reconnectCap = .milliseconds(200)
        return SIMPClient(configuration: config)
    }

    func connected(_ node: ServerNode, _ user: String, password: String? = nil) async throws -> (SIMPClient, EventLog) {
        let client = client(node)
        let log = EventLog(client)
        try await client.connect(user: user, password: password ?? "pw-\(user)")
        return (client, log)
    }

    func register(_ node: ServerNode, _ users: String...) async throws {
        let client = client(node)
        for user in users { try await client.register(user: user, password: "pw-\(user)") }
    }

    /// `sessions --json` until `ready` holds for what it lists.
    func sessions(_ node: ServerNode, until ready: ([[String: Any]]) -> Bool) async throws -> [[String: Any]] {
        let deadline = ContinuousClock.now + .seconds(15)
        var listed: [[String: Any]] = []
        while ContinuousClock.now < deadline {
            let run = try admin(node, ["sessions", "--json"])
            #expect(run.waitForExit(timeout: 10) == 0, "stderr: \(run.stderr)")
            listed = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: Any]]) ?? []
            if ready(listed) { return listed }
            try await Task.sleep(for: .milliseconds(50))
        }
        return listed
    }

    func users(_ listed: [[String: Any]]) -> [String] { listed.compactMap { $0["user"] as? String } }

    @Test func listsSessionsAndClosesOneForGood() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "bob")
        let (alice, _) = try await connected(node, "alice")
        let (bob, bobLog) = try await connected(node, "bob")

        let listed = try await sessions(node) { users($0) == ["alice", "bob"] }
        #expect(users(listed) == ["alice", "bob"])
        #expect(listed.allSatisfy { $0["node"] as? String == "node-1" && ($0["address"] as? String ?? "").hasPrefix("127.0.0.1:") })
        #expect(listed.allSatisfy { $0["nodeAlive"] as? Bool == true })
        let text = try admin(node, ["sessions"])
        #expect(text.waitForExit(timeout: 10) == 0)
        #expect(text.stdout.hasPrefix("USER "), "\(text.stdout)")

        let close = try admin(node, ["disconnect", "bob"])
        #expect(close.waitForExit(timeout: 15) == 0, "stderr: \(close.stderr)")
        #expect(close.stdout.contains("closed session") && close.stdout.contains("of bob's device default on node node-1"))
        #expect(await bobLog.wait { $0.all.contains(.ended(reason: "an administrator closed this session")) })
        // The client's own record: it was told not to come back, and scheduled no reconnect.
        #expect(!bobLog.all.contains { if case .reconnecting = $0 { return true } else { return false } })
        #expect(users(try await sessions(node) { users($0) == ["alice"] }) == ["alice"])

        let again = try admin(node, ["disconnect", "bob"])
        #expect(again.waitForExit(timeout: 15) == 3)
        #expect(again.stderr.contains("bob has no session online"))
        await alice.close()
        await bob.close()
    }

    /// The REPL does not sit there with a dead session: it says so and exits 1.
    @Test func theREPLEndsWhenAnAdministratorClosesItsSession() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "carol")
        let repl = try ChildProcess(try productPath("simp"), ["--no-e2e", "--server", "127.0.0.1:\(node.server.tcpPort)", "--user", "carol",
                                                             "--password", "pw-carol"])
        // Its standard input stays open: only the session's end can stop it.
        #expect(repl.waitForLine(timeout: 20) { $0 == "connected as carol" } != nil, "stderr: \(repl.stderr)")
        _ = try await sessions(node) { users($0) == ["carol"] }
        let close = try admin(node, ["disconnect", "carol"])
        #expect(close.waitForExit(timeout: 15) == 0, "stderr: \(close.stderr)")
        #expect(repl.waitForExit(timeout: 15) == 1)
        #expect(repl.stderr.contains("session ended: an administrator closed this session"), "\(repl.stderr)")
    }

    @Test func showsInboxDepthAndTheDeepestInboxes() async throws {
        let node = try ServerNode(extra: ["--metrics-port", "0"])
        defer { node.stop() }
        try await register(node, "alice", "bob", "carol")
        let (alice, aliceLog) = try await connected(node, "alice")
        for text in ["one", "two", "three"] { _ = try await alice.send(to: "bob", text: text) }
        _ = try await alice.send(to: "carol", text: "hi")
        #expect(await aliceLog.wait { $0.accepted.count == 4 })

        let bob = try admin(node, ["inbox", "bob", "--json"])
        #expect(bob.waitForExit(timeout: 10) == 0, "stderr: \(bob.stderr)")
        let depth = try JSONSerialization.jsonObject(with: Data(bob.stdout.utf8)) as? [String: Any]
        #expect(depth?["unconfirmed"] as? Int == 3)
        #expect(depth?["lastSeq"] as? Int == 3)
        #expect(depth?["confirmedSeq"] as? Int == 0)
        #expect(depth?["oldestSeq"] as? Int == 1)
        #expect(depth?["oldestFrom"] as? String == "alice")

        let top = try admin(node, ["inbox", "--top", "5"])
        #expect(top.waitForExit(timeout: 10) == 0, "stderr: \(top.stderr)")
        let rows = top.stdout.split(separator: "\n").map { $0.split(separator: " ").first.map(String.init) ?? "" }
        #expect(rows == ["USER", "bob", "carol"], "\(top.stdout)")

        // The metric saw the same depths: bob's inbox at 1, 2 and 3, carol's at 1 (one
        // observation per store call, and stores may batch: count the sum, not the calls).
        let metrics = try httpExchange(port: try node.server.metricsPort(), path: "/metrics")
        let observed = metricValue(metrics, "simp_inbox_depth_sum")
        #expect([4.0, 5.0, 6.0, 7.0].contains(observed), "\(metrics)")
        #expect(metricValue(metrics, #"simp_inbox_depth_bucket{le="5.0"}"#) == metricValue(metrics, "simp_inbox_depth_count"))

        let unknown = try admin(node, ["inbox", "nobody"])
        #expect(unknown.waitForExit(timeout: 10) == 3)
        #expect(unknown.stderr == "simp-admin: no user named nobody\n")
        let usage = try admin(node, ["inbox"])
        #expect(usage.waitForExit(timeout: 10) == 2)
        #expect(usage.stderr.contains("give a user or --top N"))
        await alice.close()
    }

    @Test func aPasswordResetEndsTheSessionAndEveryOlderToken() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice")
        let (alice, aliceLog) = try await connected(node, "alice")
        let oldToken = try #require(await alice.loginToken())
        let online = try await sessions(node) { users($0) == ["alice"] }
        #expect(users(online) == ["alice"], "\(online)")

        let reset = try admin(node, ["reset-password", "alice", "--password-stdin"], stdin: "new secret\n")
        #expect(reset.waitForExit(timeout: 20) == 0, "stderr: \(reset.stderr)")
        #expect(reset.stdout == "password of alice reset\n")
        #expect(await aliceLog.wait { $0.all.contains(.ended(reason: "an administrator closed this session")) },
                "\(aliceLog.all)")

        await #expect(throws: ClientError.self) { try await client(node).connect(user: "alice", password: "pw-alice") }
        do {
            try await client(node).connect(user: "alice", token: oldToken)
            Issue.record("the token from before the reset still connects")
        } catch {
            // Neither expired nor revoked: refused because of the reset.
            #expect(error.code == .invalidToken, "\(error.message)")
        }
        let fresh = client(node)
        try await fresh.connect(user: "alice", password: "new secret")
        await fresh.close()
        await alice.close()
    }

    /// Data in the layout from before hash tags is moved, and a server then serves it: bob
    /// logs in with his password and gets the message alice sent before.
    @Test func migrateKeysMovesTheOldLayout() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        var server = try ServerProcess(redisURL: redis.url)
        let before = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: server.tcpPort))
        for user in ["alice", "bob"] { try await before.register(user: user, password: "pw-\(user)") }
        let log = EventLog(before)
        try await before.connect(user: "alice", password: "pw-alice")
        _ = try await before.send(to: "bob", text: "from before")
        #expect(await log.wait { $0.accepted.count == 1 })
        await before.close()
        server.process.signal(SIGTERM)
        _ = server.process.waitForExit(timeout: 10)

        // The old server's names: one key per kind and user, one history per pair.
        _ = try redis.command(["DEL", "simp:{alice}:hist:bob"])
        for (new, old) in [("{alice}:user", "user:alice"), ("{bob}:user", "user:bob"), ("{bob}:seq", "seq:bob"),
                           ("{bob}:inbox", "inbox:bob"), ("{bob}:mids:alice", "mids:bob:alice"),
                           ("{bob}:hist:alice", "hist:alice:bob")] {
            #expect(try redis.command(["RENAME", "simp:\(new)", "simp:\(old)"]) == "+OK\r\n")
        }
        _ = try redis.command(["SET", "simp:loginfail:bob", "3"])

        let run = try ChildProcess(try productPath("simp-admin"), ["migrate-keys", "--redis", redis.url])
        #expect(run.waitForExit(timeout: 20) == 0, "stderr: \(run.stderr)")
        #expect(run.stdout == "renamed 5 keys, split 1 conversation histories, dropped 1 failed-login counters\n", "\(run.stdout)")
        #expect(try redis.command(["EXISTS", "simp:inbox:bob", "simp:hist:alice:bob", "simp:loginfail:bob"]) == ":0\r\n")

        server = try ServerProcess(redisURL: redis.url)
        defer {
            server.process.signal(SIGTERM)
            _ = server.process.waitForExit(timeout: 10)
        }
        let bob = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: server.tcpPort))
        let bobLog = EventLog(bob)
        try await bob.connect(user: "bob", password: "pw-bob")
        #expect(await bobLog.wait { $0.messages.map(\.text) == ["from before"] })
        let alice = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: server.tcpPort))
        try await alice.connect(user: "alice", password: "pw-alice")
        #expect(try await alice.history(with: "bob", limit: 10).map(\.text) == ["from before"])
        await alice.close()
        await bob.close()
    }

    @Test func redisUnreachableIsAClearFailure() throws {
        let run = try ChildProcess(try productPath("simp-admin"), ["sessions", "--redis", "redis://127.0.0.1:1"])
        #expect(run.waitForExit(timeout: 20) == 1)
        #expect(run.stderr.hasPrefix("simp-admin: Redis: 127.0.0.1:1: connection refused"), "\(run.stderr)")
    }
}

/// The admin channel's one line of text, both ways.
struct AdminRequestTests {
    @Test func readsWhatItWrites() {
        for request in [AdminRequest.disconnect(user: "bob", session: nil),
                        .disconnect(user: "bob.x-1", session: UInt64.max),
                        .endDevice(user: "bob", device: "phone", by: "laptop", at: 1_700_000_000_123),
                        .endDevice(user: "bob", device: "phone", by: "laptop", at: nil),
                        .endLogins(user: "bob", why: .password, node: "node-2", connection: 42)] {
            #expect(AdminRequest(request.text) == request)
        }
    }

    /// A revocation carries its time; a node of an earlier version announces none, and its
    /// announcement still ends every login of the device (`AdminRequest.endDevice`).
    @Test func readsARevocationsTimeAndTheEarlierFormWithout() {
        #expect(AdminRequest("end-device bob phone laptop 1700000000123")
                == .endDevice(user: "bob", device: "phone", by: "laptop", at: 1_700_000_000_123))
        #expect(AdminRequest("end-device bob phone laptop") == .endDevice(user: "bob", device: "phone", by: "laptop", at: nil))
    }

    @Test func refusesAnythingElse() {
        for text in ["", "disconnect", "disconnect Bob!", "disconnect bob 12x", "disconnect bob 1 2", "shutdown bob",
                     "end-device bob phone", "end-device bob phone laptop -5", "end-device bob phone laptop +5",
                     "end-device bob phone laptop 12x", "end-device bob phone laptop 99999999999999999999",
                     "end-device bob phone laptop 5 6", "end-device bob Phone laptop 5"] {
            #expect(AdminRequest(text) == nil, "\(text)")
        }
    }
}
