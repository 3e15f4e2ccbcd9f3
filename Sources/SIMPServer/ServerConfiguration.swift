import Foundation
import NIOCore
import SIMPCore
import SIMPRedis

public struct ServerConfiguration: Sendable {
    /// Whether messages to users must be end-to-end encrypted (docs/E2EE.md, Part 4).
    public enum EndToEnd: String, Sendable, CaseIterable {
        /// Plaintext and SEALED messages are both taken: for plaintext clients (tests, and a
        /// deployment moving its users to encrypting clients). Asked for explicitly.
        case optional
        /// A message to a user or a group that is not SEALED is refused (E2E_REQUIRED), as are
        /// plain read marks and typing. The default (issue 44): one-to-one conversations and
        /// groups are both encrypted, and `simp` encrypts unless told `--no-e2e`.
        case required
    }
    public var endToEnd: EndToEnd = .required
    /// `never`: datagrams inside control connections are refused (STREAM_PATH_OFF), for those
    /// who want UDP only.
    public var datagramsOverStream = DatagramsOverStream.auto
    public var host = "127.0.0.1"
    /// 0 binds a free port.
    public var port = 7700
    /// nil: port + 1 (or a free port when port is 0); 0: a free port.
    public var udpPort: Int?
    /// One Redis, or a Redis Cluster; one address without saying is asked at start.
    public var redis = RedisDeployment.detect(RedisConfiguration())
    public var nodeID = "node-1"
    /// Both ends ping after this much silence and drop the peer after three of them.
    public var heartbeat: TimeAmount = .seconds(60)
    /// Seconds a session's presence lives in Redis without a renewal; renewed after a third.
    public var presenceTTLSeconds = 90
    public var maxFrameLength = Frame.defaultMaxLength
    /// How long to wait for Redis at start-up before giving up.
    public var redisWait: TimeAmount = .seconds(30)
    /// "accepted" only once this many replicas have the store (Redis WAIT); 0: once the
    /// master has it.
    public var redisMinReplicas = 0
    /// How long a store waits for those replicas before its outcome counts as unknown (it is
    /// then stored again, idempotently, until the replicas have it or 30 s pass).
    public var redisReplicaTimeout: TimeAmount = .seconds(1)
    public var namespace = "simp"
    public var inboxLimit = 10_000
    /// Unconfirmed messages one sender may have in one recipient's inbox, so one sender
    /// cannot fill it for everyone.
    public var inboxShare = 2_500
    /// Devices one user may have at once; each keeps its own confirmed mark in the inbox.
    public var maxDevicesPerUser = 10
    /// Members a group may have (each message is copied into every member's inbox).
    public var maxGroupMembers = 1000
    /// Groups a user may be in (each holds a copy cursor and a share of its inbox).
    public var maxGroupsPerUser = 500
    /// Contact requests one user may make in an hour (RATE_LIMITED beyond).
    public var contactRequestsPerHour = 30
    /// The client confirms at the end of the loop turn that read the push (after its disk
    /// write, when it keeps one): the ack delay allowed for is QUIC's default. A session that
    /// confirms nothing is probed, at most every 4 s (probes backing off to 30 s made the fault
    /// suite's 30% loss fail messages and wait over a minute for the last of a burst); a loop
    /// turn of the server's later than 30 ms is time the server was not running, not the client's.
    public var pushRetransmit = RetransmitPolicy(maxBackoff: .seconds(4), giveUpAfter: .seconds(60),
                                                 maxAckDelay: RetransmitPolicy.defaultMaxAckDelay,
                                                 stallAllowance: .milliseconds(30))
    /// scrypt cost N; lower it only for tests.
    /// scrypt's N (r = 8, p = 1): 2^17, OWASP's minimum; 128 MiB per hash.
    public var scryptRounds = 131_072
    /// TLS on the control channel; nil serves plain TCP (local development only).
    public var tls: ServerTLS?
    public var limits = ServerLimits()
    /// Serves Prometheus metrics over HTTP at /metrics on this port; nil: off, 0: a free port.
    public var metricsPort: Int?
    /// Where the metrics, /health and /ready listen. Not `host`: a node facing the internet
    /// should not show its load and its Redis errors to it unless told to.
    public var metricsHost = "127.0.0.1"
    /// Event loop threads for the control connections, the datagram socket and Redis.
    public var eventLoops = System.coreCount

    public init() {}

    var resolvedUDPPort: Int {
        if let udpPort { return udpPort }
        return port == 0 ? 0 : port + 1
    }

    /// True for an address only this machine can reach: 127.0.0.0/8, ::1 (also written in
    /// full or IPv4-mapped) and `localhost`. Plain TCP is fine there and nowhere else.
    public static func isLoopback(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        if let address = try? SocketAddress(ipAddress: name, port: 0) {
            switch address {
            case .v4(let v4):
                return UInt32(bigEndian: v4.address.sin_addr.s_addr) >> 24 == 127
            case .v6(let v6):
                let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
                if bytes == Array(repeating: 0, count: 15) + [1] { return true }
                // ::ffff:127.x.x.x
                return bytes.prefix(12) == Array(repeating: 0, count: 10) + [0xff, 0xff] && bytes[12] == 127
            default:
                return false
            }
        }
        return false
    }
}

