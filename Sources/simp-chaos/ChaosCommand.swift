import ArgumentParser
import Foundation
import SIMPChaos
#if canImport(Glibc)
import Glibc
#endif

@main
struct ChaosCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-chaos",
        abstract: "A seeded schedule of faults against real simp-server, redis-server and simp processes, and a check of every client's log.",
        discussion: """
        Exits 0 when the checker found no violation, 1 when it found one, 3 when the run could \
        not be set up. --seed S repeats a run's plan: the users, who sends to whom when, and the \
        faults with their times.
        """,
        subcommands: [CheckCommand.self, ClientCommand.self])

    @Option(help: "The seed of the plan. Default: a random one (printed).")
    var seed: UInt64?

    @Option(help: "Seconds of traffic and faults; then every fault is healed and the messages settle.")
    var duration: Double = 60

    @Option(help: "single: one node on one Redis; cluster: 3 nodes on a Redis Cluster of 3 masters and 3 replicas.")
    var topology: Topology = .single

    @Option(name: .customLong("min-replicas"), help: "Cluster: --redis-min-replicas for the nodes (0 or 1). Default: chosen by the seed.")
    var minReplicas: Int?

    @Option(help: "Users, one simp process each.")
    var users = 8

    @Option(help: "Messages per second over all users.")
    var rate = 10.0

    @Option(help: "Fault kinds to pick from, comma-separated (\(FaultKind.allCases.map(\.rawValue).joined(separator: ", "))). Default: all that apply to the topology (but aof-cut in an encrypted run).")
    var faults: String?

    @Option(help: "Seconds after the last fault healed within which every message must be settled.")
    var settle: Double = 60

    @Flag(help: "Print one JSON summary object on stdout (progress goes to stderr).")
    var json = false

    @Option(name: .customLong("bin-dir"), help: "Where simp-server and simp are. Default: this executable's directory.")
    var binDirectory: String?

    @Flag(name: .customLong("print-plan"), help: "Print the seed's plan (faults and, with --json, every send) and exit without running it.")
    var printPlan = false

    @Flag(help: "Keep the run directory (client logs, Redis data) even when no violation was found.")
    var keep = false

    @Option(name: .customLong("e2e"), help: "on: every client end-to-end encrypted (simp's default, each on a data directory of its own), the nodes with --e2e required (their default, said), and the checker requires every message decrypted; off: plaintext clients (simp --no-e2e), about half with a data directory, the nodes with --e2e optional.")
    var endToEnd: Switch = .on

    @Option(name: .customLong("node-log-level"), help: "simp-server's --log-level; each node's log is kept in the run directory's logs/.")
    var nodeLogLevel = "warning"

    func validate() throws {
        guard duration >= 5 else { throw ValidationError("--duration must be at least 5 seconds") }
        guard users >= 2 else { throw ValidationError("--users must be at least 2") }
        guard rate > 0 else { throw ValidationError("--rate must be > 0") }
        if let minReplicas, !(0...1).contains(minReplicas) { throw ValidationError("--min-replicas must be 0 or 1") }
        if minReplicas ?? 0 > 0 && topology == .single { throw ValidationError("--min-replicas needs --topology cluster") }
        _ = try kinds()
    }

    /// An encrypted run leaves the AOF cut out unless `--faults` names it: Redis losing
    /// acknowledged writes loses conversations' commits, Welcomes and KeyPackage claims with
    /// them, and today that splits a conversation for good (every later message between the
    /// two undecryptable; docs/GUARANTEES.md, "Chaos runs"), which the checker would rightly
    /// count on every run with a cut.
    static let encryptedRunsLeaveOut: Set<FaultKind> = [.aofCut]

    private func kinds() throws -> [FaultKind] {
        guard let faults else {
            return FaultKind.allCases.filter { endToEnd == .off || !Self.encryptedRunsLeaveOut.contains($0) }
        }
        return try faults.split(separator: ",").map { name in
            guard let kind = FaultKind(rawValue: String(name)) else { throw ValidationError("unknown fault kind \(name)") }
            return kind
        }
    }

    func run() async throws {
        // A write to the stdin of a client that was just killed must not kill this process.
        signal(SIGPIPE, SIG_IGN)
        Children.killOnSignal()
        let seed = seed ?? UInt64.random(in: 0...UInt64(UInt32.max))
        var planner = ChaosPlanner(seed: seed, duration: duration, topology: topology, minReplicas: minReplicas)
        planner.users = users
        planner.rate = rate
        planner.kinds = try kinds()
        let plan = planner.plan()
        let json = json
        let say: @Sendable (String) -> Void = { line in
            if json {
                FileHandle.standardError.write(Data((line + "\n").utf8))
            } else {
                FileHandle.standardOutput.write(Data((line + "\n").utf8))
            }
        }
        let reproduce = "simp-chaos --seed \(seed) --duration \(Self.format(duration)) --topology \(topology.rawValue)"
            + (minReplicas.map { " --min-replicas \($0)" } ?? "") + (users != 8 ? " --users \(users)" : "")
            + (rate != 10 ? " --rate \(Self.format(rate))" : "") + (faults.map { " --faults \($0)" } ?? "")
            + (endToEnd == .off ? " --e2e off" : "")
        let dataDirs = endToEnd == .on ? "all" : plan.dataDirClients.map { plan.users[$0] }.joined(separator: ",")
        say("simp-chaos seed=\(seed) topology=\(topology.rawValue) min-replicas=\(plan.minReplicas) duration=\(Self.format(duration))s "
            + "e2e=\(endToEnd.rawValue) users=\(plan.users.count) (data-dir: \(dataDirs)) "
            + "sends planned=\(plan.sends.count)")
        if endToEnd == .on && faults == nil && topology == .single {
            say("aof-cut left out of this encrypted run (a lost commit splits a conversation for good: docs/GUARANTEES.md, "
                + "\"Chaos runs\"); --faults with aof-cut runs it")
        }
        say("schedule (\(plan.faults.count) faults):")
        for fault in plan.faults { say("  \(fault)") }
        for loss in plan.datagramLoss { say("  \(loss)") }
        if printPlan {
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                print(String(decoding: try encoder.encode(plan), as: UTF8.self))
            }
            return
        }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-chaos-\(seed)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let binDirectory = binDirectory ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
        let runner = Runner(plan: plan, options: .init(binDirectory: binDirectory, directory: directory, settle: settle,
                                                             nodeLogLevel: nodeLogLevel, endToEnd: endToEnd == .on, say: say))
        do {
            try await runner.setUp()
        } catch {
            runner.tearDown()
            say("simp-chaos: the run could not be set up: \(error) (run directory \(directory.path))")
            throw ExitCode(3)
        }
        await runner.run()
        runner.stopClients()
        let report = runner.check(final: true)
        let relays = runner.relayCounts()
        let blocks = runner.udpBlockOutcomes()
        runner.tearDown()

        let summary = Summary(seed: seed, topology: topology.rawValue, minReplicas: plan.minReplicas, duration: duration,
                              users: plan.users.count, sendsPlanned: plan.sends.count, sendsSkipped: runner.skippedSends,
                              messages: report.messages, accepted: report.accepted, delivered: report.delivered,
                              failed: report.failed, ambiguousFailed: report.ambiguousFailed,
                              ambiguousReceived: report.ambiguousReceived, unloggedSends: report.unloggedSends,
                              excusedLost: report.excusedLost, keptNotShown: report.keptNotShown,
                              endToEnd: endToEnd == .on, decrypted: report.decrypted, undecryptable: report.undecryptable,
                              failureReasons: report.failureReasons,
                              faults: runner.injected + plan.datagramLoss.count,
                              schedule: plan.faults.map(\.description) + plan.datagramLoss.map(\.description),
                              violations: report.violations.count,
                              violationsByKind: Dictionary(uniqueKeysWithValues: ViolationKind.allCases.map { ($0.rawValue, report.count($0)) }),
                              firstViolations: report.violations.prefix(50).map(\.description),
                              datagramRelays: relays, udpBlocks: blocks.map(\.description),
                              udpBlocksMovedToStream: blocks.filter(\.movedToStream).count, notes: runner.notes, directory: directory.path,
                              kept: keep || !report.violations.isEmpty, reproduce: reproduce)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(summary), as: UTF8.self))
        } else {
            print(summary.text)
        }
        if report.violations.isEmpty && !keep {
            try? FileManager.default.removeItem(at: directory)
        }
        if !report.violations.isEmpty { throw ExitCode(1) }
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}

