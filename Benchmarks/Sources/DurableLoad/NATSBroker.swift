import Foundation
import MQTTLoad

/// A private nats-server with JetStream for one run: loopback, a free port, file storage in a
/// temporary directory that stop() removes.
public final class NATSBroker: LocalBroker {
    public let port: Int
    /// nats-server itself: sample its CPU.
    public let pid: Int32
    /// Holds the JetStream store; internal for the test that checks a run removes its streams.
    let directory: String
    private let stopping = StopOnce()

    static let name = "nats-server"
    static let install = "scripts/install-brokers.sh (apt-get install nats-server)"

    /// /usr/sbin/nats-server (where Debian puts it), else the first `nats-server` on PATH.
    public static func executable() -> String? {
        BrokerStartup.executable([name], in: ["/usr/sbin", "/usr/bin"])
    }

    public static func start() async throws -> NATSBroker {
        guard let binary = executable() else { throw DurableLoadError.brokerNotFound(broker: name, install: install) }
        return try await BrokerStartup.withRetries(name) {
            try await start(binary, port: try await LocalPorts.free())
        }
    }

    private static func start(_ binary: String, port: Int) async throws -> NATSBroker {
        let directory = try BrokerStartup.directory("nats")
        let process: BrokerProcess
        do {
            process = try BrokerProcess.start(binary, arguments(port: port, directory: directory), outputFile: directory + "/output")
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        let broker = NATSBroker(port: port, pid: process.pid, directory: directory)
        do {
            try await BrokerStartup.waitUntilListening(port, process, broker: name, seconds: 10)
        } catch let exit as BrokerStartup.EarlyExit {
            // Already reaped: there is nothing left to signal.
            try? FileManager.default.removeItem(atPath: directory)
            throw exit
        } catch {
            await broker.stop()
            throw error
        }
        return broker
    }

    /// JetStream with its store in the run's directory.
    static func arguments(port: Int, directory: String) -> [String] {
        ["--addr", "127.0.0.1", "--port", "\(port)", "--jetstream", "--store_dir", directory + "/jetstream",
         "--server_name", "simp-bench-\(port)"]
    }

    private init(port: Int, pid: Int32, directory: String) {
        self.port = port
        self.pid = pid
        self.directory = directory
    }

    /// SIGTERM, then SIGKILL after 4 s; the child is reaped either way. Only the first call does anything.
    public func stop() async {
        guard stopping.first() else { return }
        await ChildProcesses.terminate([pid])
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// True for the first caller only, from any thread.
final class StopOnce: Sendable {
    private let lock = NSLock()
    nonisolated(unsafe) private var stopped = false

    func first() -> Bool {
        lock.withLock {
            defer { stopped = true }
            return !stopped
        }
    }
}
