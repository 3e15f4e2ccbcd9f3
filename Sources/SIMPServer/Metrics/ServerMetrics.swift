import NIOConcurrencyHelpers
import Prometheus
import SIMPCore
import SIMPRedis

/// Why the server dropped a datagram without acting on it.
enum DropReason: String, CaseIterable, Sendable {
    case malformed, oversize, unknownSession = "unknown_session", unsealable, replayed
    case unvalidatedAddress = "unvalidated_address", badBindToken = "bad_bind_token"
    case rateLimited = "rate_limited", amplification
    /// A plain TYPING under `--e2e required` (docs/PROTOCOL.md, section 2).
    case e2eRequired = "e2e_required"
}

/// The limits of docs/SECURITY.md; each refusal is counted under its name.
enum Limit: String, CaseIterable, Sendable {
    case frameSize = "frame_size", datagramSize = "datagram_size"
    case messagesPerSecond = "messages_per_second", sessionsPerUser = "sessions_per_user"
    case connectionsPerIP = "connections_per_ip", inboxSize = "inbox_size", failedLogins = "failed_logins"
    case outputBacklog = "output_backlog"
    case newRecipients = "new_recipients"
    case inboxShare = "inbox_share", controlRequests = "control_requests", frameDeadline = "frame_deadline", loginDeadline = "login_deadline"
    case passwordHashing = "password_hashing", registrations, resendBytes = "resend_bytes"
}

/// Which way a datagram crossed the control connection.
enum StreamDirection: String, CaseIterable, Sendable {
    case `in`, out
}

