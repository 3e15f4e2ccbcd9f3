import ArgumentParser
import DurableLoad
import Foundation
import MQTTLoad
import NIOPosix
import SIMPBench
import SIMPClient

@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-bench",
        abstract: "Load generator for SIMP: N sender/receiver pairs, W messages in flight per pair.",
        discussion: """
        A sender's slot is freed by the delivered receipt (the recipient confirmed the message). \
        Prints delivered msg/s, latencies (send to receive, to accepted, to delivered), lost, duplicate \
        and failed counts, and the CPU and memory of the server, Redis and the bench itself (summed \
        over all server nodes and all Redis processes). \
        With several nodes (--nodes, or a list for --server), pair i's sender connects to node i mod N \
        and its receiver to the next node, so every message crosses from one node to another. \
        With --compare-mosquitto the same pattern runs through a private Mosquitto (QoS 1; a slot is \
        freed once the publisher has its PUBACK and the subscriber has the message) in the same run.

        With --group-members N the run is a group fan-out instead: one sender and N members in a \
        group (N + 1 with the sender), W messages to the group in flight (a slot is freed by the \
        group's accepted: the message is in every member's inbox). Prints deliveries per second \
        (messages received by the members in the measured window, summed), accepted msg/s and \
        latencies; with --compare-mosquitto one publisher and N subscribers of one topic, QoS 1, \
        W unacknowledged PUBLISHes (a PUBACK frees a slot).

        With --sessions N --rate R the run is chat traffic instead, open loop: N users, each sending \
        at Poisson times averaging R messages a second to a uniformly random other user, whatever \
        became of its earlier messages. Prints the offered rate, messages sent and received in the \
        window, send-to-receive latencies, CPU per message received and RSS per session, and lost, \
        duplicate and failed counts after the drain; with --compare-mosquitto N MQTT users, each \
        subscribed to its own topic and publishing to a peer's, QoS 1 both ways.
        """)

    @Option(help: "A running server's control address HOST:PORT, or the nodes of one deployment as HOST:PORT,HOST:PORT,... (ignored with --spawn).")
    var server = "127.0.0.1:7700"

    @Flag(help: "Start a private Redis (AOF everysec) and simp-server for this run (see --nodes, --redis-cluster).")
    var spawn = false

    @Option(help: "With --spawn: how many simp-servers (node-1 ... node-N) to start, all on the same Redis.")
    var nodes = 1

    @Flag(name: .customLong("redis-cluster"), help: "With --spawn: start a Redis Cluster (6 redis-servers: 3 masters, 3 replicas) instead of one redis-server.")
    var redisCluster = false

    @Option(name: .customLong("redis-min-replicas"), help: "With --spawn and --redis-cluster: the servers' --redis-min-replicas (a message is accepted once this many replicas have it: Redis WAIT).")
    var redisMinReplicas = 0

    @Option(name: .customLong("server-binary"), help: "simp-server to start with --spawn. Default: the one next to simp-bench.")
    var serverBinary: String?

    @Option(name: .customLong("server-pid"), help: "PID of a running simp-server, to report its CPU and memory (repeat it for several nodes: summed).")
    var serverPIDs: [Int32] = []

    @Option(name: .customLong("redis-pid"), help: "PID of the running redis-server, to report its CPU and memory (repeat it for several: summed).")
    var redisPIDs: [Int32] = []

    @Option(name: .customLong("server-event-loops"), help: "With --spawn: simp-server's --event-loops. Default: its own.")
    var serverEventLoops: Int?

    @Option(help: "Sender/receiver pairs. Default 8.")
    var pairs: Int?

    @Option(name: .customLong("group-members"), help: "Instead of pairs: one sender to a group of this many other members (the group fan-out).")
    var groupMembers: Int?

    @Option(help: "Instead of pairs: chat traffic among this many users (see --rate).")
    var sessions: Int?

    @Option(help: "With --sessions: messages a second each user sends, on average, at Poisson times, each to a random other user.")
    var rate: Double?

    @Option(help: "With --sessions: each user writes only to this many others (the next ones by index, round the ring), as people write to their contacts; with --e2e each of these conversations is made before the run.")
    var contacts: Int?

    @Option(help: "Messages in flight per pair (with --group-members: of the one sender).")
    var window = 32

    @Option(help: "Text size in bytes.")
    var size = 64

    @Option(name: [.customLong("duration"), .customLong("seconds")], help: "Measured seconds.")
    var duration = 10.0

    @Option(help: "Seconds of load before measuring.")
    var warmup = 1.0

    @Option(help: "Seconds to wait at the end for messages still in flight.")
    var drain = 10.0

    @Option(help: "Event loop threads shared by all the bench's clients.")
    var threads = 1

    @Option(help: "Instead of a load: connect this many clients, leave them idle, and report CPU at rest and memory per session.")
    var idle: Int?

    @Option(help: "With --idle: number the idle users from this index, so several bench processes can share one server (each process holds at most about 9,000 clients within its file descriptors).")
    var idleFrom = 0

    @Flag(name: .customLong("compare-mosquitto"), help: "Run the same pattern through a local Mosquitto and print the ratio.")
    var compareMosquitto = false

    @Option(help: "With the pairs pattern: also run it through these local brokers, comma-separated: mosquitto (QoS 1, persistence off), rabbitmq (durable queues, persistent messages, publisher confirms, manual acks), jetstream (NATS JetStream, file storage, PubAcks, explicit acks). scripts/install-brokers.sh installs rabbitmq-server and nats-server.")
    var compare: String?

    @Option(help: "With the pairs pattern: how the bench drives SIMPClient: callbacks (eventHandler and post on the client's event loop) async (for await over events, try await send, a task per side of each pair, as applications do), batches (the same over eventBatches), or async-on-loop (as async, each task started with the client's taskExecutor, so it runs on the client's event loop).")
    var api: BenchAPI = .callbacks

    @Flag(help: "The receivers take a message before it is stored, when nothing else is under way for them (ClientConfiguration.earlyDelivery).")
    var early = false

    @Flag(name: .customLong("congestion-control"), inversion: .prefixedNo,
          help: "Every client sends through a congestion window (ClientConfiguration.congestionControl, the library's default).")
    var congestionControl = true

    @Flag(name: .customLong("receipt-flood"), help: "With --spawn: measure the pattern quiet, then while one session with 64 messages waiting floods the first node with receipts asking for all of them again; prints both, flooded/quiet.")
    var receiptFlood = false

    @Flag(name: .customLong("inbox-flood"), help: "Measure the pattern quiet, then while one client posts bursts of 3,000 messages to a user who never connects (past its share of that inbox); prints both, flooded/quiet. With --spawn the server's message budget is 2,000 a second per session (burst 4,000), which bounds the filler.")
    var inboxFlood = false

    @Flag(name: .customLong("long-messages"), help: "Instead of a load: one sender posts 1,000 small texts to one user (one every 5 ms), then the same with 20 texts of 60 KiB to another user among them; prints the small ones' figures for both runs, with/without.")
    var longMessages = false

    @Option(name: .customLong("busy-loops"), help: "With --sessions: run this many processes that only burn CPU (yes > /dev/null) for the length of the run, beside the server, Redis and the bench (a starved CPU). With --spawn the report adds the server's push retransmits and sender resends per stored message.")
    var busyLoops = 0

    @Flag(name: .customLong("data-dir"), help: "With --api async, --group-members or --sessions: every client keeps a data directory (outbox, history; in a new temporary directory), as an application with a store does.")
    var dataDirectories = false

    @Flag(name: .customLong("e2e"), help: "With --api async, --group-members or --sessions: every client end-to-end encrypts (ClientConfiguration.endToEnd, with a data directory as --data-dir): compare with --data-dir alone.")
    var endToEnd = false

    @Flag(help: "Print the report as one JSON object.")
    var json = false

    func validate() throws {
        guard pairs ?? 1 > 0, window > 0, threads > 0 else { throw ValidationError("--pairs, --window and --threads must be positive") }
        if (dataDirectories || endToEnd) && api != .async && groupMembers == nil && sessions == nil {
            throw ValidationError("--data-dir and --e2e need --api async (or --group-members, or --sessions): a client with a data directory sends with try await send")
        }
        if let groupMembers {
            let others = [(pairs != nil, "--pairs"), (idle != nil, "--idle"), (receiptFlood, "--receipt-flood"),
                          (inboxFlood, "--inbox-flood"), (early, "--early")]
                .filter(\.0).map(\.1)
            guard others.isEmpty else {
                throw ValidationError("--group-members (the group fan-out: one sender, N members) cannot be combined with "
                                      + others.joined(separator: ", ")
                                      + (early ? "; a group message is pushed once it is in every member's inbox, never early" : ""))
            }
            guard (1...Self.maxGroupMembers).contains(groupMembers) else {
                throw ValidationError("--group-members must be 1...\(Self.maxGroupMembers) (every member is a client of this process)")
            }
        }
        try validateChat()
        guard size >= 32, size <= 1000 else { throw ValidationError("--size must be 32...1000 bytes (the text carries a counter and a timestamp)") }
        guard duration > 0, warmup >= 0, drain >= 0 else { throw ValidationError("--duration must be positive, --warmup and --drain not negative") }
        guard nodes > 0, redisMinReplicas >= 0 else { throw ValidationError("--nodes must be positive, --redis-min-replicas not negative") }
        guard spawn || (nodes == 1 && !redisCluster && redisMinReplicas == 0) else {
            throw ValidationError("--nodes, --redis-cluster and --redis-min-replicas need --spawn (for running nodes, list them: --server A,B,C)")
        }
        if !spawn {
            do { _ = try Placement.parse(server) } catch { throw ValidationError("\(error)") }
        }
        if let compare {
            guard ComparedBroker.parse(compare) != nil else {
                throw ValidationError("--compare takes mosquitto, rabbitmq and jetstream, comma-separated; got \(compare)")
            }
            guard sessions == nil, groupMembers == nil, idle == nil, !receiptFlood, !inboxFlood else {
                throw ValidationError("--compare runs the pairs pattern (for --sessions and --group-members use --compare-mosquitto)")
            }
        }
        guard !receiptFlood || (spawn && idle == nil && !compareMosquitto) else {
            throw ValidationError("--receipt-flood needs --spawn (its flooding session is on this machine), and neither --idle nor --compare-mosquitto")
        }
        guard !longMessages || (pairs == nil && idle == nil && !compareMosquitto && compare == nil && !receiptFlood && !inboxFlood) else {
            throw ValidationError("--long-messages is a pattern of its own: it cannot be combined with --pairs, --idle, --compare(-mosquitto) or a flood")
        }
        guard !inboxFlood || (idle == nil && !compareMosquitto && !receiptFlood) else {
            throw ValidationError("--inbox-flood cannot be combined with --idle, --compare-mosquitto or --receipt-flood")
        }
        if let problem = Self.replicaProblem(minReplicas: redisMinReplicas, cluster: redisCluster) {
            // Exit 2, the bench's usage status, rather than ArgumentParser's 64.
            FileHandle.standardError.write(Data("Error: \(problem)\n  See 'simp-bench --help' for more information.\n".utf8))
            throw ExitCode(2)
        }
    }

    private func validateChat() throws {
        guard sessions != nil || rate != nil else {
            if contacts != nil { throw ValidationError("--contacts goes with --sessions") }
            return
        }
        guard let sessions, let rate else { throw ValidationError("--sessions and --rate go together") }
        guard sessions >= 2, rate > 0 else { throw ValidationError("--sessions must be at least 2 and --rate positive") }
        guard contacts.map({ (1..<sessions).contains($0) }) ?? true else { throw ValidationError("--contacts must be 1 to --sessions - 1") }
        let others = [(pairs != nil, "--pairs"), (groupMembers != nil, "--group-members"), (idle != nil, "--idle"),
                      (receiptFlood, "--receipt-flood"), (inboxFlood, "--inbox-flood"), (longMessages, "--long-messages")]
            .filter(\.0).map(\.1)
        guard others.isEmpty else {
            throw ValidationError("--sessions (the chat pattern) cannot be combined with " + others.joined(separator: ", "))
        }
        guard busyLoops >= 0 else { throw ValidationError("--busy-loops must not be negative") }
    }

    /// Why --redis-min-replicas cannot be met by the spawned Redis: every store would wait for
    /// replicas that do not exist.
    private static func replicaProblem(minReplicas: Int, cluster: Bool) -> String? {
        if minReplicas > 0, !cluster {
            return "--redis-min-replicas \(minReplicas) needs replicas, and a single spawned redis-server has none: add --redis-cluster"
        }
        if minReplicas > 1 {
            return "--redis-min-replicas \(minReplicas): the spawned Redis Cluster has one replica per master"
        }
        return nil
    }

    /// Every member is a connected client of this one process (a TCP and a UDP socket each).
    static let maxGroupMembers = 5_000

    func run() async throws {
        if let sessions, let rate {
            return try await runChat(sessions, rate: rate)
        }
        if let groupMembers {
            return try await runGroup(groupMembers)
        }
        let pattern = LoadPattern(pairs: pairs ?? 8, window: window, payloadBytes: size, duration: duration, warmup: warmup, drain: drain)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        if let idle {
            let report = try await runIdle(idle, group: group)
            try await group.shutdownGracefully()
            print(json ? String(decoding: try JSONEncoder().encode(report), as: UTF8.self) : report.table())
            return
        }
        if receiptFlood {
            let (report, closed) = try await runReceiptFlood(pattern, group: group)
            try await group.shutdownGracefully()
            print(json ? report.json() : report.table())
            if closed { Self.progress("the server closed the flooding connection") }
            if report.systems.contains(where: { $0.lost > 0 || $0.duplicates > 0 }) { throw ExitCode(2) }
            return
        }
        if longMessages {
            let report = try await runLongMessages(group: group)
            try await group.shutdownGracefully()
            print(json ? report.json() : report.table())
            if report.systems.contains(where: { $0.lost > 0 || $0.duplicates > 0 }) { throw ExitCode(2) }
            return
        }
        if inboxFlood {
            let report = try await runInboxFlood(pattern, group: group)
            try await group.shutdownGracefully()
            print(json ? report.json() : report.table())
            if report.systems.contains(where: { $0.lost > 0 || $0.duplicates > 0 }) { throw ExitCode(2) }
            return
        }
        let (simp, topology) = try await runSIMP(pattern, group: group)
        var systems = [simp]
        for broker in comparedBrokers { systems.append(try await run(broker, pattern, group: group)) }
        try await group.shutdownGracefully()
        let report = BenchReport(pattern: pattern, topology: topology, systems: systems)
        print(json ? report.json() : report.table())
        if systems.contains(where: { $0.lost > 0 || $0.duplicates > 0 }) { throw ExitCode(2) }
    }

    /// The group fan-out: SIMP, then (with --compare-mosquitto) Mosquitto.
    private func runGroup(_ members: Int) async throws {
        let pattern = FanOutPattern(members: members, window: window, payloadBytes: size, duration: duration, warmup: warmup, drain: drain)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let (simp, topology) = try await withTarget { target in
            let (result, usage) = try await GroupLoad.run(pattern, placement: target.placement, group: group,
                                                          processes: target.processes, progress: Self.progress)
            return (GroupSystemReport(system: "SIMP", result, usage: usage, allDelivered: true), target.topology)
        }
        var systems = [simp]
        if compareMosquitto {
            let (mqtt, usage) = try await withMosquitto(pattern.warmup, pattern.duration) { broker in
                try await MQTTFanOut.run(pattern, host: "127.0.0.1", port: broker.port, group: group)
            }
            systems.append(GroupSystemReport(system: "Mosquitto", mqtt, usage: usage.usage(messages: mqtt.deliveriesInWindow),
                                             allDelivered: false))
        }
        try await group.shutdownGracefully()
        let report = GroupBenchReport(pattern: pattern, topology: topology, systems: systems)
        print(json ? report.json() : report.table())
        if systems.contains(where: { $0.lost > 0 || $0.duplicates > 0 }) { throw ExitCode(2) }
    }

    /// Chat traffic: SIMP, then (with --compare-mosquitto) Mosquitto.
    private func runChat(_ sessions: Int, rate: Double) async throws {
        try checkDescriptors(clients: sessions)
        let pattern = ChatPattern(sessions: sessions, rate: rate, payloadBytes: size, duration: duration, warmup: warmup, drain: drain,
                                  contacts: contacts)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let (simp, topology) = try await withTarget { target in
            let run = try await withBusyLoops {
                try await ChatLoad.run(pattern, placement: target.placement, group: group, processes: target.processes,
                                       progress: Self.progress)
            }
            var report = ChatSystemReport(system: endToEnd ? "SIMP (e2e)" : dataDirectories ? "SIMP (data dir)" : "SIMP", run, delivered: true)
            report.serverCounters = target.stack.flatMap { ServerCounters.scrape($0.metricsAddresses) }
            return (report, target.topology)
        }
        var systems = [simp]
        if compareMosquitto {
            let run = try await withBroker(MosquittoProcess.start) { broker in
                try await withBusyLoops {
                    try await ChatLoad.throughBroker(pattern, port: broker.port, pid: broker.pid, group: group, progress: Self.progress)
                }
            }
            systems.append(ChatSystemReport(system: "Mosquitto", run, delivered: false))
        }
        try await group.shutdownGracefully()
        let report = ChatBenchReport(pattern: pattern, topology: topology, busyLoops: busyLoops, systems: systems)
        print(json ? report.json() : report.table())
        if !report.healthy { throw ExitCode(2) }
    }

    /// `body` with `--busy-loops` processes burning CPU beside it; they stop when it ends.
    private func withBusyLoops<T>(_ body: () async throws -> T) async throws -> T {
        guard busyLoops > 0 else { return try await body() }
        let busy = try BusyLoops(busyLoops)
        Self.progress("started \(busyLoops) busy loop\(busyLoops == 1 ? "" : "s") (yes > /dev/null)")
        do {
            let value = try await body()
            await busy.stop()
            return value
        } catch {
            await busy.stop()
            throw error
        }
    }

    /// Every client of this process holds descriptors, and running out half way fails as
    /// obscure connect errors: refuse up front, with the figures.
    private func checkDescriptors(clients: Int) throws {
        let limit = Descriptors.raiseLimit()
        guard Descriptors.needed(clients: clients) > limit else { return }
        FileHandle.standardError.write(Data("""
            Error: \(clients) users need about \(Descriptors.needed(clients: clients)) file descriptors in simp-bench \
            (a TCP and a UDP socket each), and it may open \(limit) (ulimit -n): at most \(Descriptors.maxClients()) users. \
            Raise the limit (ulimit -n) or lower --sessions.

            """.utf8))
        throw ExitCode(2)
    }

    private func runSIMP(_ pattern: LoadPattern, group: MultiThreadedEventLoopGroup) async throws -> (SystemReport, Topology) {
        try await withTarget { target in
            switch api {
            case .callbacks:
                let result = try await SIMPLoad.run(pattern, placement: target.placement, group: group, processes: target.processes,
                                                   progress: Self.progress)
                return (SystemReport(system: "SIMP", result), target.topology)
            case .async, .batches, .asyncOnLoop:
                let result = try await AsyncLoad.run(pattern, placement: target.placement, group: group, processes: target.processes,
                                                    batched: api == .batches, onClientLoop: api == .asyncOnLoop, progress: Self.progress)
                return (SystemReport(system: api.systemName, result), target.topology)
            }
        }
    }

    /// Two columns: flooded first, so the ratio column reads flooded/quiet.
    private func runReceiptFlood(_ pattern: LoadPattern, group: MultiThreadedEventLoopGroup) async throws -> (BenchReport, Bool) {
        try await withTarget { target in
            let result = try await ReceiptFlood.run(pattern, placement: target.placement, group: group, processes: target.processes,
                                                    progress: Self.progress)
            Self.progress("flood: \(result.floodBytes / 1024) KiB of receipts written during the flooded run")
            let systems = [SystemReport(system: "receipt flood", result.flooded), SystemReport(system: "quiet", result.quiet)]
            return (BenchReport(pattern: pattern, topology: target.topology, systems: systems), result.floodClosedByServer)
        }
    }

    /// Two columns: with the long messages first, so the ratio column reads with/without.
    private func runLongMessages(group: MultiThreadedEventLoopGroup) async throws -> BenchReport {
        try await withTarget { target in
            let result = try await LongMessageLoad.run(placement: target.placement, group: group, processes: target.processes,
                                                       progress: Self.progress)
            let long = Percentiles(result.longSendToReceive)
            Self.progress("long: \(result.longWhole) of \(result.longSent) arrived whole; send->receive p50/p99/max "
                          + BenchReport.millis(long.p50, long.p99, long.max) + " ms")
            let systems = [SystemReport(system: "with long", result.withLong, accepted: false, delivered: false),
                           SystemReport(system: "small only", result.smallOnly, accepted: false, delivered: false)]
            let pattern = LoadPattern(pairs: 1, window: 1, payloadBytes: 100, duration: result.smallOnly.measuredSeconds, warmup: 0, drain: 30)
            let title = "\(LongMessageLoad.small) texts of 100 bytes, one every 5 ms, with and without \(LongMessageLoad.long) of "
                + "\(LongMessageLoad.longBytes / 1024) KiB to another user among them (the small ones' figures)"
            return BenchReport(pattern: pattern, topology: target.topology, systems: systems, title: title)
        }
    }

    /// Two columns: flooded first, so the ratio column reads flooded/quiet.
    private func runInboxFlood(_ pattern: LoadPattern, group: MultiThreadedEventLoopGroup) async throws -> BenchReport {
        try await withTarget { target in
            let result = try await InboxFlood.run(pattern, placement: target.placement, group: group, processes: target.processes,
                                                  progress: Self.progress)
            Self.progress("flood: the server accepted \(result.accepted) of the filler's messages and refused \(result.refused)")
            let systems = [SystemReport(system: "inbox flood", result.flooded), SystemReport(system: "quiet", result.quiet)]
            return BenchReport(pattern: pattern, topology: target.topology, systems: systems)
        }
    }

    private func runIdle(_ clients: Int, group: MultiThreadedEventLoopGroup) async throws -> IdleReport {
        try await withTarget { target in
            try await IdleLoad.run(clients: clients, from: idleFrom, seconds: duration, placement: target.placement,
                                   group: group, processes: target.processes, progress: Self.progress)
        }
    }

    private typealias Target = (stack: SpawnedStack?, placement: Placement, topology: Topology, processes: ProcessGroups)

    /// Runs `body` against the target; spawned processes are stopped afterwards, also when it fails.
    private func withTarget<T>(_ body: (Target) async throws -> T) async throws -> T {
        let target = try await target()
        do {
            let value = try await body(target)
            await target.stack?.stop()
            return value
        } catch {
            await target.stack?.stop()
            throw error
        }
    }

    /// The servers to load (spawned ones or --server), where each client goes, and the
    /// processes whose CPU and memory to report.
    private func target() async throws -> Target {
        let bench: ProcessGroups = [("bench", [getpid()])]
        guard spawn else {
            let nodes = try Placement.parse(server)
            return (nil, stored(Placement(nodes: nodes, earlyDelivery: early, congestionControl: congestionControl)), Topology(nodes: nodes.count, earlyDelivery: early),
                    bench + [("server", serverPIDs), ("redis", redisPIDs)].filter { !$0.pids.isEmpty })
        }
        let stack = try await SpawnedStack.start(spawnOptions())
        Self.progress("started \(stack.topology)")
        return (stack, stored(Placement(nodes: stack.serverAddresses, earlyDelivery: early, congestionControl: congestionControl)),
                stack.topology.withEarlyDelivery(early), bench + [("server", stack.serverPIDs), ("redis", stack.redisPIDs)])
    }

    /// `placement` with a new temporary data directory for every client, with `--data-dir` or `--e2e`.
    private func stored(_ placement: Placement) -> Placement {
        guard dataDirectories || endToEnd else { return placement }
        var stored = placement
        stored.dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-bench-\(UUID().uuidString)").path
        stored.endToEnd = endToEnd
        return stored
    }

    private func spawnOptions() -> SpawnOptions {
        Self.progress("starting \(redisCluster ? "a Redis Cluster" : "redis-server") and \(nodes) simp-server\(nodes == 1 ? "" : "s")")
        var options = SpawnOptions(serverBinary: serverBinary ?? sibling("simp-server"), serverArguments: [
            // A benchmark measures the engine, not the abuse limits. All clients come from one
            // address: with --sessions each user holds a control connection (and one more while
            // it registers), and registers and logs in once, 32 at a time (see IdleLoad).
            // With --inbox-flood a budget does bound the filler, as it would an abuser: twice
            // the server's default, above what a sender of the pattern sends on this machine.
            "--max-msgs-per-sec", inboxFlood ? "2000" : "10000000", "--msg-burst", inboxFlood ? "4000" : "1000000",
            "--scrypt-rounds", "1024", "--log-level", "warning",
            "--max-conns-per-ip", "\(max(100_000, 2 * (sessions ?? 0)))", "--max-registrations-per-ip", "1000000",
            "--max-hashing-queue", "1024", "--max-hashing-per-ip", "1024",
            // Plaintext clients are measured too: the server's default refuses them.
            "--e2e", endToEnd ? "required" : "optional",
            // The chat report reads the retransmit counters from here.
        ] + (sessions != nil ? ["--metrics-port", "0"] : []) + (serverEventLoops.map { ["--event-loops", "\($0)"] } ?? [])
            // The sender is a member too.
            + (groupMembers.map { ["--max-group-members", "\(max(1000, $0 + 1))"] } ?? []))
        options.nodes = nodes
        options.redisCluster = redisCluster
        options.minReplicas = redisMinReplicas
        return options
    }

    /// The brokers of --compare and --compare-mosquitto, each once, in the order given.
    private var comparedBrokers: [ComparedBroker] {
        let listed = compare.flatMap(ComparedBroker.parse) ?? []
        return compareMosquitto && !listed.contains(.mosquitto) ? [.mosquitto] + listed : listed
    }

    /// The pairs pattern through a local broker (its ack stands where SIMP's accepted does).
    private func run(_ broker: ComparedBroker, _ pattern: LoadPattern, group: MultiThreadedEventLoopGroup) async throws -> SystemReport {
        let (mqtt, window): (MQTTLoadResult, UsageWindow)
        switch broker {
        case .mosquitto:
            (mqtt, window) = try await withMosquitto(pattern.warmup, pattern.duration) { broker in
                try await MQTTLoad.run(pattern, host: "127.0.0.1", port: broker.port, group: group)
            }
        case .rabbitmq:
            (mqtt, window) = try await withBroker(RabbitMQBroker.start, pattern.warmup, pattern.duration) { broker in
                try await RabbitMQLoad.run(pattern, host: "127.0.0.1", port: broker.port)
            }
        case .jetstream:
            (mqtt, window) = try await withBroker(NATSBroker.start, pattern.warmup, pattern.duration) { broker in
                try await JetStreamLoad.run(pattern, host: "127.0.0.1", port: broker.port, group: group)
            }
        }
        var result = LoadResult(mqtt)
        result.usage = window.usage(messages: result.receivedInWindow)
        return SystemReport(system: broker.title, result, accepted: true, delivered: false)
    }

    /// Runs `body` against a private Mosquitto, stopped afterwards also when it fails, and
    /// samples the bench and the broker over the measured window.
    private func withMosquitto<T: Sendable>(_ warmup: Double, _ duration: Double,
                                            _ body: (MosquittoProcess) async throws -> T) async throws -> (T, UsageWindow) {
        try await withBroker(MosquittoProcess.start, warmup, duration, body)
    }

    /// Runs `body` against a broker `start` starts, and samples the bench and the broker over
    /// the measured window.
    private func withBroker<B: LocalBroker, T: Sendable>(_ start: () async throws -> B, _ warmup: Double, _ duration: Double,
                                                         _ body: (B) async throws -> T) async throws -> (T, UsageWindow) {
        try await withBroker(start) { broker in
            let window = UsageWindow.measure([("bench", [getpid()]), ("server", [broker.pid])], after: warmup, seconds: duration)
            let value = try await body(broker)
            return (value, await window.value)
        }
    }

    /// Runs `body` against a private broker, stopped afterwards also when it fails.
    private func withBroker<B: LocalBroker, T: Sendable>(_ start: () async throws -> B,
                                                         _ body: (B) async throws -> T) async throws -> T {
        Self.progress("starting \(B.self)")
        let broker = try await start()
        Spawn.watch(broker.pid)
        defer { Spawn.release(broker.pid) }
        let value: T
        do {
            value = try await body(broker)
        } catch {
            await broker.stop()
            throw error
        }
        await broker.stop()
        return value
    }

    @Sendable static func progress(_ line: String) {
        FileHandle.standardError.write(Data("simp-bench: \(line)\n".utf8))
    }

    /// A binary in the same directory as this one (swift build puts all products together).
    private func sibling(_ name: String) -> String {
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        return me.deletingLastPathComponent().appendingPathComponent(name).path
    }
}

