import Foundation
import SIMPChaos
import SIMPTestSupport
#if canImport(Glibc)
import Glibc
#endif

struct ChaosError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One simp-server on fixed ports, so that it can be killed and started again where its
/// clients look for it.
final class Node: @unchecked Sendable {
    let index: Int
    let tcpPort: Int
    let udpPort: Int
    private let binary: String
    private let arguments: [String]
    private(set) var process: ChildProcess?
    private(set) var paused = false
    /// Every run's process, for its stderr after the run.
    private var runs: [ChildProcess] = []

    /// `more`: further simp-server options (`--e2e required` for an encrypted run).
    init(index: Int, binary: String, logLevel: String, redisArguments: [String], more: [String] = []) throws {
        self.index = index
        self.binary = binary
        tcpPort = try freeTCPPort()
        var udp = try freeTCPPort()
        while udp == tcpPort { udp = try freeTCPPort() }
        udpPort = udp
        arguments = ["--port", "\(tcpPort)", "--udp-port", "\(udpPort)", "--node-id", "node-\(index + 1)",
                     // Every user registers from 127.0.0.1.
                     "--max-registrations-per-ip", "1000", "--log-level", logLevel,
                     // A run checks delivery, not hashing: its logins cost what they did before
                     // the default rose to 2^17.
                     "--scrypt-rounds", "16384"] + redisArguments + more
    }

    var name: String { "node-\(index + 1)" }
    var address: String { "127.0.0.1:\(tcpPort)" }

    func start() throws {
        let process = try ChildProcess(binary, arguments)
        self.process = process
        runs.append(process)
        // The ports were free a moment ago; one held by the killed run's sockets frees soon.
        guard process.waitForLine(timeout: 30, where: { $0.contains("simp-server listening") }) != nil else {
            throw ChaosError("\(name) did not start: \(process.stderr.suffix(600))")
        }
    }

    func kill9() {
        guard let process else { return }
        process.signal(SIGKILL)
        _ = process.waitForExit(timeout: 5)
        self.process = nil
        paused = false
    }

    func pause() {
        process?.signal(SIGSTOP)
        paused = true
    }

    func resume() {
        process?.signal(SIGCONT)
        paused = false
    }

    /// Every run's stderr (its log at --node-log-level), in order.
    func logText() -> String {
        runs.enumerated().map { "--- run \($0.offset + 1)\n" + $0.element.stderr }.joined()
    }

    func removeFiles() {
        for run in runs { try? FileManager.default.removeItem(atPath: (run.stdoutPath as NSString).deletingLastPathComponent) }
    }

    func stop() {
        guard let process else { return }
        if paused { resume() }
        process.signal(SIGTERM)
        if process.waitForExit(timeout: 10) == nil { kill9() }
        self.process = nil
    }
}

/// One `simp` REPL process per run of a client, reading `/send` lines on stdin and printing
/// every event as a JSON line to a file. A client with a data directory can be killed and
/// started again on it; its log is all its runs in order.
final class ClientSlot: @unchecked Sendable {
    let index: Int
    let user: String
    let dataDirectory: String?
    private let executable: String
    private let arguments: [String]
    private(set) var runs: [(process: ChildProcess, killed: Bool)] = []
    /// The next running count for this sender's texts (across runs).
    var nextIndex = 0
    /// Killed by the nemesis and not yet started again.
    private(set) var down = false

    /// `simp` (the REPL, `--json`) on `servers`, the usual client: encrypting with `endToEnd`
    /// (simp's default, on the data directory the run gives it), else `--no-e2e`.
    convenience init(index: Int, user: String, dataDirectory: String?, endToEnd: Bool, simp: String, servers: String) {
        self.init(index: index, user: user, dataDirectory: dataDirectory, executable: simp,
                  arguments: ["--server", servers, "--user", user, "--password", Runner.password, "--json", "--reconnect-base", "0.2", "--linger", "0"]
                      + (endToEnd ? ["--e2e"] : ["--no-e2e"]))
    }

    /// `simp-chaos client` on one node, its datagrams through a relay on `udpPort`.
    convenience init(index: Int, user: String, dataDirectory: String?, endToEnd: Bool, chaos: String, server: String, udpPort: Int) {
        self.init(index: index, user: user, dataDirectory: dataDirectory, executable: chaos,
                  arguments: ["client", "--server", server, "--user", user, "--password", Runner.password, "--udp-port", "\(udpPort)"]
                      + (endToEnd ? ["--encrypt"] : []))
    }

    private init(index: Int, user: String, dataDirectory: String?, executable: String, arguments: [String]) {
        self.index = index
        self.user = user
        self.dataDirectory = dataDirectory
        self.executable = executable
        self.arguments = arguments
    }

    func start(environment: [String: String]) throws {
        let process = try ChildProcess(executable, arguments + (dataDirectory.map { ["--data-dir", $0] } ?? []), environment: environment)
        runs.append((process, false))
        down = false
    }

    var current: ChildProcess? { down ? nil : runs.last?.process }

    /// Whether the current run has logged in (or ended without: then the caller starts another).
    func waitUntilConnected(timeout: TimeInterval) -> Bool {
        guard let process = current else { return false }
        return process.waitForLine(timeout: timeout, where: { $0.contains(#""event":"connected""#) }) != nil
    }

    /// The current run ended by itself (a start while no node could be reached exits 1).
    var exited: Bool {
        guard let process = current else { return false }
        return process.waitForExit(timeout: 0) != nil
    }

    func kill9() {
        guard let process = current else { return }
        process.signal(SIGKILL)
        _ = process.waitForExit(timeout: 5)
        runs[runs.count - 1].killed = true
        down = true
    }

    func send(to: String) {
        guard let process = current else { return }
        process.write("/send \(to) \(MessageText.make(sender: user, index: nextIndex))\n")
        nextIndex += 1
    }

    /// End of input: `--linger 0` makes it close at once.
    func stop() {
        guard let process = current else { return }
        process.closeStdin()
        if process.waitForExit(timeout: 10) == nil {
            process.signal(SIGKILL)
            _ = process.waitForExit(timeout: 5)
        }
    }

    /// Every run's lines in order, a `chaos-kill` marker after each run that was killed.
    func logText() -> String {
        runs.map { run in run.process.stdout + (run.killed ? "{\"event\":\"chaos-kill\"}\n" : "") }.joined()
    }

    func log() -> ClientLog { ClientLog(user: user, events: LogEvent.parseLog(logText())) }

    func removeFiles() {
        for run in runs {
            try? FileManager.default.removeItem(atPath: (run.process.stdoutPath as NSString).deletingLastPathComponent)
        }
    }
}
