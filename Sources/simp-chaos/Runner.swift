import Foundation
import SIMPChaos
import SIMPClient
import SIMPTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Carries a plan out against real processes: the Redis, the nodes and one `simp` process per
/// user; a traffic thread types the plan's sends, a nemesis thread injects and heals its
/// faults. Both block (process starts, sleeps), so they are threads, not tasks on the two
/// cooperative threads this machine has. Everything they share is behind `lock`.
final class Runner: @unchecked Sendable {
    /// Every chaos user's password (at least the server's minimum length).
    static let password = "chaos-password"
    struct Options {
        var binDirectory: String
        var directory: URL
        var settle: Double
        /// simp-server's --log-level (its stderr is kept in logs/node-N.log).
        var nodeLogLevel = "warning"
        /// Every client end-to-end encrypted (`simp --e2e`, each on a data directory of its own
        /// that its restarts keep), the nodes refusing plaintext (`--e2e required`).
        var endToEnd = true
        var say: @Sendable (String) -> Void
    }

    let plan: ChaosPlan
    let options: Options
    private let lock = NSLock()
    private var redis: RedisStack!
    private var nodes: [Node] = []
    private var clients: [ClientSlot] = []
    /// The relays of the clients in `plan.relayedClients`, by client index.
    private var proxies: [(client: Int, proxy: UDPFaultProxy)] = []
    /// Each udp-blocked fault so far: its relay's counts and the client's log length when it
    /// was blocked and when opened again.
    private var blocks: [Block] = []
    private var start = Date()
    /// Ids Redis was let lose (accepted inside an AOF cut's window).
    private var excused = Set<String>()
    private(set) var injected = 0
    private(set) var notes: [String] = []
    private(set) var skippedSends = 0

    init(plan: ChaosPlan, options: Options) {
        self.plan = plan
        self.options = options
    }

    private var elapsed: Double { Date().timeIntervalSince(start) }

    /// Before the run starts (setting up), lines carry no time: the plan's times count from
    /// the start of traffic.
    private func say(_ text: String) {
        options.say((running ? String(format: "[%7.2fs] ", elapsed) : "[  setup ] ") + text)
    }

    private var running: Bool { locked { _running } }
    private var _running = false

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: setting up

