import ArgumentParser
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
        and failed counts, and the CPU and memory of the server, Redis and the bench itself. \
        With --compare-mosquitto the same pattern runs through a private Mosquitto (QoS 1; a slot is \
        freed once the publisher has its PUBACK and the subscriber has the message) in the same run.
        """)

    @Option(help: "A running server's control address HOST:PORT (ignored with --spawn).")
    var server = "127.0.0.1:7700"

    @Flag(help: "Start a private redis-server (AOF everysec) and simp-server for this run.")
    var spawn = false

    @Option(name: .customLong("server-binary"), help: "simp-server to start with --spawn. Default: the one next to simp-bench.")
    var serverBinary: String?

    @Option(name: .customLong("server-pid"), help: "PID of a running simp-server, to report its CPU and memory.")
    var serverPID: Int32?

    @Option(name: .customLong("redis-pid"), help: "PID of the running redis-server, to report its CPU and memory.")
    var redisPID: Int32?

    @Option(name: .customLong("server-event-loops"), help: "With --spawn: simp-server's --event-loops. Default: its own.")
    var serverEventLoops: Int?

    @Option(help: "Sender/receiver pairs.")
    var pairs = 8

    @Option(help: "Messages in flight per pair.")
    var window = 32

    @Option(help: "Text size in bytes.")
    var size = 64

    @Option(help: "Measured seconds.")
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

    @Flag(help: "Print the report as one JSON object.")
    var json = false

    func validate() throws {
        guard pairs > 0, window > 0, threads > 0 else { throw ValidationError("--pairs, --window and --threads must be positive") }
        guard size >= 32, size <= 1000 else { throw ValidationError("--size must be 32...1000 bytes (the text carries a counter and a timestamp)") }
        guard duration > 0, warmup >= 0, drain >= 0 else { throw ValidationError("--duration must be positive, --warmup and --drain not negative") }
    }

    func run() async throws {
        let pattern = LoadPattern(pairs: pairs, window: window, payloadBytes: size, duration: duration, warmup: warmup, drain: drain)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        if let idle {
            let report = try await runIdle(idle, group: group)
            try await group.shutdownGracefully()
            print(json ? String(decoding: try JSONEncoder().encode(report), as: UTF8.self) : report.table())
            return
        }
        var systems = [try await runSIMP(pattern, group: group)]
        if compareMosquitto { systems.append(try await runMosquitto(pattern, group: group)) }
        try await group.shutdownGracefully()
        let report = BenchReport(pattern: pattern, systems: systems)
        print(json ? report.json() : report.table())
        if systems.contains(where: { $0.lost > 0 || $0.duplicates > 0 }) { throw ExitCode(2) }
    }

    private func runSIMP(_ pattern: LoadPattern, group: MultiThreadedEventLoopGroup) async throws -> SystemReport {
        let (stack, configuration, processes) = try await target()
        do {
            let result = try await SIMPLoad.run(pattern, configuration: configuration, group: group, processes: processes,
                                               progress: Self.progress)
            await stack?.stop()
            return SystemReport(system: "SIMP", result)
        } catch {
            await stack?.stop()
            throw error
        }
    }

    private func runIdle(_ clients: Int, group: MultiThreadedEventLoopGroup) async throws -> IdleReport {
        let (stack, configuration, processes) = try await target()
        do {
            let report = try await IdleLoad.run(clients: clients, from: idleFrom, seconds: duration, configuration: configuration,
                                                group: group, processes: processes, progress: Self.progress)
            await stack?.stop()
            return report
        } catch {
            await stack?.stop()
            throw error
        }
    }

    /// The server to load (a spawned one or --server), the client settings for it, and the
    /// processes whose CPU and memory to report.
    private func target() async throws -> (SpawnedStack?, ClientConfiguration, [(name: String, pid: Int32)]) {
        var stack: SpawnedStack?
        if spawn {
            Self.progress("starting redis-server and simp-server")
            stack = try await SpawnedStack.start(serverBinary: serverBinary ?? sibling("simp-server"), serverArguments: [
                // A benchmark measures the engine, not the abuse limits.
                "--max-msgs-per-sec", "10000000", "--msg-burst", "1000000", "--scrypt-rounds", "1024", "--log-level", "warning",
                "--max-conns-per-ip", "100000", "--max-registrations-per-ip", "1000000",
                "--max-hashing-queue", "1024", "--max-hashing-per-ip", "1024",
            ] + (serverEventLoops.map { ["--event-loops", "\($0)"] } ?? []))
        }
        var configuration = ClientConfiguration()
        if let stack {
            configuration.port = stack.serverPort
        } else {
            let parts = server.split(separator: ":")
            guard parts.count == 2, let port = Int(parts[1]) else { throw ValidationError("--server takes HOST:PORT") }
            configuration.host = String(parts[0])
            configuration.port = port
        }
        var processes: [(name: String, pid: Int32)] = [("bench", getpid())]
        if let pid = stack?.serverPID ?? serverPID { processes.append(("server", pid)) }
        if let pid = stack?.redisPID ?? redisPID { processes.append(("redis", pid)) }
        return (stack, configuration, processes)
    }

    private func runMosquitto(_ pattern: LoadPattern, group: MultiThreadedEventLoopGroup) async throws -> SystemReport {
        Self.progress("starting mosquitto")
        let broker = try await MosquittoProcess.start()
        let window = UsageWindow.measure([("bench", getpid()), ("server", broker.pid)], after: pattern.warmup, seconds: pattern.duration)
        let mqtt: MQTTLoadResult
        do {
            mqtt = try await MQTTLoad.run(pattern, host: "127.0.0.1", port: broker.port, group: group)
        } catch {
            await broker.stop()
            throw error
        }
        await broker.stop()
        var result = LoadResult(mqtt)
        result.usage = await window.value.usage(messages: result.receivedInWindow)
        return SystemReport(system: "Mosquitto", result, accepted: true, delivered: false)
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
