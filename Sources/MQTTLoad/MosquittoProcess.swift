import Foundation
import NIOCore
import NIOPosix

/// A private Mosquitto for one run: loopback, a free port, no persistence, no limits on
/// messages in flight or queued (so the pattern's window is the only throttle).
public final class MosquittoProcess: Sendable {
    public let port: Int
    public let pid: Int32
    private let directory: String

    public static func start() async throws -> MosquittoProcess {
        guard let binary = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].first(where: FileManager.default.isExecutableFile) else {
            throw MQTTError.unexpected("mosquitto not found; install it with apt-get install mosquitto")
        }
        let port = try await LocalPorts.free()
        let directory = NSTemporaryDirectory() + "simp-bench-mosquitto-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let config = """
        listener \(port) 127.0.0.1
        allow_anonymous true
        persistence false
        max_inflight_messages 0
        max_queued_messages 0
        log_dest none
        """
        try config.write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-c", directory + "/mosquitto.conf"]
        try process.run()
        let broker = MosquittoProcess(port: port, pid: process.processIdentifier, directory: directory)
        do {
            try await broker.waitUntilListening()
        } catch {
            await broker.stop()
            throw error
        }
        return broker
    }

    private init(port: Int, pid: Int32, directory: String) {
        self.port = port
        self.pid = pid
        self.directory = directory
    }

    /// SIGTERM, then SIGKILL after 4 s; the child is reaped either way.
    public func stop() async {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<200 {
            if waitpid(pid, &status, WNOHANG) != 0 { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        if waitpid(pid, &status, WNOHANG) == 0 {
            kill(pid, SIGKILL)
            _ = waitpid(pid, &status, 0)
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func waitUntilListening() async throws {
        guard try await LocalPorts.waitUntilListening(port, seconds: 5) else {
            throw MQTTError.unexpected("mosquitto did not listen on 127.0.0.1:\(port) within 5 s")
        }
    }
}
