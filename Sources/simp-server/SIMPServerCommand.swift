import ArgumentParser
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import SIMPRedis
import SIMPServer

@main
struct SIMPServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-server",
        abstract: "The SIMP messaging server: TCP control channel, UDP datagrams, Redis through hiredis.",
        discussion: "Every option can also come from the environment: SIMP_HOST, SIMP_PORT, SIMP_UDP_PORT, SIMP_REDIS_URL, SIMP_NODE_ID, SIMP_LOG_LEVEL, SIMP_TLS_CERT, SIMP_TLS_KEY, SIMP_METRICS_PORT.")

    @Option(help: "Address to listen on (env SIMP_HOST).")
    var host: String?

    @Option(help: "TCP control port; 0 picks a free one (env SIMP_PORT). Default 7700.")
    var port: Int?

    @Option(name: .customLong("udp-port"), help: "UDP data port; 0 picks a free one (env SIMP_UDP_PORT). Default: port + 1.")
    var udpPort: Int?

    @Option(help: "Redis URL redis://HOST:PORT[/DB] (env SIMP_REDIS_URL). Default redis://127.0.0.1:6379.")
    var redis: String?

    @Option(name: .customLong("node-id"), help: "This node's name in presence records (env SIMP_NODE_ID). Default node-1.")
    var nodeID: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (env SIMP_LOG_LEVEL). Default info.")
    var logLevel: String?

    @Option(name: .customLong("heartbeat"), help: "Seconds of silence before a ping; a peer silent for three is dropped. Default 30.")
    var heartbeat: Double = 30

    @Option(name: .customLong("redis-wait"), help: "Seconds to wait for Redis at start-up before exiting with status 1. Default 30.")
    var redisWait: Double = 30

    @Option(name: .customLong("scrypt-rounds"), help: .hidden)
    var scryptRounds: Int = 16_384

    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain: serve the control channel over TLS (env SIMP_TLS_CERT). Needs --tls-key.")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "PEM private key of --tls-cert (env SIMP_TLS_KEY).")
    var tlsKey: String?

    @Option(name: .customLong("metrics-port"), help: "Serve Prometheus metrics at http://HOST:PORT/metrics; 0 picks a free port (env SIMP_METRICS_PORT). Default: off.")
    var metricsPort: Int?

    @Option(name: .customLong("max-msgs-per-sec"), help: "Data datagrams per second one session may send, sustained. Default 1000.")
    var messagesPerSecond = ServerLimits().messagesPerSecond

    @Option(name: .customLong("msg-burst"), help: "Datagrams a session may send at once above that rate. Default 2000.")
    var messageBurst = ServerLimits().messageBurst

    @Option(name: .customLong("max-sessions-per-user"), help: "Logged-in control connections per user. Default 8.")
    var sessionsPerUser = ServerLimits().sessionsPerUser

    @Option(name: .customLong("max-conns-per-ip"), help: "Open control connections per source IP. Default 256.")
    var connectionsPerIP = ServerLimits().connectionsPerIP

    @Option(name: .customLong("max-registrations-per-ip"), help: "Registrations one source IP may attempt per hour. Default 10.")
    var registrationsPerIP = ServerLimits().registrationsPerIP

    @Option(name: .customLong("max-hashing-queue"), help: "Password checks (scrypt) waiting or running; more are refused with RATE_LIMITED. Default 64.")
    var hashingQueue = ServerLimits().hashingQueue

    @Option(name: .customLong("max-hashing-per-ip"), help: "Of those, the ones one source IP may have. Default 8.")
    var hashingPerIP = ServerLimits().hashingPerIP

    @Option(name: .customLong("inbox-limit"), help: "Unconfirmed messages one user's inbox may hold. Default 10000.")
    var inboxLimit = ServerConfiguration().inboxLimit

    @Option(name: .customLong("max-requests-per-sec"), help: "Control requests per second per connection; over it the connection is read more slowly. Default 2000.")
    var requestsPerSecond = ServerLimits().requestsPerSecond

    @Option(name: .customLong("request-burst"), help: "Control requests a connection may send at once above that rate. Default 4000.")
    var requestBurst = ServerLimits().requestBurst

    @Option(name: .customLong("max-user-requests-per-sec"), help: "Control requests per second of one user over all its connections. Default 4000.")
    var userRequestsPerSecond = ServerLimits().userRequestsPerSecond

    @Option(name: .customLong("user-request-burst"), help: "Control requests one user may send at once above that rate. Default 8000.")
    var userRequestBurst = ServerLimits().userRequestBurst

    @Option(name: .customLong("frame-deadline"), help: "Seconds a control frame may take to arrive whole. Default 10.")
    var frameDeadline: Double = 10

    @Option(name: .customLong("login-deadline"), help: "Seconds a connection may stay without logging in. Default 30.")
    var loginDeadline: Double = 30

    @Option(name: .customLong("unread-grace"), help: "Seconds a connection may leave over 1 MiB of replies unread before it is closed. Default 30.")
    var unreadGrace: Double = 30

    @Option(name: .customLong("inbox-share"), help: "Unconfirmed messages one sender may have in one user's inbox. Default 2500.")
    var inboxShare = ServerConfiguration().inboxShare

    @Option(name: .customLong("event-loops"), help: "Event loop threads. Default: one per core.")
    var eventLoops = System.coreCount

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        let level = try parseLevel(logLevel ?? env["SIMP_LOG_LEVEL"] ?? "info")
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let config = try makeConfiguration(env)
        let logger = Logger(label: "simp.server")
        let server = SIMPServer(configuration: config, logger: logger) { addresses in
            FileHandle.standardOutput.write(Data((addresses.description + "\n").utf8))
        }
        let group = ServiceGroup(configuration: .init(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as StartupError {
            FileHandle.standardError.write(Data("simp-server: \(error.description)\n".utf8))
            throw ExitCode(1)
        }
    }

    private func makeConfiguration(_ env: [String: String]) throws -> ServerConfiguration {
        var config = ServerConfiguration()
        config.host = host ?? env["SIMP_HOST"] ?? config.host
        config.port = try port ?? env["SIMP_PORT"].map { try parsePort($0, "SIMP_PORT") } ?? config.port
        config.udpPort = try udpPort ?? env["SIMP_UDP_PORT"].map { try parsePort($0, "SIMP_UDP_PORT") }
        for p in [config.port] + (config.udpPort.map { [$0] } ?? []) where !(0...65535).contains(p) {
            throw ValidationError("port \(p) is outside 0-65535")
        }
        let url = redis ?? env["SIMP_REDIS_URL"] ?? "redis://127.0.0.1:6379"
        do {
            config.redis = try RedisConfiguration(url: url)
        } catch {
            throw ValidationError(error.message)
        }
        config.nodeID = nodeID ?? env["SIMP_NODE_ID"] ?? config.nodeID
        guard heartbeat > 0, redisWait >= 0 else { throw ValidationError("--heartbeat must be > 0 and --redis-wait >= 0") }
        config.heartbeat = .milliseconds(Int64(heartbeat * 1000))
        config.redisWait = .milliseconds(Int64(redisWait * 1000))
        config.scryptRounds = scryptRounds
        config.tls = try tlsConfiguration(env)
        config.metricsPort = try metricsPort ?? env["SIMP_METRICS_PORT"].map { try parsePort($0, "SIMP_METRICS_PORT") }
        config.limits = try limits()
        config.inboxLimit = inboxLimit
        config.inboxShare = inboxShare
        guard eventLoops > 0 else { throw ValidationError("--event-loops must be at least 1") }
        config.eventLoops = eventLoops
        return config
    }

    private func tlsConfiguration(_ env: [String: String]) throws -> ServerTLS? {
        switch (tlsCert ?? env["SIMP_TLS_CERT"], tlsKey ?? env["SIMP_TLS_KEY"]) {
        case (nil, nil): return nil
        case (let cert?, let key?): return ServerTLS(certificateChainPath: cert, privateKeyPath: key)
        default: throw ValidationError("--tls-cert and --tls-key go together")
        }
    }

    private func limits() throws -> ServerLimits {
        var limits = ServerLimits()
        let values = [messagesPerSecond, messageBurst, sessionsPerUser, connectionsPerIP, inboxLimit, inboxShare,
                      requestsPerSecond, requestBurst, userRequestsPerSecond, userRequestBurst, registrationsPerIP,
                      hashingQueue, hashingPerIP]
        guard values.allSatisfy({ $0 > 0 }) else {
            throw ValidationError("""
                --max-msgs-per-sec, --msg-burst, --max-sessions-per-user, --max-conns-per-ip, --inbox-limit, \
                --inbox-share, --max-requests-per-sec, --request-burst, --max-user-requests-per-sec, \
                --user-request-burst, --max-registrations-per-ip, \
                --max-hashing-queue and --max-hashing-per-ip must be > 0
                """)
        }
        guard [frameDeadline, loginDeadline, unreadGrace].allSatisfy({ $0 > 0 }) else {
            throw ValidationError("--frame-deadline, --login-deadline and --unread-grace must be > 0")
        }
        limits.frameDeadline = .milliseconds(Int64(frameDeadline * 1000))
        limits.loginDeadline = .milliseconds(Int64(loginDeadline * 1000))
        limits.unreadGrace = .milliseconds(Int64(unreadGrace * 1000))
        limits.requestsPerSecond = requestsPerSecond
        limits.userRequestsPerSecond = userRequestsPerSecond
        limits.userRequestBurst = userRequestBurst
        limits.requestBurst = requestBurst
        limits.messagesPerSecond = messagesPerSecond
        limits.messageBurst = messageBurst
        limits.sessionsPerUser = sessionsPerUser
        limits.connectionsPerIP = connectionsPerIP
        limits.registrationsPerIP = registrationsPerIP
        limits.hashingQueue = hashingQueue
        limits.hashingPerIP = hashingPerIP
        return limits
    }

    private func parsePort(_ text: String, _ name: String) throws -> Int {
        guard let value = Int(text) else { throw ValidationError("\(name)=\(text) is not a port number") }
        return value
    }

    private func parseLevel(_ text: String) throws -> Logger.Level {
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ValidationError("unknown log level \(text)")
        }
        return level
    }
}