/// Everything the server counts, in one Prometheus registry per server (so several servers
/// in one test process do not share counts). Counters are atomic: any thread may bump them.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let drops: [DropReason: Counter]
    private let limits: [Limit: Counter]
    let datagramsIn: Counter
    let stored: Counter
    let duplicates: Counter
    let pushes: Counter
    let bundles: Counter
    let earlyPushes: Counter
    let earlyRetracted: Counter
    let typingRelayed: Counter
    /// Messages taken that were end-to-end encrypted (SEALED), and plaintext ones refused by
    /// `--e2e required`: what share of the traffic the server can read.
    let sealedTaken: Counter
    let plaintextRefused: Counter
    /// Groups' sealed read receipts refused because their reader is not a member of the group.
    let readsRefused: Counter
    let presenceRelayed: Counter
    let keysRelayed: Counter
    let retransmits: Counter
    let pushesGivenUp: Counter
    let pushesLost: Counter
    let congestionEvents: Counter
    let loginsFailed: Counter
    let loginsSucceeded: Counter
    let tokensRevoked: Counter
    /// Password hashes made again with the node's parameters at a login.
    let passwordHashesUpgraded: Counter
    let passwordHashes: Counter
    /// Control connections closed because their login ended elsewhere (a password change,
    /// `logout{all}`, a device revoked).
    let loginsEnded: Counter
    /// PING and PONG frames received on control connections: peers' heartbeats and their
    /// answers to the node's (a connection that keeps them coming stays open).
    let keepalives: Counter
    /// Copies of a group stopped for a member at its bound of unconfirmed group copies.
    let groupCopiesHeld: Counter
    let receiptsHolding: Counter
    /// Resumes of held group copies (a member confirmed).
    let groupCopiesResumed: Counter
    /// Inbox entries moved past a client's last seq after Redis lost numbers it had seen.
    let renumbered: Counter
    let sessions: Gauge
    let controlConnections: Gauge
    /// Bound sessions by path, and the changes of path (a first bind is none).
    private let sessionsOnPath: [DatagramPath: Gauge]
    private let pathChanges: [DatagramPath: Counter]
    /// Datagrams carried inside control connections, and those of them that held messages.
    private let streamDatagrams: [StreamDirection: Counter]
    private let streamPayloads: [StreamDirection: Counter]
    /// Stores refused because the recipient's shard had too few replicas, after their wait.
    let replicaRefusals: Counter
    /// Read marks not told, by why (`ReadReceipts.LeftOut`).
    private let readMarks: [ReadReceipts.LeftOut: Counter]
    /// Per shard ever held: its replicas online while held, -1 once let go.
    private let shardReplicas = NIOLockedValueBox<[RedisNodeAddress: Gauge]>([:])
    /// The shards held now, for /ready.
    private let heldShards = NIOLockedValueBox<[(shard: RedisNodeAddress, online: Int)]>([])
    /// SIGHUP reloads of the configuration, by result ("ok" or "failed").
    private let reloads: [Bool: Counter]
    /// How long each pipelined batch of Redis commands took, written to answered.
    let redisRoundTrip: DurationHistogram
    /// Unconfirmed entries in a recipient's inbox after each store into it. One series for
    /// all users: a gauge per user would make a series per user.
    let inboxDepth: ValueHistogram

    init() {
        let registry = self.registry
        func counter(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Counter {
            registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "simp", metricName: name, unitName: "total",
                                                                  helpText: help), labels: labels)
        }
        func gauge(_ name: String, _ help: String) -> Gauge {
            registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "simp", metricName: name, unitName: "", helpText: help))
        }
        drops = Dictionary(uniqueKeysWithValues: DropReason.allCases.map {
            ($0, counter("datagrams_dropped", "Datagrams dropped before anything acted on them", [("reason", $0.rawValue)]))
        })
        limits = Dictionary(uniqueKeysWithValues: Limit.allCases.map {
            ($0, counter("limit_exceeded", "Requests refused because a limit was reached", [("limit", $0.rawValue)]))
        })
        datagramsIn = counter("datagrams_received", "Datagrams received")
        stored = counter("messages_stored", "Messages stored in recipients' inboxes")
        duplicates = counter("messages_duplicate", "Resent messages that were already stored")
        pushes = counter("pushes", "Messages pushed to recipients")
        retransmits = counter("retransmits", "Pushes sent again")
        bundles = counter("push_bundles", "BUNDLE datagrams sent: several pushes for one session in one datagram")
        earlyPushes = counter("early_pushes", "Messages pushed to an idle recipient before their store answered (EARLY)")
        earlyRetracted = counter("early_retracted", "Early pushes whose store failed: the recipient was told they were retracted")
        typingRelayed = counter("typing_relayed", "TYPING datagrams sent to a session (never stored)")
        sealedTaken = counter("messages_sealed", "End-to-end encrypted (SEALED) messages taken from senders, before storing")
        plaintextRefused = counter("plaintext_refused", "Messages to users refused for not being end-to-end encrypted (--e2e required)")
        readsRefused = counter("group_reads_refused", "Sealed read receipts in a group refused because their reader is not a member")
        presenceRelayed = counter("presence_relayed", "PRESENCE datagrams sent to a session (never stored)")
        keysRelayed = counter("keys_relayed", "KEYS datagrams sent to a session: a user's key directory changed (never stored)")
        pushesGivenUp = counter("pushes_given_up", "Pushes given up until the client's next keepalive or session")
        pushesLost = counter("pushes_lost", "Pushes found lost (timed out, or reported missing by a receipt)")
        congestionEvents = counter("congestion_events", "Losses that halved a session's congestion window")
        loginsFailed = counter("logins_failed", "Logins with a wrong name or password")
        loginsSucceeded = counter("logins", "Logins with the right password")
        tokensRevoked = counter("tokens_revoked", "Tokens revoked by logout")
        passwordHashesUpgraded = counter("password_hashes_upgraded", "Password hashes made again with this node's scrypt parameters at a login")
        passwordHashes = counter("password_hashes", "Password hashing jobs (scrypt) run: checks, a name nobody has included, and new hashes")
        loginsEnded = counter("logins_ended", "Control connections closed because their login was ended (password change, logout all, device revoked)")
        keepalives = counter("keepalives_received", "PING and PONG frames received on control connections (heartbeats and their answers)")
        groupCopiesHeld = counter("group_copies_held", "Copies of a group to a member stopped at the member's bound of unconfirmed group copies")
        receiptsHolding = counter("receipts_holding", "Receipts whose client holds messages it received but does not confirm yet (receivedUpToSeq above upToSeq)")
        groupCopiesResumed = counter("group_copies_resumed", "Held group copies resumed from the group's log after the member confirmed")
        renumbered = counter("messages_renumbered", "Messages moved past a client's last seq after Redis lost writes")
        reloads = [true: counter("config_reloads", "Configuration reloads (SIGHUP)", [("result", "ok")]),
                   false: counter("config_reloads", "Configuration reloads (SIGHUP)", [("result", "failed")])]
        readMarks = Dictionary(uniqueKeysWithValues: ReadReceipts.LeftOut.allCases.map {
            ($0, counter("read_marks_left_out", "markRead marks not told to their sender: above the session's confirmed mark, naming no message of the reader's inbox, or a group's of a reader not in it",
                         [("reason", $0.rawValue)]))
        })
        replicaRefusals = counter("replica_refusals", "Messages failed REPLICAS_UNAVAILABLE: their shard lacked replicas for the whole wait")
        sessions = gauge("sessions", "Sessions open on this node")
        controlConnections = gauge("control_connections", "Open control connections")
        sessionsOnPath = Dictionary(uniqueKeysWithValues: DatagramPath.allCases.map {
            ($0, registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "simp", metricName: "sessions_on_path", unitName: "",
                                                                     helpText: "Bound sessions on this node by the path their datagrams take"),
                                    labels: [("path", $0.rawValue)]))
        })
        pathChanges = Dictionary(uniqueKeysWithValues: DatagramPath.allCases.map {
            ($0, counter("path_changes", "Sessions whose datagram path changed, by the path taken", [("to", $0.rawValue)]))
        })
        streamDatagrams = Dictionary(uniqueKeysWithValues: StreamDirection.allCases.map {
            ($0, counter("stream_datagrams", "Sealed datagrams carried inside control connections (the stream path)", [("direction", $0.rawValue)]))
        })
        streamPayloads = Dictionary(uniqueKeysWithValues: StreamDirection.allCases.map {
            ($0, counter("stream_payloads", "DATA, BUNDLE and EARLY datagrams (messages) carried inside control connections", [("direction", $0.rawValue)]))
        })
        // From 100 us (an idle loopback Redis) to 2.5 s (near the command timeout).
        let buckets: [Duration] = [.microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
                                   .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                                   .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
                                   .seconds(1), .seconds(2.5)]
        redisRoundTrip = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(namespace: "simp", subsystem: "redis", metricName: "round_trip", unitName: "seconds",
                                             helpText: "Time from writing a pipelined batch of Redis commands to its last reply"),
            buckets: buckets)
        inboxDepth = registry.makeValueHistogram(
            descriptor: MetricNameDescriptor(namespace: "simp", metricName: "inbox_depth", unitName: "",
                                             helpText: "Unconfirmed messages in the recipient's inbox after each store into it"),
            buckets: [1, 2, 5, 10, 50, 100, 500, 1_000, 2_500, 5_000, 10_000, 50_000])
    }

    func configReloaded(ok: Bool) {
        reloads[ok]?.increment()
    }

    /// The shards whose stores wait for replicas now (`--redis-min-replicas`).
    func replicasShort(_ held: [(shard: RedisNodeAddress, online: Int)]) {
        heldShards.withLockedValue { $0 = held }
        shardReplicas.withLockedValue { gauges in
            for (shard, gauge) in gauges where !held.contains(where: { $0.shard == shard }) { gauge.set(Int64(-1)) }
            for (shard, online) in held {
                if gauges[shard] == nil {
                    gauges[shard] = registry.makeGauge(
                        descriptor: MetricNameDescriptor(namespace: "simp", subsystem: "redis", metricName: "shard_replicas_short", unitName: "",
                                                         helpText: "Replicas online of a Redis shard whose stores wait for more (--redis-min-replicas); -1 once it has them"),
                        labels: [("shard", "\(shard.host):\(shard.port)")])
                }
                gauges[shard]?.set(Int64(online))
            }
        }
    }

    var shardsShort: [(shard: RedisNodeAddress, online: Int)] { heldShards.withLockedValue { $0 } }

    func dropped(_ reason: DropReason) {
        drops[reason]?.increment()
    }

    /// A session's path changed: `from` nil at its bind, `to` nil when it closed.
    func pathChanged(from: DatagramPath?, to: DatagramPath?) {
        if let from { sessionsOnPath[from]?.decrement() }
        if let to { sessionsOnPath[to]?.increment() }
        if from != nil, let to { pathChanges[to]?.increment() }
    }

    func streamDatagrams(_ direction: StreamDirection) {
        streamDatagrams[direction]?.increment()
    }

    func streamPayloads(_ direction: StreamDirection) {
        streamPayloads[direction]?.increment()
    }

    func exceeded(_ limit: Limit) {
        limits[limit]?.increment()
    }

    func readMarksLeftOut(_ why: ReadReceipts.LeftOut, _ count: Int) {
        guard count > 0 else { return }
        readMarks[why]?.increment(by: Int64(count))
    }

    /// The Prometheus text exposition of every metric.
    func render() -> String {
        registry.emitToString()
    }
}
