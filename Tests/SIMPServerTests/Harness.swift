import Foundation
import Logging
import NIOCore
import SIMPClient
import SIMPCore
import SIMPRedis
import SIMPServer
import SIMPTestSupport
import Testing

/// A real redis-server and a real SIMP server (in this process, on free ports).
final class TestCluster: @unchecked Sendable {
    let redis: RedisServerProcess
    private(set) var server: SIMPServer
    let addresses: ServerAddresses

    private init(redis: RedisServerProcess, server: SIMPServer, addresses: ServerAddresses) {
        self.redis = redis
        self.server = server
        self.addresses = addresses
    }

    /// Stops the server and starts a new one on the same ports and Redis.
    func restartServer(downtime: Duration = .milliseconds(300)) async throws {
        await server.stop()
        try await Task.sleep(for: downtime)
        var config = server.configuration
        config.port = addresses.tcpPort
        config.udpPort = addresses.udpPort
        // The old sockets' ports can take a moment to be free again.
        for attempt in 1...20 {
            server = SIMPServer(configuration: config)
            do {
                _ = try await server.start()
                return
            } catch where attempt < 20 {
                await server.stop()
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    static func start(heartbeat: TimeAmount = .seconds(10), logger: Logger = Logger(label: "simp.server"),
                      configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> TestCluster {
        let redis = try RedisServerProcess()
        var config = ServerConfiguration()
        config.port = 0
        config.udpPort = 0
        config.redis = .single(RedisConfiguration(port: redis.port, commandTimeout: .seconds(2)))
        config.heartbeat = heartbeat
        config.scryptRounds = 1024
        // The tests' short passwords: the minimum has its own test (LoginAbuseTests).
        config.limits.minPasswordBytes = 1
        config.redisWait = .seconds(5)
        // Plaintext clients: most tests talk through SIMPClient without encrypting. The tests
        // of encryption and of the default set `.required` (EncryptedConversationTests).
        config.endToEnd = .optional
        configure(&config)
        let server = SIMPServer(configuration: config, logger: logger)
        let addresses = try await server.start()
        return TestCluster(redis: redis, server: server, addresses: addresses)
    }

    func clientConfiguration() -> ClientConfiguration {
        var config = ClientConfiguration(host: "127.0.0.1", port: addresses.tcpPort)
        config.reconnectBase = .milliseconds(50)
        config.reconnectCap = .milliseconds(500)
        config.requestTimeout = .seconds(5)
        return config
    }

    /// Registers (if asked), connects, and starts recording events.
    func connectedClient(_ user: String, register: Bool = true) async throws -> (SIMPClient, EventLog) {
        let client = SIMPClient(configuration: clientConfiguration())
        let log = EventLog(client)
        if register { try await client.register(user: user, password: "pw-\(user)") }
        try await client.connect(user: user, password: "pw-\(user)")
        return (client, log)
    }

    func register(_ user: String) async throws {
        let client = SIMPClient(configuration: clientConfiguration())
        try await client.register(user: user, password: "pw-\(user)")
    }

    func stop() async {
        await server.stop()
        redis.stop()
    }

    /// A counter or gauge from the server's metrics; 0 when it has no such line.
    func metric(_ name: String) -> Double {
        metricValue(server.metricsText(), name)
    }
}

extension TestCluster {
    /// A raw peer of an already registered `user` (password `pw-USER`), logged in, connected and bound.
    func boundRawPeer(_ user: String) throws -> RawPeer {
        let peer = try RawPeer(tcpPort: addresses.tcpPort, udpPort: addresses.udpPort)
        try peer.connectAndBind(token: try peer.login(user, "pw-\(user)"))
        return peer
    }

    /// Sets each user's `group-adds` (`RawPeer.setGroupAdds`).
    func letAnyoneAdd(_ users: [String], _ value: String = "everyone") throws {
        try RawPeer.setGroupAdds(users, value, tcpPort: addresses.tcpPort, udpPort: addresses.udpPort)
    }

    /// A client of an already registered `user` (password `pw-USER` unless given) as device `name`, connected.
    func connectedDevice(_ user: String, _ name: String, password: String? = nil) async throws -> (SIMPClient, EventLog) {
        var config = clientConfiguration()
        config.device = name
        let client = SIMPClient(configuration: config)
        let log = EventLog(client)
        try await client.connect(user: user, password: password ?? "pw-\(user)")
        return (client, log)
    }
}

/// Everything a client reported, for assertions.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [ClientEvent] = []

    init(_ client: SIMPClient) {
        Task { [self] in
            for await event in client.events {
                record(event)
            }
        }
    }

    /// A log fed by a client's `eventHandler`.
    init() {}

    private var arrivals: [String: Date] = [:]
    private var typingHeard: [(from: String, at: Date)] = []
    private var presenceHeard: [Date] = []

    func record(_ event: ClientEvent) {
        lock.lock()
        events.append(event)
        if case .message(let m) = event, arrivals[m.id] == nil { arrivals[m.id] = Date() }
        if case .typing(let from) = event { typingHeard.append((from, Date())) }
        if case .presence = event { presenceHeard.append(Date()) }
        lock.unlock()
    }

    /// When each message id first reached the application.
    var arrivalTimes: [String: Date] {
        lock.lock()
        defer { lock.unlock() }
        return arrivals
    }

    /// Who was heard typing, and when.
    var typing: [(from: String, at: Date)] {
        lock.lock()
        defer { lock.unlock() }
        return typingHeard
    }

    /// When each presence change arrived.
    var presenceTimes: [Date] {
        lock.lock()
        defer { lock.unlock() }
        return presenceHeard
    }

    var all: [ClientEvent] {
        lock.lock()
        defer { lock.unlock() }
        return events
    }

    var messages: [IncomingMessage] {
        all.compactMap { if case .message(let m) = $0 { return m } else { return nil } }
    }

    /// Ids of the messages that reached the application after the client's first move to
    /// `path` (all of them if it connected on it): the event order says which path carried
    /// each, with no clock involved.
    func arrived(after path: DatagramPath) -> [String] {
        let events = all
        let moved = events.firstIndex {
            switch $0 {
            case .path(let to): to == path
            case .connected(_, let on): on == path
            default: false
            }
        }
        guard let moved else { return [] }
        return events[moved...].compactMap { if case .message(let m) = $0 { m.id } else { nil } }
    }

    var accepted: [String] {
        all.compactMap { if case .accepted(let id, _, _) = $0 { return id } else { return nil } }
    }

    var delivered: [String] {
        all.compactMap { if case .delivered(let id, _, _) = $0 { return id } else { return nil } }
    }

    var failed: [(id: String, reason: String)] {
        all.compactMap { if case .failed(let id, _, let reason, _) = $0 { return (id, reason) } else { return nil } }
    }

    /// Polls until the condition holds; false on timeout.
    func wait(timeout: Duration = .seconds(30), until condition: (EventLog) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(self) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition(self)
    }
}

/// Path of an executable this package builds (next to the test bundle).
func productPath(_ name: String) throws -> String {
    var candidates = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path]
    var dir = URL(fileURLWithPath: #filePath)
    while dir.path != "/" {
        dir.deleteLastPathComponent()
        candidates.append(dir.appendingPathComponent(".build/debug/\(name)").path)
    }
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw TestSupportError("\(name) not built; run swift build --build-tests first")
    }
    return found
}

/// simp-server as a child process, so it can be killed with SIGKILL and started again.
final class ServerProcess {
    let process: ChildProcess
    let tcpPort: Int
    let udpPort: Int
    let readyLine: String

    convenience init(redisURL: String, tcpPort: Int = 0, udpPort: Int = 0, extra: [String] = [], environment: [String: String] = [:],
                     wrapper: [String] = [], e2e: String? = "optional") throws {
        try self.init(redis: ["--redis", redisURL], tcpPort: tcpPort, udpPort: udpPort, extra: extra, environment: environment,
                      wrapper: wrapper, e2e: e2e)
    }

    /// `redis`: the arguments that say where Redis is (`--redis URL`, `--redis-cluster`).
    /// `e2e`: `--e2e` of the server: "optional" for plaintext clients (`simp --no-e2e`, SIMPClient
    /// without endToEnd), as most tests are; nil: the server's default, required
    /// (EndToEndDefaultTests). Not given when `extra` says `--e2e` itself.
    init(redis: [String], tcpPort: Int = 0, udpPort: Int = 0, extra: [String] = [], environment: [String: String] = [:],
         wrapper: [String] = [], e2e: String? = "optional") throws {
        let binary = try productPath("simp-server")
        let e2e = extra.contains("--e2e") ? [] : e2e.map { ["--e2e", $0] } ?? []
        let args = ["--port", "\(tcpPort)", "--udp-port", "\(udpPort)", "--scrypt-rounds", "1024", "--min-password-length", "1"] + e2e + redis + extra
        process = wrapper.isEmpty
            ? try ChildProcess(binary, args, environment: environment)
            : try ChildProcess(wrapper[0], Array(wrapper.dropFirst()) + [binary] + args, environment: environment)
        guard let line = process.waitForLine(timeout: 20, where: { $0.hasPrefix("simp-server listening") }) else {
            throw TestSupportError("no ready line; stderr: \(process.stderr)")
        }
        readyLine = line
        func port(_ name: String) throws -> Int {
            guard let range = line.range(of: name + #"=[^ ]+:(\d+)"#, options: .regularExpression),
                  let value = Int(line[range].split(separator: ":").last!) else {
                throw TestSupportError("bad ready line \(line)")
            }
            return value
        }
        self.tcpPort = try port("tcp")
        self.udpPort = try port("udp")
    }
}

/// The value of one sample line ("name{labels} value") in Prometheus text; 0 when absent.
func metricValue(_ text: String, _ name: String) -> Double {
    for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
        return Double(line.split(separator: " ").last ?? "") ?? 0
    }
    return 0
}

/// A redis-server and a simp-server process on it, stopped together.
final class ServerNode {
    let redis: RedisServerProcess
    let server: ServerProcess

    /// `e2e`: as `ServerProcess`'s (nil: the server's default, required).
    init(extra: [String] = [], e2e: String? = "optional") throws {
        redis = try RedisServerProcess()
        do {
            server = try ServerProcess(redisURL: redis.url, extra: extra, e2e: e2e)
        } catch {
            redis.stop()
            throw error
        }
    }

    /// SIGTERM to the server, then Redis.
    func stop() {
        server.process.signal(SIGTERM)
        _ = server.process.waitForExit(timeout: 10)
        redis.stop()
    }
}

/// The Redis a deployment's nodes share: one redis-server, or a Redis Cluster of 3 masters
/// with a replica each.
enum SharedRedis {
    case single(RedisServerProcess)
    case cluster(RedisClusterProcess)

    init(cluster: Bool) throws {
        self = cluster ? .cluster(try RedisClusterProcess()) : .single(try RedisServerProcess())
    }

    /// What simp-server and simp-admin are given to find it.
    var arguments: [String] {
        switch self {
        case .single(let redis): ["--redis", redis.url]
        case .cluster(let cluster): ["--redis", cluster.ports.map { "redis://127.0.0.1:\($0)" }.joined(separator: ","), "--redis-cluster"]
        }
    }

    /// One command, sent to the node that holds its key (`arguments[1]`).
    func command(_ arguments: [String]) throws -> String {
        switch self {
        case .single(let redis):
            return try redis.command(arguments)
        case .cluster(let cluster):
            guard let port = cluster.masterPort(forSlot: RedisCluster.hashSlot(arguments[1])) else {
                throw TestSupportError("no master serves the slot of \(arguments[1])")
            }
            return try cluster.command(port: port, arguments)
        }
    }

    func stop() {
        switch self {
        case .single(let redis): redis.stop()
        case .cluster(let cluster): cluster.stopAll()
        }
    }
}

/// A Redis (or a Redis Cluster) and several simp-server nodes on it (`--node-id node-N`),
/// stopped together.
final class Deployment {
    let redis: SharedRedis
    var servers: [ServerProcess] = []

    init(nodes: Int, cluster: Bool = false, extra: [String] = []) throws {
        redis = try SharedRedis(cluster: cluster)
        do {
            for index in 1...nodes {
                servers.append(try ServerProcess(redis: redis.arguments,
                                                 extra: ["--node-id", "node-\(index)", "--max-registrations-per-ip", "100"] + extra))
            }
        } catch {
            stop()
            throw error
        }
    }

    /// Sets each user's `group-adds` (`RawPeer.setGroupAdds`), through the first node.
    func letAnyoneAdd(_ users: [String], _ value: String = "everyone") throws {
        try RawPeer.setGroupAdds(users, value, tcpPort: servers[0].tcpPort, udpPort: servers[0].udpPort)
    }

    /// Every node, starting with `first`: clients given different starting points spread
    /// over the nodes, and each has the others to move to.
    func configuration(startingAt first: Int) -> ClientConfiguration {
        let order = servers.indices.map { servers[(first + $0) % servers.count] }
        var config = ClientConfiguration(servers: order.map { ServerAddress(host: "127.0.0.1", port: $0.tcpPort) })
        config.reconnectBase = .milliseconds(50)
        config.reconnectCap = .milliseconds(500)
        config.connectTimeout = .seconds(1)
        config.requestTimeout = .seconds(5)
        return config
    }

    /// Which node (0-based) listens on this port.
    func node(of server: ServerAddress?) -> Int? {
        servers.firstIndex { $0.tcpPort == server?.port }
    }

    /// The node the user's presence in Redis names ("node-N"; the first, when its devices are
    /// on several), if any.
    func presenceNode(of user: String) -> String? {
        guard let reply = try? redis.command(["HVALS", "simp:{\(user)}:presence"]),
              let range = reply.range(of: #"node-\d+"#, options: .regularExpression) else { return nil }
        return String(reply[range])
    }

    func stop() {
        for server in servers where server.process.waitForExit(timeout: 0) == nil {
            server.process.signal(SIGTERM)
            _ = server.process.waitForExit(timeout: 10)
        }
        redis.stop()
    }

    /// Presence is written when a client binds its datagram address; until then a store on
    /// another node cannot know where the recipient is.
    func waitForPresence(of users: [String]) async throws {
        let deadline = ContinuousClock.now + .seconds(15)
        for user in users {
            while presenceNode(of: user) == nil {
                guard ContinuousClock.now < deadline else { throw TestSupportError("no presence for \(user)") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }
}

/// Polls every 50 ms for up to 30 s; a throwing condition counts as not yet.
func eventually(_ condition: () throws -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
        if (try? condition()) == true { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return false
}

/// As `eventually`, for a condition that asks a server or Redis.
func eventually(_ condition: () async throws -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
        if (try? await condition()) == true { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return false
}

/// A user of a multi-node test: a client given every node, logged in, and what it was told.
struct NodeUser {
    let name: String
    let client: SIMPClient
    let log: EventLog
}

extension Deployment {
    /// Registers and logs in `name`, starting at node `first` (0-based).
    func connect(_ name: String, startingAt first: Int,
                 adjusting adjust: (inout ClientConfiguration) -> Void = { _ in }) async throws -> NodeUser {
        var config = configuration(startingAt: first)
        adjust(&config)
        let client = SIMPClient(configuration: config)
        try await client.register(user: name, password: "pw-\(name)")
        let log = EventLog(client)
        try await client.connect(user: name, password: "pw-\(name)")
        return NodeUser(name: name, client: client, log: log)
    }
}

/// Messages between random pairs of users, each text "FROM>TO#N", and what became of them.
struct RandomTraffic {
    let users: [NodeUser]
    /// Each conversation ("from>to") its ids in send order.
    private(set) var sent: [String: [String]] = [:]
    private(set) var sentAt: [String: Date] = [:]
    private var generator = SystemRandomNumberGenerator()

    init(_ users: [NodeUser]) { self.users = users }

    /// Sends the n-th message, from one random user to another; a pause every 20.
    mutating func send(_ n: Int) async throws {
        let from = users.randomElement(using: &generator)!
        var to = users.randomElement(using: &generator)!
        while to.name == from.name { to = users.randomElement(using: &generator)! }
        let id = try await from.client.send(to: to.name, text: "\(from.name)>\(to.name)#\(n)")
        sent["\(from.name)>\(to.name)", default: []].append(id)
        sentAt[id] = Date()
        if n % 20 == 0 { try await Task.sleep(for: .milliseconds(10)) }
    }

    /// What `user` sent.
    func ids(from user: String) -> Set<String> { Set(sent.filter { $0.key.hasPrefix("\(user)>") }.values.joined()) }

    /// Until every sender has heard each of its messages' fate (delivered or failed).
    func waitForEveryFate(timeout: Duration) async -> [String] {
        var silent: [String] = []
        for user in users {
            let mine = ids(from: user.name)
            let told = await user.log.wait(timeout: timeout) { Set($0.delivered).union($0.failed.map(\.id)).isSuperset(of: mine) }
            if !told { silent.append(user.name) }
        }
        return silent
    }

    /// The tally of every conversation, printed as a row of the scenario table.
    func tally(_ name: String) -> ScenarioResult {
        let byName = Dictionary(uniqueKeysWithValues: users.map { ($0.name, $0) })
        let result = SIMPServerTests.tally(name, pairs: sent.map { conversation, ids in
            let names = conversation.split(separator: ">").map(String.init)
            let sender = byName[names[0]]!.log
            let recipient = byName[names[1]]!.log
            let times = recipient.arrivalTimes
            let received = recipient.messages.filter { $0.from == names[0] }.map { ($0.id, times[$0.id] ?? Date()) }
            // The sender's outcomes of this conversation only (it has others).
            let mine = Set(ids)
            return (ids, sentAt, received, Set(sender.delivered).intersection(mine), Set(sender.failed.map(\.id)).intersection(mine))
        })
        print("\n\(ScenarioResult.header)\n\(result)\n")
        return result
    }
}

/// A message as a raw peer sends it in a DATA datagram (what `SIMPClient` would build).
func datagramMessage(id: String, clientSeq: UInt64, type: Simp_Message.MessageType = .text, to: String = "bob",
                     content: String = "hello", overtaken: Bool = false, fresh: Bool = false) throws -> [UInt8] {
    var message = Simp_Message()
    message.version = 1
    message.messageID = id
    message.toUser = to
    message.type = type
    message.content = content
    message.clientSeq = clientSeq
    message.overtaken = overtaken
    message.fresh = fresh
    return try message.serializedBytes()
}

/// The request fails with `code`.
func expectCode(_ code: ErrorCode, sourceLocation: SourceLocation = #_sourceLocation,
                _ body: () async throws -> some Any) async {
    do {
        _ = try await body()
        Issue.record("expected \(code.rawValue)", sourceLocation: sourceLocation)
    } catch let error as ClientError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(error)", sourceLocation: sourceLocation)
    }
}
