import NIOCore
import NIOPosix
import SIMPRedis
@testable import SIMPServer

extension TestCluster {
    /// Polls until nothing more can reach `user`: everything stored for them is confirmed
    /// (their seq is their confirmed mark, in Redis) and the server has no push to them
    /// unconfirmed (`GET /sessions`' in-flight bytes). A message stored twice would have been
    /// confirmed, so shown, by then, and only an unconfirmed push is sent again: a check of
    /// "exactly once" made after this holds for good, with no sleep. False on timeout.
    func settled(_ user: String, timeout: Duration = .seconds(30)) async -> Bool {
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let keys = Keys(prefix: server.configuration.namespace)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let marks = try? await pool.run([RedisCommand("MGET", [keys.seq(user), keys.deliveredMark(user)])], on: loop).get().first?.array,
               marks.count == 2, marks[0].string == marks[1].string,
               let report = try? await server.router?.pathReport().get(), Self.nothingInFlight(to: user, report) {
                await pool.shutdown()
                return true
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        await pool.shutdown()
        return false
    }

    /// Whether every session of `user` in a `GET /sessions` report has no bytes in flight.
    static func nothingInFlight(to user: String, _ report: String) -> Bool {
        report.split(separator: "\n").dropFirst().allSatisfy { line in
            let fields = line.split(separator: " ")
            return fields.first.map(String.init) != user || (fields.count > 4 && fields[4] == "0")
        }
    }

    /// Polls until the server has no session (after their connections closed). False on timeout.
    func sessionsEnd(timeout: Duration = .seconds(30)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if await server.sessionCount() == 0 { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return await server.sessionCount() == 0
    }

    /// Datagrams the server dropped before anything acted on them, for every reason.
    func droppedDatagrams() -> Double {
        server.metricsText().split(separator: "\n").filter { $0.hasPrefix("simp_datagrams_dropped_total{") }
            .reduce(0) { $0 + (Double($1.split(separator: " ").last ?? "") ?? 0) }
    }

    /// Whether logins to `user` are locked now, from every address (`LoginThrottle`'s name lock).
    func nameLocked(_ user: String) async -> Bool {
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let key = Keys(prefix: server.configuration.namespace).loginLock(user)
        let exists = try? await pool.run([RedisCommand("EXISTS", [key])], on: loop).get().first?.int
        await pool.shutdown()
        return exists == 1
    }
}