extension Topology: ExpressibleByArgument {}

/// `--e2e on|off`.
enum Switch: String, ExpressibleByArgument, CaseIterable {
    case on, off
}

/// An interrupted run (Ctrl-C, CI's timeout) must not leave its Redis, nodes and clients
/// running: on SIGINT or SIGTERM every process whose parent is this one gets SIGKILL, found by
/// its parent id in /proc (the wrappers that started them keep their pids to themselves).
enum Children {
    static func killOnSignal() {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                for pid in ours() { kill(pid, SIGKILL) }
                FileHandle.standardError.write(Data("simp-chaos: interrupted; its processes were killed\n".utf8))
                exit(128 + number)
            }
            source.resume()
            // Kept for the life of the process.
            _ = Unmanaged.passRetained(source as AnyObject)
        }
    }

    private static func ours() -> [Int32] {
        let me = getpid()
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            // After "pid (comm)": state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == me
        }
    }
}

/// What a run prints at the end, as text or (`--json`) one object.
struct Summary: Codable {
    var seed: UInt64
    var topology: String
    var minReplicas: Int
    var duration: Double
    var users: Int
    var sendsPlanned: Int
    /// Planned while the sender's process was down (killed).
    var sendsSkipped: Int
    var messages: Int
    var accepted: Int
    var delivered: Int
    var failed: Int
    var ambiguousFailed: Int
    var ambiguousReceived: Int
    var unloggedSends: Int
    var excusedLost: Int
    var keptNotShown: Int
    /// The clients ran end-to-end encrypted (`--e2e on`).
    var endToEnd: Bool
    /// Messages shown decrypted by their recipient.
    var decrypted: Int
    /// Messages a recipient reported it could not decrypt (each a violation).
    var undecryptable: Int
    var failureReasons: [String: Int]
    var faults: Int
    var schedule: [String]
    var violations: Int
    var violationsByKind: [String: Int]
    var firstViolations: [String]
    var datagramRelays: [String]
    /// What each udp-blocked fault did: datagrams dropped while blocked, the client's moves.
    var udpBlocks: [String]
    /// How many of them moved their client's session to the stream.
    var udpBlocksMovedToStream: Int
    var notes: [String]
    var directory: String
    /// Whether `directory` is left for reading (a violation, or --keep).
    var kept: Bool
    var reproduce: String

