import Foundation
import MQTTLoad
import NIOCore
import NIOPosix

public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A private Redis (AOF everysec, data in a temporary directory) and a simp-server on free
/// ports, for `simp-bench --spawn`. Both stop with `stop()`.
public final class SpawnedStack: @unchecked Sendable {
    public let redisPID: Int32
    public let serverPID: Int32
    public let serverPort: Int
    private let redis: Process
    private let server: Process
    private let directory: URL

    /// `serverArguments` are added to simp-server's command line (limits, log level).
    public static func start(serverBinary: String, serverArguments: [String]) async throws -> SpawnedStack {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let redisPort = try await LocalPorts.free()
        let redis = try launch(executable("redis-server"), [
            "--port", "\(redisPort)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
            "--appendfsync", "everysec", "--dir", directory.path, "--daemonize", "no", "--loglevel", "warning",
            // Off stdout, which carries the report.
            "--logfile", directory.appendingPathComponent("redis.log").path,
        ])
        do {
            guard try await LocalPorts.waitUntilListening(redisPort, seconds: 10) else {
                throw BenchError("redis-server did not listen on 127.0.0.1:\(redisPort) within 10 s")
            }
            let server = try launch(serverBinary, ["--port", "0", "--udp-port", "0",
                                                   "--redis", "redis://127.0.0.1:\(redisPort)"] + serverArguments,
                                    stdout: Pipe())
            let port = try readyPort(server)
            return SpawnedStack(redis: redis, server: server, port: port, directory: directory)
        } catch {
            await terminate(redis)
            throw error
        }
    }

    private init(redis: Process, server: Process, port: Int, directory: URL) {
        self.redis = redis
        self.server = server
        self.directory = directory
        serverPort = port
        redisPID = redis.processIdentifier
        serverPID = server.processIdentifier
    }

    /// SIGTERM, then SIGKILL after 4 s. (Foundation's waitUntilExit can hang off the main thread.)
    public func stop() async {
        for process in [server, redis] { await Self.terminate(process) }
        try? FileManager.default.removeItem(at: directory)
    }

    static func terminate(_ process: Process) async {
        let pid = process.processIdentifier
        kill(pid, SIGTERM)
        for _ in 0..<200 {
            if exited(pid) { return }
            try? await Task.sleep(for: .milliseconds(20))
        }
        kill(pid, SIGKILL)
        _ = exited(pid)
    }

    /// Reaps the child if it has exited. (Foundation's isRunning can lag far behind.)
    private static func exited(_ pid: Int32) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) != 0
    }

    private static func launch(_ path: String, _ arguments: [String], stdout: Pipe? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let stdout { process.standardOutput = stdout }
        do {
            try process.run()
        } catch {
            throw BenchError("cannot start \(path): \(error)")
        }
        return process
    }

    /// Reads simp-server's ready line ("simp-server listening tcp=HOST:PORT ...") for its port.
    private static func readyPort(_ server: Process) throws -> Int {
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
        return port
    }

    static func executable(_ name: String) throws -> String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "") + ":/usr/bin:/usr/sbin"
        for dir in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
            return "\(dir)/\(name)"
        }
        throw BenchError("\(name) not found; install it (scripts/bench.sh does: apt-get install -y redis-server mosquitto)")
    }
}
