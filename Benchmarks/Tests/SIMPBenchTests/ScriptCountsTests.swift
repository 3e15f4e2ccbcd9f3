#if canImport(Glibc)
import Glibc
#endif
@testable import SIMPBench
import SIMPTestSupport
import Testing

/// Redis' script calls, read from `INFO commandstats`, for the bench's "scripts/msg" row.
@Suite struct ScriptCountsTests {
    @Test func theScriptCommandsLinesAreSummedAndTheOthersLeftOut() {
        let text = """
        # Commandstats\r
        cmdstat_get:calls=5,usec=10,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r
        cmdstat_evalsha:calls=7,usec=700,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r
        cmdstat_eval:calls=2,usec=50,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r
        cmdstat_evalsha_ro:calls=1,usec=4,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r
        cmdstat_zadd:calls=9,usec=18,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r
        """
        #expect(ScriptCounts.parse(text) == ScriptCounts(calls: 10, micros: 754))
    }

    @Test func aRunningRedisIsFoundByItsProcessAndCountsTheScriptsItRan() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let pid = try #require(redis.pid)
        #expect(ScriptCounts.port(redis: pid) == redis.port, "from its process title")
        let before = try #require(ScriptCounts.read(redis: pid))
        for _ in 0..<3 { #expect(redisReply(port: redis.port, ["EVAL", "return 1", "0"]).hasPrefix(":1")) }
        _ = redisReply(port: redis.port, ["SET", "k", "v"])
        let after = try #require(ScriptCounts.read(redis: pid))
        #expect(after.calls - before.calls == 3)
        #expect(after.micros >= before.micros)
    }

    @Test func aProcessThatIsNotRedisHasNoCounts() async {
        #expect(ScriptCounts.read(redis: getpid()) == nil)
    }

    @Test func theUsageOfAWindowGivesScriptsPerMessage() {
        var start = ProcessSample(cpuSeconds: 1, rssBytes: 0)
        start.scripts = ScriptCounts(calls: 10, micros: 1_000)
        var end = ProcessSample(cpuSeconds: 2, rssBytes: 0)
        end.scripts = ScriptCounts(calls: 30, micros: 5_000)
        let usage = ProcessUsage(from: start, to: end, seconds: 1, messages: 10)
        #expect(usage.scriptsPerMessage == 2)
        #expect(usage.microsInScriptsPerMessage == 400)
        #expect(ProcessUsage(from: ProcessSample(cpuSeconds: 1, rssBytes: 0), to: end, seconds: 1, messages: 10).scriptsPerMessage == nil,
                "no figure without counts at both ends")
    }
}