/// How the bench drives SIMPClient in the pairs pattern.
enum BenchAPI: String, ExpressibleByArgument, CaseIterable {
    case callbacks
    case async
    /// As `async`, over `eventBatches`.
    case batches
    /// As `async`, each task with the client's `taskExecutor`.
    case asyncOnLoop = "async-on-loop"

    var systemName: String {
        switch self {
        case .callbacks: "SIMP"
        case .async: "SIMP async"
        case .batches: "SIMP batches"
        case .asyncOnLoop: "SIMP async on loop"
        }
    }
}

/// A broker the pairs pattern is compared with.
enum ComparedBroker: String, CaseIterable {
    case mosquitto
    case rabbitmq
    case jetstream

    var title: String {
        switch self {
        case .mosquitto: "Mosquitto"
        case .rabbitmq: "RabbitMQ"
        case .jetstream: "JetStream"
        }
    }

    /// "rabbitmq,jetstream" to the brokers, each once; nil when a name is unknown.
    static func parse(_ list: String) -> [ComparedBroker]? {
        var brokers: [ComparedBroker] = []
        for name in list.split(separator: ",") {
            guard let broker = ComparedBroker(rawValue: name.trimmingCharacters(in: .whitespaces).lowercased()) else { return nil }
            if !brokers.contains(broker) { brokers.append(broker) }
        }
        return brokers.isEmpty ? nil : brokers
    }
}
