import NIOCore
import NIOPosix
import SIMPRedis
import SIMPTestSupport
import Testing

@Suite(.serialized) struct RedisPoolTests {
    let server: RedisServerProcess
    let pool: RedisPool

    init() throws {
        server = try RedisServerProcess()
        pool = RedisPool(configuration: RedisConfiguration(port: server.port, commandTimeout: .seconds(2)))
    }

    @Test func setAndGetBinarySafeValues() async throws {
        let value: [UInt8] = [0, 1, 2, 0xFF, 0x0D, 0x0A]
        _ = try await pool.run(RedisCommand("SET", ["k", value]))
        #expect(try await pool.run(RedisCommand("GET", ["k"])) == .bulk(value))
        #expect(try await pool.run(RedisCommand("GET", ["missing"])) == .null)
        await pool.shutdown()
    }

    /// A command can carry the run id of the Redis that runs it; a restarted Redis has a new one.
    @Test func theRunIDArgumentIsTheRedisThatRunsTheCommand() async throws {
        var echo = RedisCommand("ECHO", ["placeholder"])
        echo.runIDArgument = 1
        let first = try await pool.run(echo).string
        let info = try await pool.run(RedisCommand("INFO", ["server"])).string ?? ""
        #expect(first != nil && info.contains("run_id:\(first!)"))
        try server.restart()
        _ = try? await pool.run(RedisCommand("PING"))
        let second = try await pool.run(echo).string
        #expect(second != nil && second != first)
        await pool.shutdown()
    }

    @Test func pipelineReturnsRepliesInOrder() async throws {
        let commands = (0..<1000).map { _ in RedisCommand("INCR", ["counter"]) }
        let replies = try await pool.run(commands)
        #expect(replies.map { $0.int } == (1...1000).map { Int64?(Int64($0)) })
        await pool.shutdown()
    }

