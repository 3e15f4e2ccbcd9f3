import Foundation
import SIMPClient
import SIMPRedis
import SIMPServer
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// simp-server and simp-admin against a Redis that requires a password: the right one is
/// used on every connection, a wrong or missing one stops the start at once with a clear
/// message, and the password shows nowhere.
@Suite(.serialized) struct RedisAuthServerTests {
    static let password = "pw-Hunter2/@:"

    /// A file holding `content`, removed with its directory when the test process ends.
    func passwordFile(_ content: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-redis-password-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("password").path
        try Data(content.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The server in this process, logged in as an ACL user confined to SIMP's keys and
    /// channels (as docs/OPERATIONS.md suggests): two users talk.
    @Test func aServerWithTheRightPasswordStartsAndDelivers() async throws {
        let redis = try RedisServerProcess(password: Self.password, aclUser: "simp", aclRules: ["~simp:*", "&simp:*", "+@all"])
        var config = ServerConfiguration()
        config.port = 0
        config.udpPort = 0
        config.scryptRounds = 1024
        // The tests' short passwords: the minimum has its own test (LoginAbuseTests).
        config.limits.minPasswordBytes = 1
        config.redisWait = .seconds(5)
        // Plaintext clients below.
        config.endToEnd = .optional
        config.redis = try RedisDeployment(urls: "redis://simp@127.0.0.1:\(redis.port)", cluster: nil)
            .withPassword(file: try passwordFile(Self.password + "\n"), environment: nil)
        let server = SIMPServer(configuration: config)
        let addresses = try await server.start()
        var clientConfig = ClientConfiguration(host: "127.0.0.1", port: addresses.tcpPort)
        clientConfig.requestTimeout = .seconds(5)
        let alice = SIMPClient(configuration: clientConfig)
        let bob = SIMPClient(configuration: clientConfig)
        let aliceLog = EventLog(alice)
        let bobLog = EventLog(bob)
        try await alice.register(user: "alice", password: "pw-alice")
        try await bob.register(user: "bob", password: "pw-bob")
        try await alice.connect(user: "alice", password: "pw-alice")
        try await bob.connect(user: "bob", password: "pw-bob")
        let id = try await alice.send(to: "bob", text: "hello over AUTH")
        #expect(await bobLog.wait(timeout: .seconds(20)) { $0.messages.contains { $0.text == "hello over AUTH" } })
        #expect(await aliceLog.wait(timeout: .seconds(20)) { $0.delivered.contains(id) })
        await alice.disconnect()
        await bob.disconnect()
        await server.stop()
    }

    /// A wrong password, in any of the three places, ends the start long before --redis-wait
    /// (30 s by default): exit status 1, one line that says so, and not the password.
    @Test func aWrongPasswordStopsTheStartAtOnceWithoutShowingIt() throws {
        let redis = try RedisServerProcess(password: Self.password)
        let wrong = "wrong-Secret-9"
        let file = try passwordFile(wrong)
        let ways: [(args: [String], environment: [String: String])] = [
            (["--redis", "redis://:\(wrong)@127.0.0.1:\(redis.port)"], [:]),
            (["--redis", redis.url], ["SIMP_REDIS_PASSWORD": wrong]),
            (["--redis", redis.url, "--redis-password-file", file], [:]),
            (["--redis", "redis://simp:\(wrong)@127.0.0.1:\(redis.port)"], [:]),
        ]
        for way in ways {
            // An hour to wait for Redis: a start that waited like for an outage would not have
            // exited when waitForExit gives up.
            let process = try ChildProcess(try productPath("simp-server"), ["--port", "0", "--udp-port", "0", "--redis-wait", "3600"] + way.args,
                                           environment: way.environment)
            let status = process.waitForExit(timeout: 20)
            #expect(status == 1, "\(way.args): \(process.stderr)")
            #expect(process.stderr.contains("refused") && process.stderr.contains("WRONGPASS"), "\(way.args): \(process.stderr)")
            #expect(process.stderr.contains("127.0.0.1:\(redis.port)"), "\(process.stderr)")
            #expect(!process.stderr.contains(wrong) && !process.stdout.contains(wrong), "\(process.stderr)")
            #expect(process.stdout.isEmpty)
        }
    }

    @Test func noPasswordForARedisThatWantsOneSaysSo() throws {
        let redis = try RedisServerProcess(password: Self.password)
        let process = try ChildProcess(try productPath("simp-server"), ["--port", "0", "--udp-port", "0", "--redis", redis.url])
        #expect(process.waitForExit(timeout: 20) == 1)
        #expect(process.stderr.contains("requires a password") && process.stderr.contains("NOAUTH"), "\(process.stderr)")
    }

    /// The password from a file (trailing newline dropped) or the environment; an ACL user
    /// named in the URL takes its password from either.
    @Test func theRightPasswordFromAFileOrTheEnvironmentStarts() throws {
        let redis = try RedisServerProcess(password: Self.password, aclUser: "simp")
        let user = "redis://simp@127.0.0.1:\(redis.port)"
        let ways: [(args: [String], environment: [String: String])] = [
            (["--redis", user, "--redis-password-file", try passwordFile(Self.password + "\r\n")], [:]),
            (["--redis", user], ["SIMP_REDIS_PASSWORD": Self.password]),
            (["--redis", user], ["SIMP_REDIS_PASSWORD_FILE": try passwordFile(Self.password)]),
            (["--redis", redis.urlWithCredentials, "--metrics-port", "0"], [:]),
        ]
        for (index, way) in ways.enumerated() {
            let server = try ServerProcess(redis: way.args, extra: ["--node-id", "node-\(index)"], environment: way.environment)
            #expect(!server.readyLine.contains(Self.password))
            if way.args.contains("--metrics-port") {
                let ready = try httpExchange(port: try server.metricsPort(), path: "/ready")
                #expect(ready.hasPrefix("HTTP/1.1 200 OK"), "\(ready)")
            }
            server.process.signal(SIGTERM)
            #expect(server.process.waitForExit(timeout: 10) == 0)
            #expect(!server.process.stderr.contains(Self.password))
        }
    }

    /// Two sources of a password at once, or an unusable file, are refused before Redis is
    /// asked; `--print-config` shows where the password comes from, as ***.
    @Test func ambiguousOrUnusablePasswordSettingsAreRefused() throws {
        let file = try passwordFile(Self.password)
        let cases: [(args: [String], environment: [String: String], says: String)] = [
            (["--redis", "redis://:other-pw@127.0.0.1:1"], ["SIMP_REDIS_PASSWORD": Self.password], "give only one"),
            (["--redis-password-file", file], ["SIMP_REDIS_PASSWORD": Self.password], "give only one"),
            (["--redis", "redis://:other-pw@127.0.0.1:1", "--redis-password-file", file], [:], "give only one"),
            (["--redis-password-file", "/nonexistent/pw"], [:], "cannot read the Redis password file /nonexistent/pw"),
            (["--redis-password-file", try passwordFile("\n")], [:], "is empty"),
            (["--redis", "redis://simp@127.0.0.1:1"], [:], "names a user but gives no password"),
        ]
        for (args, environment, says) in cases {
            let process = try ChildProcess(try productPath("simp-server"), ["--port", "0", "--redis-wait", "1"] + args, environment: environment)
            #expect(process.waitForExit(timeout: 20) == 1, "\(args)")
            #expect(process.stderr.contains(says), "\(args): \(process.stderr)")
            #expect(!process.stderr.contains(Self.password) && !process.stderr.contains("other-pw"), "\(process.stderr)")
        }
        let shown = try ChildProcess(try productPath("simp-server"), ["--print-config", "--redis-password-file", file,
                                                                     "--redis", "redis://simp@10.0.0.5:6379"])
        #expect(shown.waitForExit(timeout: 10) == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("redis-password-file = \(file)  (flag)"), "\(shown.stdout)")
        #expect(shown.stdout.contains("redis = redis://simp@10.0.0.5:6379  (flag)"), "\(shown.stdout)")
        #expect(!shown.stdout.contains(Self.password))
    }

    /// simp-admin takes the password the same ways.
    @Test func simpAdminLogsInWithThePassword() throws {
        let redis = try RedisServerProcess(password: Self.password)
        let admin = try productPath("simp-admin")
        let fromFile = try ChildProcess(admin, ["sessions", "--redis", redis.url, "--redis-password-file", try passwordFile(Self.password + "\n")])
        #expect(fromFile.waitForExit(timeout: 20) == 0, "\(fromFile.stderr)")
        #expect(fromFile.stdout.contains("no sessions"))
        let fromEnvironment = try ChildProcess(admin, ["sessions", "--json", "--redis", redis.url], environment: ["SIMP_REDIS_PASSWORD": Self.password])
        #expect(fromEnvironment.waitForExit(timeout: 20) == 0, "\(fromEnvironment.stderr)")
        #expect(fromEnvironment.stdout.hasPrefix("["), "\(fromEnvironment.stdout)")
        let wrong = try ChildProcess(admin, ["sessions", "--redis", "redis://:wrong-Secret-9@127.0.0.1:\(redis.port)"])
        #expect(wrong.waitForExit(timeout: 20) == 1)
        #expect(wrong.stderr.contains("refused the password") && !wrong.stderr.contains("wrong-Secret-9"), "\(wrong.stderr)")
    }

    /// Three simp-server-to-Redis paths log in on a cluster: the pool (to every master it
    /// learns of), the sharded subscriptions and the start's probe.
    @Test func aServerOnAClusterWithAPassword() throws {
        let cluster = try RedisClusterProcess(password: Self.password)
        let seeds = cluster.ports.map { "redis://127.0.0.1:\($0)" }.joined(separator: ",")
        let server = try ServerProcess(redis: ["--redis", seeds, "--redis-cluster"], environment: ["SIMP_REDIS_PASSWORD": Self.password])
        let admin = try ChildProcess(try productPath("simp-admin"), ["sessions", "--redis", seeds],
                                     environment: ["SIMP_REDIS_PASSWORD": Self.password])
        #expect(admin.waitForExit(timeout: 20) == 0, "\(admin.stderr)")
        server.process.signal(SIGTERM)
        #expect(server.process.waitForExit(timeout: 10) == 0)
        let wrong = try ChildProcess(try productPath("simp-server"), ["--port", "0", "--redis", seeds, "--redis-cluster"],
                                     environment: ["SIMP_REDIS_PASSWORD": "wrong-Secret-9"])
        #expect(wrong.waitForExit(timeout: 20) == 1)
        #expect(wrong.stderr.contains("refused the password") && !wrong.stderr.contains("wrong-Secret-9"), "\(wrong.stderr)")
    }
}
