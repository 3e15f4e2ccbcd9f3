#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MQTTLoad

/// A process a broker run starts (the broker, its helpers), with its stdout and stderr kept in
/// a file for the error message if it does not start.
struct BrokerProcess: Sendable {
    let pid: Int32
    let outputFile: String

    /// `environment` is added to this process's own.
    static func start(_ binary: String, _ arguments: [String], environment: [String: String] = [:],
                      outputFile: String) throws -> BrokerProcess {
        _ = FileManager.default.createFile(atPath: outputFile, contents: nil)
        let output = FileHandle(forWritingAtPath: outputFile)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        try ChildProcesses.runWithNoSignalsBlocked(process)
        return BrokerProcess(pid: process.processIdentifier, outputFile: outputFile)
    }

    func exited() -> Bool { ChildProcesses.exited(pid) }

    /// The end of what it printed, enough for an error message.
    func output() -> String {
        let text = (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? ""
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? "(it printed nothing)" : String(trimmed.suffix(2000))
    }
}

/// What starting a broker shares between RabbitMQ and NATS.
enum BrokerStartup {
    /// The process exited before it was ready, with what it printed.
    struct EarlyExit: Error {
        let output: String
    }

    /// The first executable of `names` that `accept` takes, each tried where Debian puts it, then on PATH.
    static func executable(_ names: [String], in directories: [String], accept: (String) -> Bool = { _ in true }) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = names.flatMap { name in (directories + path.split(separator: ":").map(String.init)).map { "\($0)/\(name)" } }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) && accept($0) }
    }

    /// A new private directory for one broker's data, logs and configuration.
    static func directory(_ broker: String) throws -> String {
        let directory = NSTemporaryDirectory() + "simp-bench-\(broker)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The port LocalPorts hands out can be taken again before the broker binds it: then the
    /// broker exits, and the next attempt takes other ports.
    static func withRetries<T>(_ broker: String, _ attempt: () async throws -> T) async throws -> T {
        var attempts = 1
        while true {
            do {
                return try await attempt()
            } catch let exit as EarlyExit {
                guard attempts < 3 else { throw DurableLoadError.brokerDidNotStart(broker: broker, why: exit.output) }
                attempts += 1
            }
        }
    }

    /// Returns once something accepts connections on `port`; throws EarlyExit if `process` exits first.
    static func waitUntilListening(_ port: Int, _ process: BrokerProcess, broker: String, seconds: Double) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if process.exited() { throw EarlyExit(output: process.output()) }
            if try await LocalPorts.waitUntilListening(port, seconds: 0.1) { return }
        }
        throw DurableLoadError.brokerDidNotStart(broker: broker,
                                                 why: "not listening on 127.0.0.1:\(port) after \(Int(seconds)) s. \(process.output())")
    }

    /// `count` distinct free ports.
    static func freePorts(_ count: Int) async throws -> [Int] {
        var ports: [Int] = []
        while ports.count < count {
            let port = try await LocalPorts.free()
            if !ports.contains(port) { ports.append(port) }
        }
        return ports
    }
}
