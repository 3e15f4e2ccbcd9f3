#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MQTTLoad
import NIOConcurrencyHelpers

public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Starting and stopping the child processes of `simp-bench --spawn`.
public enum Spawn {
    /// A fresh directory under the system's temporary one, for Redis data and logs.
    static func directory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        directories.withLockedValue { $0.append(directory) }
        return directory
    }

    static func removeDirectory(_ directory: URL) {
        directories.withLockedValue { $0.removeAll { $0 == directory } }
        try? FileManager.default.removeItem(at: directory)
    }

    /// `count` distinct free loopback ports.
    static func freePorts(_ count: Int) async throws -> [Int] {
        var ports: [Int] = []
        while ports.count < count {
            let port = try await LocalPorts.free()
            if !ports.contains(port) { ports.append(port) }
        }
        return ports
    }

    /// `stdout` and `stderr` (a Pipe or a FileHandle) default to this process's own.
    static func launch(_ path: String, _ arguments: [String], stdout: Any? = nil, stderr: Any? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let stdout { process.standardOutput = stdout }
        if let stderr { process.standardError = stderr }
        _ = stopChildrenOnSignal
        do {
            try ChildProcesses.runWithNoSignalsBlocked(process)
        } catch {
            throw BenchError("cannot start \(path): \(error)")
        }
        children.withLockedValue { _ = $0.insert(process.processIdentifier) }
        return process
    }

    /// A child started elsewhere (Mosquitto) that a SIGINT or SIGTERM should stop too, until
    /// `release`d once it is stopped.
    public static func watch(_ pid: Int32) {
        _ = stopChildrenOnSignal
        children.withLockedValue { _ = $0.insert(pid) }
    }

    public static func release(_ pid: Int32) {
        children.withLockedValue { _ = $0.remove(pid) }
    }

    /// Children not yet seen to exit.
    private static let children = NIOLockedValueBox<Set<Int32>>([])
    /// Made by `directory()`, removed by the stack's `stop()` or on a signal.
    private static let directories = NIOLockedValueBox<[URL]>([])

    /// Set up with the first child: on SIGINT or SIGTERM every child still running gets SIGTERM
    /// before this process exits, so an interrupted bench leaves no Redis or server behind.
    /// (Each child has a process group of its own, so a Ctrl-C does not reach it.)
    private static let stopChildrenOnSignal: Void = {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                for pid in children.withLockedValue({ $0 }) { kill(pid, SIGTERM) }
                for directory in directories.withLockedValue({ $0 }) { try? FileManager.default.removeItem(at: directory) }
                exit(128 + number)
            }
            source.resume()
            // Kept for the life of the process.
            _ = Unmanaged.passRetained(source as AnyObject)
        }
    }()

    /// SIGTERM to all, then SIGKILL to those still running after 4 s. (Foundation's
    /// waitUntilExit can hang off the main thread.)
    static func terminate(_ processes: [Process]) async {
        await ChildProcesses.terminate(processes.map(\.processIdentifier), reaped: forget)
    }

    /// Waits up to `seconds` for a process to end by itself; false if it is still running.
    static func waitForExit(_ process: Process, seconds: Double) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if exited(process.processIdentifier) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    private static func exited(_ pid: Int32) -> Bool {
        ChildProcesses.exited(pid, reaped: forget)
    }

    private static func forget(_ pid: Int32) {
        children.withLockedValue { _ = $0.remove(pid) }
    }

    /// A short command's standard output (redis-cli asking one node something).
    static func output(_ path: String, _ arguments: [String]) async throws -> String {
        let pipe = Pipe()
        let process = try launch(path, arguments, stdout: pipe, stderr: FileHandle.nullDevice)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        if await !waitForExit(process, seconds: 5) { await terminate([process]) }
        return String(decoding: data, as: UTF8.self)
    }

    /// The last lines of a log file, for an error message (the directory is gone after the run).
    static func tail(_ file: URL, lines: Int = 8) -> String {
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        return text.split(whereSeparator: \.isNewline).suffix(lines).joined(separator: " | ")
    }

    /// Reads simp-server's ready line ("simp-server listening tcp=HOST:PORT ...") for its port.
    static func readyPort(_ server: Process) throws -> Int {
        try ready(server).port
    }

    /// The control port from simp-server's ready line, and its metrics address when it serves them.
    static func ready(_ server: Process) throws -> (port: Int, metrics: String?) {
        guard let pipe = server.standardOutput as? Pipe else { throw BenchError("simp-server has no stdout pipe") }
        var text = ""
        while !text.contains("\n") {
            let chunk = pipe.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw BenchError("simp-server exited before it was ready (see its stderr above)") }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let field = text.split(separator: " ").first(where: { $0.hasPrefix("tcp=") }),
              let port = field.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw BenchError("unexpected ready line from simp-server: \(text)")
        }
        let metrics = text.split(whereSeparator: \.isWhitespace).first(where: { $0.hasPrefix("metrics=") })
            .map { String($0.dropFirst("metrics=".count)) }
        return (port, metrics)
    }

    static func executable(_ name: String) throws -> String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "") + ":/usr/bin:/usr/sbin"
        for dir in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
            return "\(dir)/\(name)"
        }
        throw BenchError("\(name) not found; install it (scripts/bench.sh does: apt-get install -y redis-server mosquitto)")
    }
}
