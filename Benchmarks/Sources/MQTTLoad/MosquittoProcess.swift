import Foundation
import NIOCore
import NIOPosix

/// A private Mosquitto for one run: loopback, a free port, no persistence, no limits on
/// messages in flight or queued (so the pattern's window is the only throttle).
public final class MosquittoProcess: LocalBroker {
    public let port: Int
    public let pid: Int32
    private let directory: String
    private let stopping = NSLock()
    nonisolated(unsafe) private var stopped = false
    nonisolated(unsafe) private var killed = false

    /// /usr/sbin/mosquitto (where Debian puts it), else the first `mosquitto` on PATH.
    public static func executable() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = ["/usr/sbin/mosquitto"] + path.split(separator: ":").map { "\($0)/mosquitto" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    public static func start() async throws -> MosquittoProcess {
        guard let binary = executable() else { throw MQTTLoadError.mosquittoNotFound }
        // The port LocalPorts hands out can be taken again before mosquitto binds it: then it exits, and we retry.
        var attempt = 1
        while true {
            do {
                return try await start(binary, port: try await LocalPorts.free())
            } catch Exit.early(let why) {
                guard attempt < 3 else { throw MQTTLoadError.mosquittoDidNotStart(why) }
                attempt += 1
            }
        }
    }

    private enum Exit: Error { case early(String) }

    private static func start(_ binary: String, port: Int) async throws -> MosquittoProcess {
        let directory = NSTemporaryDirectory() + "simp-bench-mosquitto-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try config(port: port).write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: directory + "/stderr", contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-c", directory + "/mosquitto.conf"]
        process.standardError = FileHandle(forWritingAtPath: directory + "/stderr")
        try ChildProcesses.runWithNoSignalsBlocked(process)
        let broker = MosquittoProcess(port: port, pid: process.processIdentifier, directory: directory)
        do {
            try await broker.waitUntilListening()
        } catch let exit as Exit {
            // Already reaped: there is nothing left to signal.
            try? FileManager.default.removeItem(atPath: directory)
            throw exit
        } catch {
            await broker.stop()
            throw error
        }
        return broker
    }

    /// `max_inflight_messages 0` and `max_queued_messages 0` mean no limit. Errors and warnings go to
    /// stderr, which is kept in a file for the error message if mosquitto does not start.
    static func config(port: Int) -> String {
        """
        listener \(port) 127.0.0.1
        allow_anonymous true
        persistence false
        max_inflight_messages 0
        max_queued_messages 0
        log_dest stderr
        log_type error
        log_type warning

        """
    }

    private init(port: Int, pid: Int32, directory: String) {
        self.port = port
        self.pid = pid
        self.directory = directory
    }

    /// SIGTERM, then SIGKILL after 4 s; the child is reaped either way. Only the first call does anything.
    public func stop() async {
        guard markStopped() else { return }
        let needed = await ChildProcesses.terminate([pid])
        stopping.withLock { killed = !needed.isEmpty }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Whether `stop` had to SIGKILL the broker: it did not exit on SIGTERM within 4 s.
    public var wasKilled: Bool { stopping.withLock { killed } }

    private func markStopped() -> Bool {
        stopping.withLock {
            defer { stopped = true }
            return !stopped
        }
    }

    private func waitUntilListening() async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if ChildProcesses.exited(pid) { throw Exit.early(stderr()) }
            if try await LocalPorts.waitUntilListening(port, seconds: 0.1) { return }
        }
        throw MQTTLoadError.mosquittoDidNotStart("not listening on 127.0.0.1:\(port) after 5 s. \(stderr())")
    }

    private func stderr() -> String {
        let text = (try? String(contentsOfFile: directory + "/stderr", encoding: .utf8)) ?? ""
        return text.isEmpty ? "(nothing on its stderr)" : text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A broker this process started on a free local port, for a comparison run.
public protocol LocalBroker: Sendable {
    var port: Int { get }
    /// The process whose CPU and memory the bench samples.
    var pid: Int32 { get }
    func stop() async
}
