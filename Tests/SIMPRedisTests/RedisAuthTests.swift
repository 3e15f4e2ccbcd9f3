import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
@testable import SIMPRedis
import SIMPTestSupport
import Testing

/// The password never shows: not in `url`, `description`, nor any error.
private let secret = "s3cret/p@ss:w%rd"
private let secretInURL = "s3cret%2Fp%40ss%3Aw%25rd"

@Suite struct RedisURLCredentialsTests {
    @Test func aPasswordOnlyURLLogsInAsTheDefaultUser() throws {
        let c = try RedisConfiguration(url: "redis://:\(secretInURL)@cache:6380/2")
        #expect(c.host == "cache" && c.port == 6380 && c.database == 2)
        #expect(c.user == nil && c.password == secret)
        #expect(c.authentication?.arguments == [Array("AUTH".utf8), Array(secret.utf8)])
        #expect(c.url == "redis://:***@cache:6380/2")
        #expect("\(c)" == c.url && String(reflecting: c) == c.url)
    }

    @Test func aUserAndPasswordURLLogsInAsThatACLUser() throws {
        let c = try RedisConfiguration(url: "redis://simp%2Dnode:\(secretInURL)@10.0.0.5")
        #expect(c.user == "simp-node" && c.password == secret && c.port == 6379 && c.database == 0)
        #expect(c.authentication?.arguments == [Array("AUTH".utf8), Array("simp-node".utf8), Array(secret.utf8)])
        #expect(c.url == "redis://simp-node:***@10.0.0.5:6379/0")
    }

    /// An unencoded @, / or : in the password still parses: the host follows the last @.
    @Test func anUnencodedPasswordStillParses() throws {
        let c = try RedisConfiguration(url: "redis://u:s3cret/p@ss:word@cache:6380/1")
        #expect(c.user == "u" && c.password == "s3cret/p@ss:word" && c.host == "cache" && c.port == 6380 && c.database == 1)
        #expect(c.url == "redis://u:***@cache:6380/1")
    }

    @Test func aUserWithoutAPasswordWaitsForOne() throws {
        let c = try RedisConfiguration(url: "redis://simp@cache")
        #expect(c.user == "simp" && c.password == nil && c.authentication == nil)
        #expect(c.url == "redis://simp@cache:6379/0")
        #expect(throws: RedisError.self) { try c.checkLogin() }
        let given = try c.withPassword(secret)
        #expect(given.password == secret && given.user == "simp")
        try given.checkLogin()
        #expect(try RedisConfiguration(url: "redis://cache").authentication == nil)
        #expect(try RedisConfiguration(url: "redis://:@cache").password == nil)
    }

    @Test(arguments: ["redis://:\(secret)@cache:99999", "redis://:\(secret)@cache:1/x", "redis://:\(secret)@:1",
                      "http://:\(secret)@cache", "redis://:\(secretInURL)%zz@cache", "redis://u%4:\(secret)@cache"])
    func errorsNeverRepeatThePassword(url: String) {
        do {
            _ = try RedisConfiguration(url: url)
            Issue.record("\(url) was accepted")
        } catch {
            #expect(!error.message.contains("s3cret") && !error.description.contains("s3cret"), "\(error)")
        }
    }

    @Test func maskingHidesEveryPasswordOfAList() {
        #expect(RedisConfiguration.masked("redis://:\(secret)@a:1,redis://u:\(secret)@b:2/0,c:3,redis://u@d")
                == "redis://:***@a:1,redis://u:***@b:2/0,c:3,redis://u@d")
        #expect(RedisConfiguration.masked("redis://a:1") == "redis://a:1")
    }

    @Test func passwordsTellConfigurationsApart() throws {
        #expect(try RedisConfiguration(url: "redis://:a@h") != RedisConfiguration(url: "redis://:b@h"))
        #expect(try RedisConfiguration(url: "redis://u:a@h") != RedisConfiguration(url: "redis://:a@h"))
        #expect(try RedisConfiguration(url: "redis://:a@h") == RedisConfiguration(url: "redis://:a@h:6379/0"))
    }

    /// One cluster, one login: given on one seed it goes to all; two different ones are refused.
    @Test func clusterSeedsShareOneLogin() throws {
        let seeds = try RedisConfiguration.clusterSeeds("redis://u:\(secretInURL)@a:7000,b:7001")
        #expect(seeds.map(\.user) == ["u", "u"] && seeds.map(\.password) == [secret, secret])
        do {
            _ = try RedisConfiguration.clusterSeeds("redis://:\(secretInURL)@a:7000,redis://:other@b:7001")
            Issue.record("different passwords accepted")
        } catch {
            #expect(error.message.contains("share one login") && !error.message.contains("s3cret"))
        }
    }

    /// A password from a file or the environment beside one in the URL is refused.
    @Test func twoPasswordsAreRefused() throws {
        let deployment = try RedisDeployment(urls: "redis://:\(secretInURL)@cache", cluster: nil)
        do {
            _ = try deployment.withPassword("other")
            Issue.record("two passwords accepted")
        } catch {
            #expect(error.message.contains("give only one") && !error.message.contains("s3cret"))
        }
        let cluster = try RedisDeployment(urls: "redis://a:1,redis://b:2", cluster: nil).withPassword(secret)
        #expect(cluster.nodes.allSatisfy { $0.password == secret })
        #expect(!cluster.description.contains("s3cret") && !deployment.description.contains("s3cret"))
    }
}

