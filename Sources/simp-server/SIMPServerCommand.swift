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
        discussion: "Every option can also come from the environment: SIMP_HOST, SIMP_PORT, SIMP_UDP_PORT, SIMP_REDIS_URL, SIMP_NODE_ID, SIMP_LOG_LEVEL, SIMP_TLS_CERT, SIMP_TLS_KEY, SIMP_METRICS_PORT, SIMP_LOG_FORMAT.")

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

    @Option(name: .customLong("log-format"), help: "text (for a terminal) or json (one object per line, for a log collector) on stderr (env SIMP_LOG_FORMAT). Default text.")
    var logFormat: String?

    @Flag(name: .customLong("print-config"), help: "Print every setting, its value and where it came from (flag, env or default), then exit without starting.")
    var printConfig = false

    @Option(name: .customLong("heartbeat"), help: "Seconds of silence before a ping; a peer silent for three is dropped. Default 30.")
    var heartbeat: Double?

    @Option(name: .customLong("redis-wait"), help: "Seconds to wait for Redis at start-up before exiting with status 1. Default 30.")
    var redisWait: Double?

    @Option(name: .customLong("scrypt-rounds"), help: .hidden)
    var scryptRounds: Int?

    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain: serve the control channel over TLS (env SIMP_TLS_CERT). Needs --tls-key.")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "PEM private key of --tls-cert (env SIMP_TLS_KEY).")
    var tlsKey: String?

    @Option(name: .customLong("metrics-port"), help: "Serve Prometheus metrics at http://HOST:PORT/metrics; 0 picks a free port (env SIMP_METRICS_PORT). Default: off.")
    var metricsPort: Int?

    @Option(name: .customLong("max-msgs-per-sec"), help: "Data datagrams per second one session may send, sustained. Default 1000.")
    var messagesPerSecond: Int?

    @Option(name: .customLong("msg-burst"), help: "Datagrams a session may send at once above that rate. Default 2000.")
    var messageBurst: Int?

    @Option(name: .customLong("max-sessions-per-user"), help: "Logged-in control connections per user. Default 8.")
    var sessionsPerUser: Int?

    @Option(name: .customLong("max-conns-per-ip"), help: "Open control connections per source IP. Default 256.")
    var connectionsPerIP: Int?

    @Option(name: .customLong("max-registrations-per-ip"), help: "Registrations one source IP may attempt per hour. Default 10.")
    var registrationsPerIP: Int?

    @Option(name: .customLong("max-hashing-queue"), help: "Password checks (scrypt) waiting or running; more are refused with RATE_LIMITED. Default 64.")
    var hashingQueue: Int?

    @Option(name: .customLong("max-hashing-per-ip"), help: "Of those, the ones one source IP may have. Default 8.")
    var hashingPerIP: Int?

    @Option(name: .customLong("inbox-limit"), help: "Unconfirmed messages one user's inbox may hold. Default 10000.")
    var inboxLimit: Int?

    @Option(name: .customLong("max-requests-per-sec"), help: "Control requests per second per connection; over it the connection is read more slowly. Default 2000.")
    var requestsPerSecond: Int?

    @Option(name: .customLong("request-burst"), help: "Control requests a connection may send at once above that rate. Default 4000.")
    var requestBurst: Int?

    @Option(name: .customLong("max-user-requests-per-sec"), help: "Control requests per second of one user over all its connections. Default 4000.")
    var userRequestsPerSecond: Int?

    @Option(name: .customLong("user-request-burst"), help: "Control requests one user may send at once above that rate. Default 8000.")
    var userRequestBurst: Int?

    @Option(name: .customLong("frame-deadline"), help: "Seconds a control frame may take to arrive whole. Default 10.")
    var frameDeadline: Double?

    @Option(name: .customLong("login-deadline"), help: "Seconds a connection may stay without logging in. Default 30.")
    var loginDeadline: Double?

    @Option(name: .customLong("unread-grace"), help: "Seconds a connection may leave over 1 MiB of replies unread before it is closed. Default 30.")
    var unreadGrace: Double?

    @Option(name: .customLong("inbox-share"), help: "Unconfirmed messages one sender may have in one user's inbox. Default 2500.")
    var inboxShare: Int?

    @Option(name: .customLong("event-loops"), help: "Event loop threads. Default: one per core.")
    var eventLoops: Int?

    func run() async throws {
        var settings = SettingsReader(environment: ProcessInfo.processInfo.environment)
        let config = try makeConfiguration(&settings)
        let level = try settings.read("log-level", flag: logLevel.map(parseLevel), env: "SIMP_LOG_LEVEL", default: .info,
                                      parse: parseLevel, show: \.rawValue)
        let format = try settings.read("log-format", flag: logFormat.map(parseFormat), env: "SIMP_LOG_FORMAT", default: .text,
                                       parse: parseFormat, show: \.rawValue)
        if printConfig {
            FileHandle.standardOutput.write(Data((settings.text + "\n").utf8))
            return
        }
        bootstrapLogging(level: level, format: format)
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

    private func bootstrapLogging(level: Logger.Level, format: LogFormat) {
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = switch format {
            case .text: StreamLogHandler.standardError(label: label)
            case .json: JSONLogHandler(label: label)
            }
            handler.logLevel = level
            return handler
        }
    }

    private func makeConfiguration(_ settings: inout SettingsReader) throws -> ServerConfiguration {
        var config = ServerConfiguration()
        config.host = try settings.read("host", flag: host, env: "SIMP_HOST", default: config.host, parse: { $0 })
        config.port = try settings.read("port", flag: port, env: "SIMP_PORT", default: config.port,
                                        parse: { try parsePort($0, "SIMP_PORT") })
        let derivedUDP = config.port == 0 ? "a free port (port is 0)" : "\(config.port + 1) (port + 1)"
        config.udpPort = try settings.readOptional("udp-port", flag: udpPort, env: "SIMP_UDP_PORT", absent: derivedUDP,
                                                   parse: { try parsePort($0, "SIMP_UDP_PORT") })
        for p in [config.port] + (config.udpPort.map { [$0] } ?? []) where !(0...65535).contains(p) {
            throw ValidationError("port \(p) is outside 0-65535")
        }
        let url = try settings.read("redis", flag: redis, env: "SIMP_REDIS_URL", default: "redis://127.0.0.1:6379",
                                    parse: { $0 }, show: maskingPassword)
        do {
            config.redis = try RedisConfiguration(url: url)
        } catch {
            throw ValidationError(maskingPassword(error.message))
        }
        config.nodeID = try settings.read("node-id", flag: nodeID, env: "SIMP_NODE_ID", default: config.nodeID, parse: { $0 })
        let heartbeat = settings.read("heartbeat", flag: heartbeat, default: 30, show: seconds)
        let redisWait = settings.read("redis-wait", flag: redisWait, default: 30, show: seconds)
        guard heartbeat > 0, redisWait >= 0 else { throw ValidationError("--heartbeat must be > 0 and --redis-wait >= 0") }
        config.heartbeat = .milliseconds(Int64(heartbeat * 1000))
        config.redisWait = .milliseconds(Int64(redisWait * 1000))
        config.scryptRounds = settings.read("scrypt-rounds", flag: scryptRounds, default: config.scryptRounds)
        config.tls = try tlsConfiguration(&settings)
        config.metricsPort = try settings.readOptional("metrics-port", flag: metricsPort, env: "SIMP_METRICS_PORT", absent: "off",
                                                       parse: { try parsePort($0, "SIMP_METRICS_PORT") })
        config.limits = try limits(&settings)
        config.inboxLimit = settings.read("inbox-limit", flag: inboxLimit, default: config.inboxLimit)
        config.inboxShare = settings.read("inbox-share", flag: inboxShare, default: config.inboxShare)
        guard config.inboxLimit > 0, config.inboxShare > 0 else { throw ValidationError("--inbox-limit and --inbox-share must be > 0") }
        config.eventLoops = settings.read("event-loops", flag: eventLoops, default: config.eventLoops)
        guard config.eventLoops > 0 else { throw ValidationError("--event-loops must be at least 1") }
        return config
    }

    /// Paths only: the key file is not read here, so `--print-config` never sees its content.
    private func tlsConfiguration(_ settings: inout SettingsReader) throws -> ServerTLS? {
        let cert = try settings.readOptional("tls-cert", flag: tlsCert, env: "SIMP_TLS_CERT", absent: "none (plain TCP)", parse: { $0 })
        let key = try settings.readOptional("tls-key", flag: tlsKey, env: "SIMP_TLS_KEY", absent: "none", parse: { $0 })
        switch (cert, key) {
        case (nil, nil): return nil
        case (let cert?, let key?): return ServerTLS(certificateChainPath: cert, privateKeyPath: key)
        default: throw ValidationError("--tls-cert and --tls-key go together")
        }
    }

    private func limits(_ settings: inout SettingsReader) throws -> ServerLimits {
        var limits = ServerLimits()
        limits.messagesPerSecond = settings.read("max-msgs-per-sec", flag: messagesPerSecond, default: limits.messagesPerSecond)
        limits.messageBurst = settings.read("msg-burst", flag: messageBurst, default: limits.messageBurst)
        limits.sessionsPerUser = settings.read("max-sessions-per-user", flag: sessionsPerUser, default: limits.sessionsPerUser)
        limits.connectionsPerIP = settings.read("max-conns-per-ip", flag: connectionsPerIP, default: limits.connectionsPerIP)
        limits.registrationsPerIP = settings.read("max-registrations-per-ip", flag: registrationsPerIP, default: limits.registrationsPerIP)
        limits.hashingQueue = settings.read("max-hashing-queue", flag: hashingQueue, default: limits.hashingQueue)
        limits.hashingPerIP = settings.read("max-hashing-per-ip", flag: hashingPerIP, default: limits.hashingPerIP)
        limits.requestsPerSecond = settings.read("max-requests-per-sec", flag: requestsPerSecond, default: limits.requestsPerSecond)
        limits.requestBurst = settings.read("request-burst", flag: requestBurst, default: limits.requestBurst)
        limits.userRequestsPerSecond = settings.read("max-user-requests-per-sec", flag: userRequestsPerSecond,
                                                     default: limits.userRequestsPerSecond)
        limits.userRequestBurst = settings.read("user-request-burst", flag: userRequestBurst, default: limits.userRequestBurst)
        let counts = [limits.messagesPerSecond, limits.messageBurst, limits.sessionsPerUser, limits.connectionsPerIP,
                      limits.registrationsPerIP, limits.hashingQueue, limits.hashingPerIP, limits.requestsPerSecond,
                      limits.requestBurst, limits.userRequestsPerSecond, limits.userRequestBurst]
        guard counts.allSatisfy({ $0 > 0 }) else {
            throw ValidationError("""
                --max-msgs-per-sec, --msg-burst, --max-sessions-per-user, --max-conns-per-ip, \
                --max-requests-per-sec, --request-burst, --max-user-requests-per-sec, \
                --user-request-burst, --max-registrations-per-ip, \
                --max-hashing-queue and --max-hashing-per-ip must be > 0
                """)
        }
        let frameDeadline = settings.read("frame-deadline", flag: frameDeadline, default: 10, show: seconds)
        let loginDeadline = settings.read("login-deadline", flag: loginDeadline, default: 30, show: seconds)
        let unreadGrace = settings.read("unread-grace", flag: unreadGrace, default: 30, show: seconds)
        guard [frameDeadline, loginDeadline, unreadGrace].allSatisfy({ $0 > 0 }) else {
            throw ValidationError("--frame-deadline, --login-deadline and --unread-grace must be > 0")
        }
        limits.frameDeadline = .milliseconds(Int64(frameDeadline * 1000))
        limits.loginDeadline = .milliseconds(Int64(loginDeadline * 1000))
        limits.unreadGrace = .milliseconds(Int64(unreadGrace * 1000))
        return limits
    }

    private func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
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

    private func parseFormat(_ text: String) throws -> LogFormat {
        guard let format = LogFormat(rawValue: text.lowercased()) else {
            throw ValidationError("unknown log format \(text): text or json")
        }
        return format
    }
}