    var text: String {
        let kinds = violationsByKind.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        let fates = "  accepted \(accepted), delivered \(delivered), failed \(failed), failed ambiguously \(ambiguousFailed)"
            + " (of them received \(ambiguousReceived)), shown without a logged send \(unloggedSends),"
            + " lost where Redis was let lose writes \(excusedLost),"
            + " delivered and kept on disk by a recipient killed before showing it \(keptNotShown)"
        var lines: [String] = []
        lines.append("seed \(seed), \(topology) topology, min-replicas \(minReplicas), \(ChaosCommand.format(duration)) s, \(users) users")
        lines.append("faults injected: \(faults) of \(schedule.count) planned")
        lines.append("messages checked: \(messages) (sends planned \(sendsPlanned), skipped while the sender was down \(sendsSkipped))")
        lines.append(fates)
        lines.append(endToEnd ? "  end-to-end encrypted: decrypted by their recipient \(decrypted), undecryptable \(undecryptable)"
                              : "  plaintext run (--e2e off)")
        if !failureReasons.isEmpty {
            lines.append("  failed by reason: " + failureReasons.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        lines += datagramRelays.map { "  datagram relay of " + $0 }
        lines += udpBlocks.map { "  " + $0 }
        lines.append("violations: \(violations)" + (kinds.isEmpty ? "" : " (" + kinds.joined(separator: ", ") + ")"))
        lines += firstViolations.map { "  " + $0 }
        lines += notes.map { "note: " + $0 }
        if kept { lines.append("run directory kept: \(directory) (simp-chaos check \(directory))") }
        lines.append("reproduce: \(reproduce)")
        return lines.joined(separator: "\n")
    }
}