/// PEM files for the control channel's TLS.
public struct ServerTLS: Sendable {
    public var certificateChainPath: String
    public var privateKeyPath: String

    public init(certificateChainPath: String, privateKeyPath: String) {
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
    }
}

/// What one client may use; over a limit that client gets an error, everyone else is served.
/// docs/SECURITY.md lists each with its error code and metric.
public struct ServerLimits: Sendable {
    /// Data datagrams per second per session, sustained, and the burst above it.
    public var messagesPerSecond = 1000
    public var messageBurst = 2000
    /// The longest text a message may carry, in bytes of UTF-8; past one datagram it goes in
    /// parts (docs/PROTOCOL.md, Long messages).
    public var maxMessageBytes = LongText.defaultMaxBytes
    /// Logged-in control connections per user on one node (each device needs one).
    public var sessionsPerUser = 16
    /// Open control connections per source IP address.
    public var connectionsPerIP = 256
    /// A control connection that leaves over 1 MiB of replies unread stops being read, and is
    /// closed if it stays so for this long.
    public var unreadGrace: TimeAmount = .seconds(30)
    /// Control requests per second per connection, sustained, and the burst above it; over
    /// it the connection is read more slowly (nothing is refused or dropped).
    public var requestsPerSecond = 2_000
    public var requestBurst = 4_000
    /// The same over all of one user's connections on the node.
    public var userRequestsPerSecond = 4_000
    public var userRequestBurst = 8_000
    /// Requests of one connection being worked on (Redis, scrypt) at once; the next waits.
    /// A client asks one thing at a time (log in, connect, a page of history), so 2 leaves
    /// room and keeps one connection's share of its loop's Redis connection small.
    public var requestsInProgress = 2
    /// A control frame must arrive whole this soon after its first byte.
    public var frameDeadline: TimeAmount = .seconds(10)
    /// A connection must log in this soon after it opens.
    public var loginDeadline: TimeAmount = .seconds(30)
    /// The largest frame before login (register and login requests are small).
    public var anonymousFrameLength = 4_096
    /// Registrations one source IP may attempt per hour.
    public var registrationsPerIP = 10
    /// Users one user may write to for the first time per hour, per node (`RecipientPacing`):
    /// the answers say which names exist, so writing to names is paced like registering them.
    public var newRecipientsPerHour = 100
    /// Password hashing jobs (scrypt) waiting or running on the node; more are refused at once.
    public var hashingQueue = 64
    /// Of those, the jobs one source IP may have.
    public var hashingPerIP = 8
    /// The fewest bytes a new password may have (OWASP's minimum for a password alone).
    public var minPasswordBytes = 8

    public init() {}
}

/// Where the server ended up listening.
public struct ServerAddresses: Sendable, CustomStringConvertible {
    public var host: String
    public var tcpPort: Int
    public var udpPort: Int
    public var nodeID: String
    public var tls: Bool
    /// The metrics endpoint's port, when it is on.
    public var metricsPort: Int?
    /// The metrics endpoint's address (`--metrics-host`), which is not `host`.
    public var metricsHost = "127.0.0.1"

    /// The ready line scripts wait for.
    public var description: String {
        let security = tls ? "tls=on" : "tls=off (plain TCP: for local development only)"
        let metrics = metricsPort.map { " metrics=\(metricsHost):\($0)" } ?? ""
        return "simp-server listening tcp=\(host):\(tcpPort) udp=\(host):\(udpPort) node=\(nodeID)\(metrics) \(security)"
    }
}

extension RedisDeployment {
    /// This deployment logging in with the password from a file (`--redis-password-file`: its
    /// content, trailing line breaks dropped) or the environment (`SIMP_REDIS_PASSWORD`), for
    /// simp-server and simp-admin alike. A password may come from one place only (the URL,
    /// the file or the environment): with two, one would be silently unused, and an old
    /// password left beside a new one would go unnoticed. No error repeats a password.
    public func withPassword(file: String?, environment: String?) throws(RedisError) -> RedisDeployment {
        // An empty variable is how unit files and shells leave a setting unset.
        let fromEnvironment = environment.flatMap { $0.isEmpty ? nil : $0 }
        let deployment: RedisDeployment
        switch (file, fromEnvironment) {
        case (nil, nil):
            deployment = self
        case (_?, _?):
            throw RedisError(.protocolViolation, "a Redis password comes from both --redis-password-file and SIMP_REDIS_PASSWORD; give only one")
        case (nil, let password?):
            deployment = try withPassword(password)
        case (let path?, nil):
            deployment = try withPassword(Self.password(inFile: path))
        }
        // Said now, not after the first connection: nothing can mend it.
        for node in deployment.nodes { try node.checkLogin() }
        return deployment
    }

    static func password(inFile path: String) throws(RedisError) -> String {
        let content: String
        do {
            content = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw RedisError(.protocolViolation, "cannot read the Redis password file \(path): \((error as NSError).localizedDescription)")
        }
        var password = Substring(content)
        while let last = password.last, last == "\n" || last == "\r" || last == "\r\n" { password = password.dropLast() }
        guard !password.isEmpty else { throw RedisError(.protocolViolation, "the Redis password file \(path) is empty") }
        return String(password)
    }
}