/// Against real redis-server processes that require a password.
@Suite(.serialized) struct RedisAuthTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()

    func expectRefused(_ configuration: RedisConfiguration, saying words: [String]) async {
        let pool = RedisPool(configuration: configuration)
        defer { Task { await pool.shutdown() } }
        do {
            _ = try await pool.run(RedisCommand("PING"))
            Issue.record("\(configuration) was let in")
        } catch {
            #expect(error.kind == .protocolViolation && !error.mayHaveRun, "\(error)")
            for word in words { #expect(error.message.contains(word), "\(error.message)") }
            #expect(!error.message.contains("s3cret") && !error.message.contains("wrong-one"), "\(error.message)")
        }
    }

    @Test func requirepassWithTheRightPasswordWrongOneAndNone() async throws {
        let redis = try RedisServerProcess(password: secret)
        let right = try RedisConfiguration(url: redis.urlWithCredentials)
        let pool = RedisPool(configuration: right)
        _ = try await pool.run(RedisCommand("SET", ["k", "v"]))
        #expect(try await pool.run(RedisCommand("GET", ["k"])).string == "v")
        // AUTH before SELECT: a database other than 0 works too.
        var two = right
        two.database = 2
        let other = RedisPool(configuration: two)
        #expect(try await other.run(RedisCommand("GET", ["k"])) == .null)
        _ = try await other.run(RedisCommand("SET", ["k", "two"]))
        #expect(try await pool.run(RedisCommand("GET", ["k"])).string == "v")
        // A connection replaced after Redis restarts logs in again.
        try redis.restart()
        var answered = false
        for _ in 0..<50 where !answered {
            answered = (try? await pool.run(RedisCommand("GET", ["k"])).string) == "v"
            if !answered { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(answered)
        await pool.shutdown()
        await other.shutdown()

        var wrong = right
        wrong.password = "wrong-one"
        await expectRefused(wrong, saying: ["refused the password", "WRONGPASS", "127.0.0.1:\(redis.port)"])
        await expectRefused(RedisConfiguration(port: redis.port), saying: ["requires a password", "NOAUTH"])
    }

    /// The ACL user logs in; its wrong password and the (disabled) default user are refused.
    @Test func anACLUser() async throws {
        let redis = try RedisServerProcess(password: secret, aclUser: "simp")
        let pool = RedisPool(configuration: try RedisConfiguration(url: redis.urlWithCredentials))
        _ = try await pool.run(RedisCommand("SET", ["k", "v"]))
        #expect(try await pool.run(RedisCommand("ACL", ["WHOAMI"])).string == "simp")
        await pool.shutdown()
        await expectRefused(RedisConfiguration(port: redis.port, user: "simp", password: "wrong-one"),
                            saying: ["refused user simp or its password", "WRONGPASS"])
        await expectRefused(RedisConfiguration(port: redis.port, password: secret), saying: ["refused the password"])
        await expectRefused(RedisConfiguration(port: redis.port), saying: ["requires a password"])
        await expectRefused(RedisConfiguration(port: redis.port, user: "simp"), saying: ["names a user but gives no password"])
    }

    /// A deployment given as one address asks it whether it is a cluster: logged in too.
    @Test func detectingTheKindLogsIn() async throws {
        let redis = try RedisServerProcess(password: secret)
        let resolved = try await RedisDeployment(urls: redis.url, cluster: nil).withPassword(secret).resolved()
        guard case .single(let configuration) = resolved else { throw TestSupportError("not single: \(resolved)") }
        #expect(configuration.password == secret)
        do {
            _ = try await RedisDeployment(urls: redis.url, cluster: nil).withPassword("wrong-one").resolved()
            Issue.record("a wrong password resolved")
        } catch {
            #expect(error.message.contains("refused the password") && !error.message.contains("wrong-one"))
        }
    }

    final class Inbox: Sendable {
        private let received = NIOLockedValueBox<[String]>([])
        func add(_ channel: String, _ payload: [UInt8]) {
            received.withLockedValue { $0.append("\(channel) \(String(decoding: payload, as: UTF8.self))") }
        }
        var all: [String] { received.withLockedValue { $0 } }
    }

    @Test func theSubscriberLogsInAndARefusalEndsTheWaitForIt() async throws {
        let redis = try RedisServerProcess(password: secret, aclUser: "simp")
        let configuration = try RedisConfiguration(url: redis.urlWithCredentials)
        let pool = RedisPool(configuration: configuration)
        let inbox = Inbox()
        let subscriber = RedisSubscriber(configuration: configuration, channels: ["a"], loop: loop, onMessage: inbox.add)
        subscriber.start()
        try await subscriber.subscribed.get()
        #expect(try await pool.run(RedisCommand("PUBLISH", ["a", "one"])).int == 1)
        let deadline = ContinuousClock.now + .seconds(10)
        while inbox.all.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(inbox.all == ["a one"])
        try await subscriber.stop().get()

        for refused in [RedisConfiguration(port: redis.port, user: "simp", password: "wrong-one"), RedisConfiguration(port: redis.port)] {
            let denied = RedisSubscriber(configuration: refused, channels: ["a"], loop: loop) { _, _ in }
            denied.start()
            do {
                try await denied.subscribed.get()
                Issue.record("subscribed with \(refused)")
            } catch let error as RedisError {
                #expect(error.message.contains("refused user simp") || error.message.contains("requires a password"), "\(error)")
                #expect(!error.message.contains("wrong-one"))
            }
            try? await denied.stop().get()
        }
        await pool.shutdown()
    }

    /// Every node of a cluster takes the seeds' password, including those learnt from CLUSTER
    /// SLOTS and reached after a redirect.
    @Test func aClusterWithAPassword() async throws {
        let cluster = try RedisClusterProcess(password: secret)
        let seeds = try RedisConfiguration.clusterSeeds(cluster.ports.prefix(2).map { "redis://:\(secretInURL)@127.0.0.1:\($0)" }.joined(separator: ","))
        let pool = RedisClusterPool(seeds: seeds)
        let keys = (0..<30).map { "key:\($0)" }
        #expect(Set(keys.compactMap { cluster.masterPort(forSlot: RedisCluster.hashSlot($0)) }).count == 3)
        let replies = try await pool.run(keys.map { RedisCommand("SET", [$0, $0]) } + keys.map { RedisCommand("GET", [$0]) })
        #expect(replies.suffix(keys.count).map(\.string) == keys)
        // Sharded pub/sub on the slot's master, located through the pool, with the same login.
        let inbox = Inbox()
        let channel = "simp:to-node:n1"
        let subscriber = RedisSubscriber(shardedChannels: [channel], locate: { loop in
            pool.master(forKey: channel, on: loop).map { node in
                var configuration = seeds[0]
                configuration.host = node.host
                configuration.port = node.port
                return configuration
            }
        }, loop: loop, onMessage: inbox.add)
        subscriber.start()
        try await subscriber.subscribed.get()
        _ = try await pool.run(RedisCommand("SPUBLISH", [channel, "hi"]))
        let deadline = ContinuousClock.now + .seconds(10)
        while inbox.all.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(inbox.all == ["\(channel) hi"])
        try await subscriber.stop().get()
        await pool.shutdown()

        var wrong = seeds[0]
        wrong.password = "wrong-one"
        let refused = RedisClusterPool(seeds: [wrong])
        do {
            _ = try await refused.run(RedisCommand("GET", ["key:1"]))
            Issue.record("a wrong cluster password was let in")
        } catch {
            #expect(error.kind == .protocolViolation && error.message.contains("refused the password"), "\(error)")
            #expect(!error.message.contains("wrong-one") && !error.message.contains("s3cret"))
        }
        await refused.shutdown()
    }
}