    /// Requests made on one loop are all in flight at once on its connection, and run in Redis
    /// in the order they were made.
    @Test func requestsFromOneLoopRunInTheOrderTheyWereMade() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let futures = try await loop.submit {
            (0..<200).map { _ in pool.run([RedisCommand("INCR", ["ordered"])], on: loop) }
        }.get()
        var values: [Int64] = []
        for future in futures { values.append(try await future.get()[0].int ?? -1) }
        #expect(values == (1...200).map { Int64($0) })
        await pool.shutdown()
    }

    @Test func errorReplyCarriesRedisMessageAndSparesTheRest() async throws {
        _ = try await pool.run(RedisCommand("SET", ["s", "text"]))
        let replies = try await pool.run([RedisCommand("INCR", ["s"]), RedisCommand("GET", ["s"])])
        guard case .error(let message) = replies[0] else { Issue.record("no error reply"); return }
        #expect(message.contains("not an integer"))
        #expect(replies[1].string == "text")
        do {
            _ = try await pool.run(RedisCommand("INCR", ["s"]))
            Issue.record("no throw")
        } catch {
            #expect(error.kind == .server)
            #expect(error.message.contains("not an integer"))
        }
        await pool.shutdown()
    }

    @Test func scriptsRunAndSurviveAScriptFlush() async throws {
        let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        #expect(try await pool.run(.script(script, keys: ["n"], args: [5])).int == 5)
        _ = try await pool.run(RedisCommand("SCRIPT", ["FLUSH"]))
        #expect(try await pool.run(.script(script, keys: ["n"], args: [2])).int == 7)
        await pool.shutdown()
    }

    /// A restarted Redis has forgotten every script: the new connection loads the scripts used
    /// so far before any call, so none meets NOSCRIPT (whose retry would run after the calls
    /// pipelined behind it) and calls made together still run in the order they were made.
    @Test func aRestartedRedisGetsItsScriptsBeforeAnyCall() async throws {
        let script = RedisScript("return redis.call('RPUSH', KEYS[1], ARGV[1])")
        _ = try await pool.run(.script(script, keys: ["order"], args: [0]))
        server.stop()
        try server.start()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let futures = try await loop.submit {
            (1...50).map { i in pool.run([.script(script, keys: ["order"], args: [i])], on: loop) }
        }.get()
        for future in futures { _ = try await future.get() }
        let order = try await pool.run(RedisCommand("LRANGE", ["order", 0, -1])).array?.compactMap(\.string)
        #expect(order == (0...50).map(String.init))
        let errors = try await pool.run(RedisCommand("INFO", ["errorstats"])).string ?? ""
        #expect(!errors.contains("NOSCRIPT"), "\(errors)")
        await pool.shutdown()
    }

    @Test func futureAPICompletesOnTheCallersLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let inLoop = try await pool.run([RedisCommand("PING")], on: loop).map { _ in loop.inEventLoop }.get()
        #expect(inLoop)
        await pool.shutdown()
        try await group.shutdownGracefully()
    }

    @Test func outageIsAnErrorNotAHangAndServiceResumesAfterRestart() async throws {
        _ = try await pool.run(RedisCommand("SET", ["durable", "yes"]))
        server.stop()
        do {
            _ = try await pool.run(RedisCommand("GET", ["durable"]))
            Issue.record("no error while Redis is down")
        } catch {
            #expect(error.isUnavailable)
            // Refused at once, not waited out: the command timeout is another kind.
            #expect(error.kind != .timeout, "\(error)")
        }
        try server.start()
        #expect(try await pool.run(RedisCommand("GET", ["durable"])).string == "yes")
        await pool.shutdown()
    }

    @Test func slowRedisTimesOutWithATypedErrorAndThePoolRecovers() async throws {
        let impatient = RedisPool(configuration: RedisConfiguration(port: server.port, commandTimeout: .milliseconds(300)))
        // Paused past the timeout: the timeout ends the wait (RedisDeadlineTests checks when,
        // on a clock the test moves).
        _ = try await pool.run(RedisCommand("CLIENT", ["PAUSE", 1000]))
        do {
            _ = try await impatient.run(RedisCommand("GET", ["k"]))
            Issue.record("no timeout")
        } catch {
            #expect(error.kind == .timeout)
            #expect(error.isUnavailable)
            #expect(error.message == "no answer from Redis within 300 ms")
        }
        // The patient pool's PING is answered when the pause ends (CLIENT UNPAUSE would wait
        // for it too); then the impatient pool works again, on a new connection.
        #expect(try await pool.run(RedisCommand("PING")) == .status("PONG"))
        #expect(try await impatient.run(RedisCommand("PING")) == .status("PONG"))
        await impatient.shutdown()
        await pool.shutdown()
    }

    /// A standalone Redis has no replica: WAIT for one fails after its timeout, the write done.
    @Test func waitingForReplicasThatAreNotThereIsAClearError() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let none = try await pool.run([RedisCommand("SET", ["w", "0"])], on: loop, waitingFor: RedisReplicaWait(replicas: 0, timeout: .milliseconds(100))).get()
        #expect(none == [.status("OK")])
        do {
            _ = try await pool.run([RedisCommand("SET", ["w", "1"])], on: loop, waitingFor: RedisReplicaWait(replicas: 1, timeout: .milliseconds(100))).get()
            Issue.record("WAIT for a missing replica succeeded")
        } catch let error as RedisError {
            #expect(error.kind == .notReady && error.mayHaveRun)
            #expect(error.message.contains("0 of 1 replicas"), "\(error)")
        }
        #expect(try await pool.run(RedisCommand("GET", ["w"])).string == "1")
        await pool.shutdown()
    }

    @Test func manyConcurrentCallersShareThePool() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<50 {
                group.addTask { _ = try await pool.run(RedisCommand("SADD", ["set", i])) }
            }
            try await group.waitForAll()
        }
        #expect(try await pool.run(RedisCommand("SCARD", ["set"])).int == 50)
        await pool.shutdown()
    }

    @Test func afterShutdownCallsFailClearly() async throws {
        await pool.shutdown()
        await #expect(throws: RedisError.self) { try await pool.run(RedisCommand("PING")) }
    }
}

@Suite struct RedisConfigurationTests {
    @Test func parsesURLs() throws {
        let c = try RedisConfiguration(url: "redis://example:6400/3")
        #expect(c.host == "example" && c.port == 6400 && c.database == 3)
        let d = try RedisConfiguration(url: "redis://127.0.0.1")
        #expect(d.port == 6379 && d.database == 0)
    }

    @Test func parsesClusterSeeds() throws {
        let seeds = try RedisConfiguration.clusterSeeds("redis://a:7000, redis://b:7001/0,")
        #expect(seeds.map(\.host) == ["a", "b"] && seeds.map(\.port) == [7000, 7001])
        #expect(throws: RedisError.self) { try RedisConfiguration.clusterSeeds("redis://a:7000/2") }
        #expect(throws: RedisError.self) { try RedisConfiguration.clusterSeeds(" , ") }
    }

    @Test(arguments: ["http://x:1", "redis://:80", "redis://h:99999", "redis://h:1/x"])
    func rejectsBadURLs(url: String) {
        #expect(throws: RedisError.self) { try RedisConfiguration(url: url) }
    }
}

@Suite struct RedisErrorTests {
    @Test func temporaryRepliesCountAsUnavailable() {
        #expect(RedisError.reply("LOADING Redis is loading the dataset in memory").kind == .notReady)
        #expect(RedisError.reply("BUSY Redis is busy running a script").isUnavailable)
        #expect(RedisError.reply("ERR wrong number of arguments").kind == .server)
        #expect(!RedisError.reply("WRONGTYPE Operation against a key").isUnavailable)
        #expect(RedisError.reply("CLUSTERDOWN The cluster is down").kind == .notReady)
    }
}