    func setUp() async throws {
        redis = try RedisStack.start(plan.topology)
        say("redis: \(redis.summary)")
        let server = options.binDirectory + "/simp-server"
        let redisArguments = redis.serverArguments + (plan.minReplicas > 0 ? ["--redis-min-replicas", "\(plan.minReplicas)"] : [])
        for index in 0..<plan.topology.nodes {
            let node = try Node(index: index, binary: server, logLevel: options.nodeLogLevel, redisArguments: redisArguments,
                                more: ["--e2e", options.endToEnd ? "required" : "optional"])
            try node.start()
            nodes.append(node)
        }
        say("nodes: " + nodes.map { "\($0.name) tcp=\($0.address) udp=\($0.udpPort)" }.joined(separator: ", "))
        for user in plan.users {
            let client = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: nodes[0].tcpPort))
            try await client.register(user: user, password: Runner.password)
            await client.close()
        }
        var rng = SIMPChaos.SplitMix64(seed: plan.seed ^ 0x5EED)
        let simp = options.binDirectory + "/simp"
        for (index, user) in plan.users.enumerated() {
            // Encrypted, every client keeps its keys in a data directory; else the plan's half.
            let dataDir = options.endToEnd || plan.dataDirClients.contains(index) ? RunDirectory(options.directory).dataDirectory(of: user).path : nil
            if let dataDir { try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true) }
            // Each client has the nodes in an order of its own, so a lost node's clients spread.
            let servers = nodes.map(\.address).shuffled(using: &rng).joined(separator: ",")
            let client: ClientSlot
            if plan.relayedClients.contains(index) {
                // The relay forwards to one node's datagram port: this client stays with that node.
                // A client UDP is only blocked for at times loses nothing otherwise.
                let node = nodes[index % nodes.count]
                let rate = plan.datagramLoss.first { $0.client == index }?.rate ?? 0
                let proxy = try UDPFaultProxy(serverPort: node.udpPort, profile: FaultProfile(drop: rate), seed: plan.seed &+ UInt64(index))
                proxies.append((index, proxy))
                client = ClientSlot(index: index, user: user, dataDirectory: dataDir, endToEnd: options.endToEnd, chaos: options.binDirectory + "/simp-chaos",
                                    server: node.address, udpPort: proxy.port)
            } else {
                client = ClientSlot(index: index, user: user, dataDirectory: dataDir, endToEnd: options.endToEnd, simp: simp, servers: servers)
            }
            try client.start(environment: environment)
            clients.append(client)
        }
        for client in clients where !client.waitUntilConnected(timeout: 30) {
            throw ChaosError("\(client.user) did not connect: \(client.current?.stderr.suffix(400) ?? "")")
        }
        say("clients: " + clients.map { client in
            let loss = plan.datagramLoss.first { $0.client == client.index }.map { " (\(Int(($0.rate * 100).rounded()))% datagram loss)" }
            let blocked = plan.udpBlockedClients.contains(client.index) ? " (UDP blocked at times)" : ""
            return client.user + (client.dataDirectory == nil ? "" : " (data-dir)") + (loss ?? "") + blocked
        }.joined(separator: ", "))
    }

    /// Keeps `simp` away from the user's own credentials file and history.
    private var environment: [String: String] {
        ["XDG_CONFIG_HOME": options.directory.path, "XDG_STATE_HOME": options.directory.path]
    }

    // MARK: running

    /// Traffic and faults for the plan's duration, every fault healed, then up to `settle`
    /// seconds for every message to reach its end; returns when it has, or the time is up.
    func run() async {
        start = Date()
        locked { _running = true }
        let traffic = thread("traffic") { self.traffic() }
        let nemesis = thread("nemesis") { self.nemesis() }
        let supervisor = thread("supervisor") { self.supervise(until: self.plan.duration + self.options.settle + 5) }
        await traffic.value
        await nemesis.value
        let healed = elapsed
        say("every fault healed; waiting up to \(Int(options.settle)) s for every message to settle")
        while elapsed < healed + options.settle {
            let report = check()
            let open = report.count(.unresolved) + report.count(.lostAccepted) + report.count(.deliveredNotShown)
            if open == 0 { break }
            try? await Task.sleep(for: .seconds(1))
        }
        // Late duplicates or late arrivals of what failed would show in this time.
        try? await Task.sleep(for: .seconds(2))
        say(String(format: "settled %.1f s after the last fault healed", elapsed - healed))
        stopSupervising = true
        await supervisor.value
    }

    private var stopSupervising: Bool {
        get { locked { _stop } }
        set { locked { _stop = newValue } }
    }

    private var _stop = false

    private func thread(_ name: String, _ body: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self)
        let thread = Thread {
            body()
            continuation.finish()
        }
        thread.name = name
        thread.start()
        return Task { for await _ in stream {} }
    }

    private func sleep(until t: Double) {
        let wait = t - elapsed
        if wait > 0 { usleep(useconds_t(wait * 1_000_000)) }
    }

    private func traffic() {
        for send in plan.sends {
            sleep(until: send.at)
            locked {
                let client = clients[send.from]
                if client.current == nil {
                    skippedSends += 1
                } else {
                    client.send(to: plan.users[send.to])
                }
            }
        }
    }

    /// A data-directory client that ended by itself (started while no node answered) is started
    /// again; one without a data directory may not be (it would show its inbox again).
    private func supervise(until limit: Double) {
        while elapsed < limit && !stopSupervising {
            usleep(500_000)
            locked {
                for client in clients where client.exited {
                    if client.dataDirectory != nil {
                        do { try client.start(environment: environment) } catch { notes.append("restart of \(client.user) failed: \(error)") }
                    } else if !notes.contains(where: { $0.hasPrefix("\(client.user) exited") }) {
                        notes.append("\(client.user) exited by itself: \(client.current?.stderr.suffix(300) ?? "")")
                    }
                }
            }
        }
    }

    private func nemesis() {
        var pending: [Fault] = []
        for fault in plan.faults {
            sleep(until: fault.at)
            do {
                try inject(fault)
                locked { injected += 1 }
            } catch {
                say("cannot inject \(fault.kind.rawValue): \(error)")
                note("cannot inject \(fault): \(error)")
                continue
            }
            guard let heal = fault.heal else {
                pending.append(fault)
                continue
            }
            sleep(until: heal)
            do { try self.heal(fault) } catch { note("cannot heal \(fault): \(error)") }
        }
        sleep(until: plan.duration)
        for fault in pending {
            do { try heal(fault) } catch { note("cannot heal \(fault): \(error)") }
        }
    }

    private func note(_ text: String) {
        locked { notes.append(text) }
    }

    private func inject(_ fault: Fault) throws {
        switch fault.kind {
        case .nodeKill:
            say("kill -9 \(nodes[fault.target].name)")
            nodes[fault.target].kill9()
        case .nodePause:
            say("SIGSTOP \(nodes[fault.target].name)")
            nodes[fault.target].pause()
        case .clientKill:
            say("kill -9 client \(plan.users[fault.target])")
            locked { clients[fault.target].kill9() }
        case .redisKill where plan.topology == .cluster && plan.minReplicas == 0,
             .redisKillNoRestart where plan.minReplicas == 0:
            try excusingLosses("the master's kill (no min-replicas: its replica may lack the last writes)") {
                say("\(fault.kind.rawValue) shard \(fault.target): " + (try redis.kill(fault)))
            }
        case .redisKill, .redisKillNoRestart, .replicaLoss:
            say("\(fault.kind.rawValue) shard \(fault.target): " + (try redis.kill(fault)))
        case .aofCut:
            try cutAOF(fault)
        case .datagramLoss:
            throw ChaosError("datagram loss lasts the whole run: it is set up with the clients")
        case .udpBlocked:
            try blockUDP(fault)
        }
    }

    private func heal(_ fault: Fault) throws {
        switch fault.kind {
        case .nodeKill:
            say("start \(nodes[fault.target].name) again")
            try nodes[fault.target].start()
        case .nodePause:
            say("SIGCONT \(nodes[fault.target].name)")
            nodes[fault.target].resume()
        case .clientKill:
            say("start client \(plan.users[fault.target]) again on its data directory")
            try locked { try clients[fault.target].start(environment: environment) }
        case .redisKill, .redisKillNoRestart, .replicaLoss, .aofCut:
            say("heal \(fault.kind.rawValue) shard \(fault.target): " + (try redis.heal(fault)))
        case .datagramLoss:
            break
        case .udpBlocked:
            try openUDP(fault)
        }
    }

    /// One udp-blocked fault as it happens: the relay's counts and the client's log length when
    /// it was blocked, then when opened again.
    private struct Block {
        var fault: Fault
        var before: FaultCounters
        var logAtBlock: Int
        var after: FaultCounters?
        var logAtHeal: Int?
    }

    private func relay(of client: Int) throws -> UDPFaultProxy {
        guard let proxy = proxies.first(where: { $0.client == client })?.proxy else {
            throw ChaosError("client \(client) has no datagram relay")
        }
        return proxy
    }

    private func blockUDP(_ fault: Fault) throws {
        let proxy = try relay(of: fault.target)
        let before = try proxy.counters()
        try proxy.block(true)
        say("block every datagram of client \(plan.users[fault.target]), both ways")
        // Read after the block, which is then on time: no path line can come this soon (the
        // move to the stream takes a second of silence).
        locked { blocks.append(Block(fault: fault, before: before, logAtBlock: clients[fault.target].log().events.count)) }
    }

    private func openUDP(_ fault: Fault) throws {
        let proxy = try relay(of: fault.target)
        try proxy.block(false)
        let after = try proxy.counters()
        let log = locked { clients[fault.target].log().events.count }
        let dropped = locked { () -> Int in
            guard let n = blocks.lastIndex(where: { $0.fault == fault }) else { return 0 }
            blocks[n].after = after
            blocks[n].logAtHeal = log
            return after.blockedToServer + after.blockedToClients - blocks[n].before.blockedToServer - blocks[n].before.blockedToClients
        }
        say("let the datagrams of client \(plan.users[fault.target]) through again (\(dropped) dropped while blocked)")
    }

    /// What each udp-blocked fault did, from its relay's counts and the client's `path` and
    /// `connected` lines; read once the clients have stopped, so that "after" runs to the end
    /// of the run (or to the same client's next block).
    func udpBlockOutcomes() -> [UDPBlockOutcome] {
        locked {
            blocks.enumerated().compactMap { n, block in
                guard let after = block.after, let logAtHeal = block.logAtHeal, let heal = block.fault.heal else { return nil }
                let events = clients[block.fault.target].log().events
                let next = blocks[(n + 1)...].first { $0.fault.target == block.fault.target }?.logAtBlock ?? events.count
                // Never past the log's end (a line cut by a kill is not counted).
                let end = min(next, events.count), healed = min(logAtHeal, end), blocked = min(block.logAtBlock, healed)
                return UDPBlockOutcome(user: plan.users[block.fault.target], at: block.fault.at, heal: heal,
                                       droppedToServer: after.blockedToServer - block.before.blockedToServer,
                                       droppedToClient: after.blockedToClients - block.before.blockedToClients,
                                       pathsWhileBlocked: UDPBlockOutcome.paths(events[blocked..<healed]),
                                       pathsAfter: UDPBlockOutcome.paths(events[healed..<end]))
            }
        }
    }

    /// Redis loses its last writes: the AOF is cut back to its size of a moment ago (Redis
    /// starts on it when the fault heals).
    private func cutAOF(_ fault: Fault) throws {
        let keep = try redis.aofSize()
        say("AOF at \(keep) bytes; kill -9 Redis in 1 s and cut its AOF back to that")
        try excusingLosses("the AOF cut") {
            try redis.kill(fault)
            say("cut \(try redis.cutAOF(to: keep)) bytes of AOF")
        }
    }

    /// Runs `body`, a fault that may lose acknowledged writes as documented (an AOF cut; a
    /// master killed before its replica had what it acknowledged, without min-replicas), one
    /// second after marking the logs. What the clients logged as accepted from the mark until
    /// just after the fault may be lost: those ids are excused, any other loss is still a
    /// violation.
    private func excusingLosses(_ what: String, _ body: () throws -> Void) throws {
        let before = logLengths()
        usleep(1_000_000)
        try body()
        // An `accepted` printed after this was stored before the fault.
        usleep(300_000)
        let after = logLengths()
        let logs = locked { clients.map { $0.log() } }
        var window = Set<String>()
        for (n, log) in logs.enumerated() {
            for case .accepted(let id, _, _) in log.events.prefix(after[n]).dropFirst(before[n]) { window.insert(id) }
        }
        locked { excused.formUnion(window) }
        say("\(window.count) messages accepted in the second before \(what) may be lost")
    }

    private func logLengths() -> [Int] {
        locked { clients.map { $0.log().events.count } }
    }

    /// What each client's relay did, to show the loss was real.
    func relayCounts() -> [String] {
        proxies.compactMap { client, proxy in
            guard let counters = try? proxy.counters() else { return nil }
            let blocked = counters.blockedToServer + counters.blockedToClients
            return "\(plan.users[client]): \(counters.dropped) datagrams dropped, \(counters.forwarded) forwarded"
                + (blocked > 0 ? ", \(blocked) dropped while UDP was blocked" : "")
        }
    }

    /// `final`: the clients have stopped; a data directory that cannot be read is noted.
    func check(final: Bool = false) -> CheckReport {
        let (logs, excused) = locked { (clients.map { $0.log() }, self.excused) }
        return Checker.check(logs, excused: excused, keptOnDisk: keptOnDisk(noting: final), endToEnd: options.endToEnd)
    }

    /// The ids of the received messages in the clients' data directories, read once the
    /// clients have stopped writing them.
    private func keptOnDisk(noting: Bool) -> Set<String> {
        var ids = Set<String>()
        for client in clients where client.dataDirectory != nil {
            do {
                ids.formUnion(try RunDirectory(options.directory).keptMessages(of: client.user))
            } catch {
                if noting { note("cannot read the received messages of \(client.user): \(error)") }
            }
        }
        return ids
    }

    // MARK: tearing down

    /// Ends every client (end of input), so that the check sees every line they will write.
    func stopClients() {
        locked {
            for client in clients { client.stop() }
        }
    }

    /// Stops everything; keeps each client's log (all its runs, with markers) and each node's
    /// stderr in the run directory.
    func tearDown() {
        stopClients()
        let run = RunDirectory(options.directory)
        let logs = run.logs
        try? FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        locked {
            for client in clients {
                try? client.logText().write(to: run.log(of: client.user), atomically: true, encoding: .utf8)
                client.removeFiles()
            }
            try? excused.sorted().map { $0 + "\n" }.joined().write(to: run.excusedFile, atomically: true, encoding: .utf8)
            if options.endToEnd { try? "".write(to: run.endToEndMarker, atomically: true, encoding: .utf8) }
        }
        for (_, proxy) in proxies { proxy.shutdown() }
        for node in nodes {
            node.stop()
            try? node.logText().write(to: logs.appendingPathComponent("\(node.name).log"), atomically: true, encoding: .utf8)
            node.removeFiles()
        }
        redis?.stop()
    }
}
