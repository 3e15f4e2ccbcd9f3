import ArgumentParser
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import SIMPCore
import SIMPRedis
import SIMPServer
import UnixSignals

@main
struct SIMPServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-server",
        abstract: "The SIMP messaging server: TCP control channel, UDP datagrams, Redis through hiredis.",
        discussion: """
            Every option can also come from the environment, as SIMP_ and its name upper-cased with _ for - \
            (--max-conns-per-ip: SIMP_MAX_CONNS_PER_IP; --redis: SIMP_REDIS_URL), or from the JSON file of \
            --config, under its name ("max-conns-per-ip": 64). A flag beats the environment, which beats the file. \
            SIGHUP reads the environment and the file again and applies the TLS certificate and the limits \
            that can change while running (docs/OPERATIONS.md).
            """)

    @Option(help: "JSON file of settings, keyed by the flag names without -- (env SIMP_CONFIG).")
    var config: String?

    @Option(help: "Address to listen on (env SIMP_HOST). Default 127.0.0.1; an address other than loopback needs --tls-cert or --allow-plaintext.")
    var host: String?

    @Flag(name: .customLong("allow-plaintext"),
          help: "Serve plain TCP (no --tls-cert) on an address other than loopback, e.g. behind a TLS-terminating proxy (env SIMP_ALLOW_PLAINTEXT=yes).")
    var allowPlaintext = false

    @Option(help: "TCP control port; 0 picks a free one (env SIMP_PORT). Default 7700.")
    var port: Int?

    @Option(name: .customLong("udp-port"), help: "UDP data port; 0 picks a free one (env SIMP_UDP_PORT). Default: port + 1.")
    var udpPort: Int?

    @Option(help: "Redis URL redis://[[USER]:PASSWORD@]HOST:PORT[/DB], or a Redis Cluster's nodes redis://H1:P1,H2:P2,... (env SIMP_REDIS_URL). Default redis://127.0.0.1:6379.")
    var redis: String?

    @Option(name: .customLong("redis-password-file"),
            help: "File whose content (trailing newline dropped) is the Redis password, sent with AUTH (env SIMP_REDIS_PASSWORD_FILE). Or set SIMP_REDIS_PASSWORD, or put it in the --redis URL: one of the three.")
    var redisPasswordFile: String?

    @Flag(name: .customLong("redis-cluster"), inversion: .prefixedNo,
          help: "Redis is a Redis Cluster (env SIMP_REDIS_CLUSTER=yes|no|auto). Default auto: several nodes are a cluster, one is asked (INFO cluster).")
    var redisCluster: Bool?

    @Option(name: .customLong("node-id"), help: "This node's name in presence records (env SIMP_NODE_ID). Default node-1.")
    var nodeID: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (env SIMP_LOG_LEVEL). Default info.")
    var logLevel: String?

    @Option(name: .customLong("e2e"), help: "optional (plaintext and end-to-end encrypted messages) or required (a message to a user or a group that is not end-to-end encrypted is refused with E2E_REQUIRED) (env SIMP_E2E). Default required; optional admits plaintext clients (tests, a migration).")
    var endToEnd: String?

    @Option(name: .customLong("datagrams-over-stream"), help: "auto (a client that cannot use UDP carries its datagrams inside its control connection) or never (UDP only; such a client cannot send or receive) (env SIMP_DATAGRAMS_OVER_STREAM). Default auto.")
    var datagramsOverStream: String?

    @Option(name: .customLong("log-format"), help: "text (for a terminal) or json (one object per line, for a log collector) on stderr (env SIMP_LOG_FORMAT). Default text.")
    var logFormat: String?

    @Flag(name: .customLong("print-config"), help: "Print every setting, its value and where it came from (flag, env, file or default), then exit without starting.")
    var printConfig = false

    @Option(name: .customLong("heartbeat"), help: "Seconds without writing before a ping; a peer silent for 1.5 times this (at least this plus 1 s) is dropped. Default 60.")
    var heartbeat: Double?

    @Option(name: .customLong("redis-min-replicas"), help: "Send 'accepted' only once this many Redis replicas have the message (WAIT). Default 0: once the master has it.")
    var redisMinReplicas: Int?

    @Option(name: .customLong("redis-replica-timeout"), help: "Seconds a store waits for those replicas before it is tried again. Default 1.")
    var redisReplicaTimeout: Double?

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

    @Option(name: .customLong("metrics-host"), help: "Address of the metrics, /health and /ready endpoint (env SIMP_METRICS_HOST). Default 127.0.0.1, whatever --host is.")
    var metricsHost: String?

    @Option(name: .customLong("max-msgs-per-sec"), help: "Data datagrams per second one session may send, sustained. Default 1000.")
    var messagesPerSecond: Int?

    @Option(name: .customLong("msg-burst"), help: "Datagrams a session may send at once above that rate. Default 2000.")
    var messageBurst: Int?

    @Option(name: .customLong("max-message-bytes"), help: "The longest text a message may carry, in bytes (UTF-8); a text over one datagram goes in parts. Default 65536.")
    var maxMessageBytes: Int?

    @Option(name: .customLong("max-sessions-per-user"), help: "Logged-in control connections per user. Default 8.")
    var sessionsPerUser: Int?

    @Option(name: .customLong("max-conns-per-ip"), help: "Open control connections per source IP. Default 256.")
    var connectionsPerIP: Int?

    @Option(name: .customLong("max-registrations-per-ip"), help: "Registrations one source IP may attempt per hour. Default 10.")
    var registrationsPerIP: Int?

    @Option(name: .customLong("new-recipients-per-hour"), help: "Users one user may write to for the first time in an hour (each answer says whether a name exists); more are refused (RATE_LIMITED). Default 100.")
    var newRecipientsPerHour: Int?

    @Option(name: .customLong("max-hashing-queue"), help: "Password checks (scrypt) waiting or running; more are refused with RATE_LIMITED. Default 64.")
    var hashingQueue: Int?

    @Option(name: .customLong("max-hashing-per-ip"), help: "Of those, the ones one source IP may have. Default 8.")
    var hashingPerIP: Int?

    @Option(name: .customLong("min-password-length"), help: "The fewest bytes a new password may have (register, password change). Default 8.")
    var minPasswordLength: Int?

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

    @Option(name: .customLong("max-devices-per-user"), help: "Devices a user may have (each with its own place in the inbox); a new one beyond is refused until one is revoked. Default 10.")
    var maxDevicesPerUser: Int?

    @Option(name: .customLong("max-group-members"), help: "Members a group may have; adding beyond is refused (GROUP_FULL). Default 1000.")
    var maxGroupMembers: Int?

    @Option(name: .customLong("max-groups-per-user"), help: "Groups a user may be in; a create or accept beyond is refused (TOO_MANY_GROUPS), an add beyond is an invitation. Default 500.")
    var maxGroupsPerUser: Int?

    @Option(name: .customLong("contact-requests-per-hour"), help: "Contact requests one user may make in an hour; more are refused (RATE_LIMITED). Default 30.")
    var contactRequestsPerHour: Int?

    @Option(name: .customLong("event-loops"), help: "Event loop threads. Default: one per core.")
    var eventLoops: Int?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let loaded: LoadedSettings
        do {
            loaded = try load(environment)
        } catch {
            FileHandle.standardError.write(Data("simp-server: \(error)\n".utf8))
            throw ExitCode(1)
        }
        if printConfig {
            FileHandle.standardOutput.write(Data((loaded.settings.text + "\n").utf8))
            return
        }
        bootstrapLogging(level: loaded.logLevel, format: loaded.logFormat)
        let logger = Logger(label: "simp.server")
        let server = SIMPServer(configuration: loaded.configuration, logger: logger) { addresses in
            FileHandle.standardOutput.write(Data((addresses.description + "\n").utf8))
        }
        let group = await serviceGroup(server, loaded: loaded, logger: logger)
        do {
            try await group.run()
        } catch let error as StartupError {
            FileHandle.standardError.write(Data("simp-server: \(error.description)\n".utf8))
            throw ExitCode(1)
        }
    }

    /// The server, and a service that reloads its settings on SIGHUP, stopped by SIGTERM or SIGINT.
    private func serviceGroup(_ server: SIMPServer, loaded: LoadedSettings, logger: Logger) async -> ServiceGroup {
        // Trapped before the server starts, so a SIGHUP after the ready line never kills it.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let flags = self
        let reloader = Reloader(server: server, running: loaded.settings.entries, logger: logger) {
            // The flags as given at start; the environment and the file as they are now.
            try flags.load(ProcessInfo.processInfo.environment)
        }
        let services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: server),
            // It returns at graceful shutdown; that must not cancel the server's own shutdown.
            .init(service: ReloadOnHangup(signals: hangups, reloader: reloader), successTerminationBehavior: .ignore),
        ]
        return ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    }

    /// Every setting from the flags, `environment` and the config file, checked.
    func load(_ environment: [String: String]) throws -> LoadedSettings {
        let path = config ?? environment["SIMP_CONFIG"]
        let file = try path.map { path throws(SettingError) -> any SettingsFile in
            guard #available(macOS 15, *) else { throw SettingError("--config needs macOS 15 or later") }
            return try ConfigFile(path: path)
        }
        var settings = SettingsReader(environment: environment, file: file)
        settings.note("config", value: path ?? "none",
                      source: config != nil ? "flag" : path != nil ? "env SIMP_CONFIG" : "default")
        let configuration = try makeConfiguration(&settings)
        let level = try settings.read("log-level", flag: try textFlag(logLevel, "log-level") as Logger.Level?, default: .info)
        let format = try settings.read("log-format", flag: try textFlag(logFormat, "log-format") as LogFormat?, default: .text)
        try settings.checkFileKeys()
        return LoadedSettings(configuration: configuration, logLevel: level, logFormat: format, settings: settings)
    }

    /// A flag with a fixed set of spellings; ArgumentParser gives it as text.
    private func textFlag<T: TextSettingValue>(_ text: String?, _ name: String) throws(SettingError) -> T? {
        guard let text else { return nil }
        guard let value = T(settingText: text) else { throw SettingError("--\(name) \(text): must be \(T.expected)") }
        return value
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
        config.host = try settings.read("host", flag: host, default: config.host)
        config.endToEnd = try settings.read("e2e", flag: try textFlag(endToEnd, "e2e") as ServerConfiguration.EndToEnd?, default: config.endToEnd)
        config.datagramsOverStream = try settings.read("datagrams-over-stream",
                                                       flag: try textFlag(datagramsOverStream, "datagrams-over-stream") as DatagramsOverStream?,
                                                       default: .auto)
        config.port = try settings.read("port", flag: port, default: config.port, rule: .port)
        let derivedUDP = config.port == 0 ? "a free port (port is 0)" : "\(config.port + 1) (port + 1)"
        config.udpPort = try settings.readOptional("udp-port", flag: udpPort, absent: derivedUDP, rule: .port)
        let url = try settings.read("redis", flag: redis, default: "redis://127.0.0.1:6379", show: RedisConfiguration.masked)
        let cluster = try settings.read("redis-cluster", flag: redisCluster.map { $0 ? RedisClusterSetting.yes : .no }, default: .auto)
        // A path only: the file is read below and its content never listed.
        let passwordFile = try settings.readOptional("redis-password-file", flag: redisPasswordFile, absent: "none")
        // No flag and no file key: a password on a command line or in a config file is too
        // easily seen. Listed as *** so an operator sees where it comes from.
        let password = settings.environment[SettingsReader.environmentName(of: "redis-password")]
        settings.note("redis-password", value: password?.isEmpty == false ? "***" : "none",
                      source: password?.isEmpty == false ? "env SIMP_REDIS_PASSWORD" : "default")
        do {
            config.redis = try RedisDeployment(urls: url, cluster: cluster.isCluster).withPassword(file: passwordFile, environment: password)
        } catch {
            throw SettingError(RedisConfiguration.masked(error.message))
        }
        config.nodeID = try settings.read("node-id", flag: nodeID, default: config.nodeID)
        // Presence entries name the node in a space-separated record (`PresenceEntry`).
        guard UserName.isValid(config.nodeID) else {
            throw SettingError("--node-id must be 1-32 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit, not \(config.nodeID)")
        }
        let heartbeat = try settings.read("heartbeat", flag: heartbeat, default: 60, rule: .positive, show: seconds)
        let redisWait = try settings.read("redis-wait", flag: redisWait, default: 30, rule: .notNegative, show: seconds)
        config.heartbeat = .milliseconds(Int64(heartbeat * 1000))
        config.redisWait = .milliseconds(Int64(redisWait * 1000))
        config.redisMinReplicas = try settings.read("redis-min-replicas", flag: redisMinReplicas, default: 0, rule: .notNegative)
        let replicaTimeout = try settings.read("redis-replica-timeout", flag: redisReplicaTimeout, default: 1, rule: .positive, show: seconds)
        config.redisReplicaTimeout = .milliseconds(Int64(replicaTimeout * 1000))
        config.scryptRounds = try settings.read("scrypt-rounds", flag: scryptRounds, default: config.scryptRounds, rule: .positive)
        config.tls = try tlsConfiguration(&settings)
        let plaintext = try settings.read("allow-plaintext", flag: allowPlaintext ? true : nil, default: false)
        if config.tls == nil, !plaintext, !ServerConfiguration.isLoopback(config.host) {
            // Logins, tokens and datagram keys would cross the network readable by anyone on the path.
            throw SettingError("""
                refusing to serve plain TCP on \(config.host), which other machines can reach: give --tls-cert and \
                --tls-key, or --allow-plaintext (SIMP_ALLOW_PLAINTEXT=yes) if something else encrypts the traffic
                """)
        }
        config.metricsPort = try settings.readOptional("metrics-port", flag: metricsPort, absent: "off", rule: .port)
        config.metricsHost = try settings.read("metrics-host", flag: metricsHost, default: config.metricsHost)
        config.limits = try limits(&settings)
        config.inboxLimit = try settings.read("inbox-limit", flag: inboxLimit, default: config.inboxLimit, rule: .positive)
        config.inboxShare = try settings.read("inbox-share", flag: inboxShare, default: config.inboxShare, rule: .positive)
        config.maxDevicesPerUser = try settings.read("max-devices-per-user", flag: maxDevicesPerUser, default: config.maxDevicesPerUser, rule: .positive)
        config.maxGroupMembers = try settings.read("max-group-members", flag: maxGroupMembers, default: config.maxGroupMembers, rule: .positive)
        config.maxGroupsPerUser = try settings.read("max-groups-per-user", flag: maxGroupsPerUser, default: config.maxGroupsPerUser, rule: .positive)
        config.contactRequestsPerHour = try settings.read("contact-requests-per-hour", flag: contactRequestsPerHour,
                                                          default: config.contactRequestsPerHour, rule: .positive)
        config.eventLoops = try settings.read("event-loops", flag: eventLoops, default: config.eventLoops, rule: .positive)
        return config
    }

    /// Paths only: the key file is not read here, so `--print-config` never sees its content.
    private func tlsConfiguration(_ settings: inout SettingsReader) throws -> ServerTLS? {
        let cert = try settings.readOptional("tls-cert", flag: tlsCert, absent: "none (plain TCP)")
        let key = try settings.readOptional("tls-key", flag: tlsKey, absent: "none")
        switch (cert, key) {
        case (nil, nil): return nil
        case (let cert?, let key?): return ServerTLS(certificateChainPath: cert, privateKeyPath: key)
        default: throw SettingError("--tls-cert and --tls-key go together (flags, SIMP_TLS_CERT and SIMP_TLS_KEY, or tls-cert and tls-key in the file)")
        }
    }

    private func limits(_ settings: inout SettingsReader) throws -> ServerLimits {
        var limits = ServerLimits()
        func count(_ name: String, _ flag: Int?, _ value: inout Int) throws {
            value = try settings.read(name, flag: flag, default: value, rule: .positive)
        }
        try count("max-msgs-per-sec", messagesPerSecond, &limits.messagesPerSecond)
        try count("msg-burst", messageBurst, &limits.messageBurst)
        try count("max-message-bytes", maxMessageBytes, &limits.maxMessageBytes)
        try count("max-sessions-per-user", sessionsPerUser, &limits.sessionsPerUser)
        try count("max-conns-per-ip", connectionsPerIP, &limits.connectionsPerIP)
        try count("max-registrations-per-ip", registrationsPerIP, &limits.registrationsPerIP)
        try count("new-recipients-per-hour", newRecipientsPerHour, &limits.newRecipientsPerHour)
        try count("max-hashing-queue", hashingQueue, &limits.hashingQueue)
        try count("max-hashing-per-ip", hashingPerIP, &limits.hashingPerIP)
        try count("min-password-length", minPasswordLength, &limits.minPasswordBytes)
        try count("max-requests-per-sec", requestsPerSecond, &limits.requestsPerSecond)
        try count("request-burst", requestBurst, &limits.requestBurst)
        try count("max-user-requests-per-sec", userRequestsPerSecond, &limits.userRequestsPerSecond)
        try count("user-request-burst", userRequestBurst, &limits.userRequestBurst)
        func deadline(_ name: String, _ flag: Double?, _ value: inout TimeAmount) throws {
            let amount = try settings.read(name, flag: flag, default: Double(value.nanoseconds) / 1e9, rule: .positive, show: seconds)
            value = .milliseconds(Int64(amount * 1000))
        }
        try deadline("frame-deadline", frameDeadline, &limits.frameDeadline)
        try deadline("login-deadline", loginDeadline, &limits.loginDeadline)
        try deadline("unread-grace", unreadGrace, &limits.unreadGrace)
        return limits
    }

    private func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}

/// What `load` read: the configuration, how to log, and every setting with its source.
struct LoadedSettings: Sendable {
    let configuration: ServerConfiguration
    let logLevel: Logger.Level
    let logFormat: LogFormat
    let settings: SettingsReader
}

extension Logger.Level: TextSettingValue {}
extension LogFormat: TextSettingValue {}
extension ServerConfiguration.EndToEnd: TextSettingValue {}
extension DatagramsOverStream: TextSettingValue {}
