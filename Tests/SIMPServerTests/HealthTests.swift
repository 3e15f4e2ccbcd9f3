import Foundation
import SIMPServer
import SIMPTestSupport
import Testing
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif

/// /health and /ready on the metrics port, as a load balancer or systemd watchdog sees them
/// while Redis comes and goes.
@Suite(.serialized) struct HealthTests {
    struct Response {
        let status: Int
        let body: String
    }

    /// One GET over a fresh connection (Connection: close), read until the server closes.
    func get(_ path: String, port: Int, method: String = "GET") throws -> Response {
        let text = try httpExchange(port: port, path: path, method: method)
        guard let statusLine = text.split(separator: "\r\n").first,
              let status = Int(statusLine.split(separator: " ").dropFirst().first ?? ""),
              let split = text.range(of: "\r\n\r\n") else {
            throw TestSupportError("not an HTTP response to \(path): \(text.debugDescription)")
        }
        return Response(status: status, body: String(text[split.upperBound...]))
    }

    /// Asks `path` until the status is `status`; the last response either way.
    func poll(_ path: String, port: Int, until status: Int, timeout: Duration = .seconds(15)) async throws -> Response {
        let deadline = ContinuousClock.now + timeout
        var last = try get(path, port: port)
        while last.status != status, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            last = try get(path, port: port)
        }
        return last
    }

    func cluster() async throws -> (TestCluster, Int) {
        let cluster = try await TestCluster.start { $0.metricsPort = 0 }
        guard let port = cluster.addresses.metricsPort else { throw TestSupportError("no metrics port") }
        return (cluster, port)
    }

    @Test func readyFollowsRedisWhileHealthStaysOK() async throws {
        let (cluster, port) = try await cluster()

        let health = try get("/health", port: port)
        #expect(health.status == 200 && health.body == "ok\n")
        let ready = try get("/ready", port: port)
        #expect(ready.status == 200 && ready.body == "ready\n")

        cluster.redis.stop()
        let down = try await poll("/ready", port: port, until: 503)
        #expect(down.status == 503)
        #expect(down.body.hasPrefix("redis: ") && down.body.contains("connection refused"), "reason: \(down.body)")
        #expect(down.body.split(separator: "\n").count == 1, "one line: \(down.body)")
        #expect(try get("/health", port: port).status == 200, "alive while Redis is down")

        try cluster.redis.start()
        let back = try await poll("/ready", port: port, until: 200)
        #expect(back.status == 200, "ready again after Redis returned: \(back.body)")
        await cluster.stop()
    }

    /// CLIENT PAUSE holds every command, PING too, as a Redis stuck on a slow script or disk
    /// would; /ready gives up after its 1 s deadline and /health is not held up meanwhile.
    @Test func redisThatDoesNotAnswerMakesTheNodeNotReady() async throws {
        let (cluster, port) = try await cluster()
        #expect(try get("/ready", port: port).status == 200)
        // Shorter than the pool's 2 s command timeout, so the connection survives the pause.
        #expect(try cluster.redis.command(["CLIENT", "PAUSE", "1600", "ALL"]).hasPrefix("+OK"))
        let readyDone = NIOLockedValueBox(false)
        let ready = Task.detached {
            defer { readyDone.withLockedValue { $0 = true } }
            return try get("/ready", port: port)
        }
        // Asked while /ready waits on the paused Redis, and answered before it: it waits for nothing.
        #expect(try get("/health", port: port).status == 200)
        #expect(!readyDone.withLockedValue { $0 }, "health was answered while /ready still waited")
        let paused = try await ready.value
        #expect(paused.status == 503)
        #expect(paused.body == "redis: no answer to PING within 1000 ms\n", "answered at its deadline, and says so")
        let back = try await poll("/ready", port: port, until: 200)
        #expect(back.status == 200, "ready after the pause: \(back.body)")
        await cluster.stop()
    }

    @Test func unknownPathsAndOtherMethodsAreRefused() async throws {
        let (cluster, port) = try await cluster()
        #expect(try get("/", port: port).status == 404)
        #expect(try get("/healthz", port: port).status == 404)
        #expect(try get("/ready", port: port, method: "POST").status == 405)
        #expect(try get("/metrics", port: port).status == 200)
        await cluster.stop()
    }
}

/// simp_redis_round_trip_seconds: every answered batch of Redis commands is timed.
@Suite(.serialized) struct RedisRoundTripMetricTests {
    func count(_ cluster: TestCluster) -> Double {
        metricValue(cluster.server.metricsText(), "simp_redis_round_trip_seconds_count")
    }

    @Test func histogramCountsEveryBatchOfTraffic() async throws {
        let cluster = try await TestCluster.start()
        // Start-up already asked Redis (the shared secret).
        let atStart = count(cluster)
        #expect(atStart > 0)
        let (alice, _) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        for i in 0..<20 { _ = try await alice.send(to: "bob", text: "hello \(i)") }
        #expect(await bobLog.wait { $0.messages.count == 20 })
        let afterTraffic = count(cluster)
        // Two registrations and two logins made a batch each at least; the twenty stores made
        // some more (the router pipelines stores that wait together into one batch).
        #expect(afterTraffic >= atStart + 5, "count went from \(atStart) to \(afterTraffic)")
        let text = cluster.server.metricsText()
        #expect(text.contains("# TYPE simp_redis_round_trip_seconds histogram"))
        #expect(metricValue(text, "simp_redis_round_trip_seconds_sum") > 0)
        let total = metricValue(text, "simp_redis_round_trip_seconds_count")
        #expect(metricValue(text, #"simp_redis_round_trip_seconds_bucket{le="+Inf"}"#) == total)
        // Buckets are cumulative: each finite one counts no more than the next. (How many fall
        // in which bucket is the machine's speed, not something to assert.)
        #expect(text.contains(#"simp_redis_round_trip_seconds_bucket{le="0.025"} "#))
        #expect(metricValue(text, #"simp_redis_round_trip_seconds_bucket{le="0.025"}"#) <= total)
        await alice.disconnect()
        await bob.disconnect()
        await cluster.stop()
    }
}
