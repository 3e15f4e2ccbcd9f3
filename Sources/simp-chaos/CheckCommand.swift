import ArgumentParser
import Foundation
import GRDB
import SIMPChaos

/// `simp-chaos check DIR`: the checker again over a kept run directory (a run with violations
/// keeps it), for reading a violation without running the faults again.
struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check the client logs a run kept in its directory (logs/USER.jsonl, logs/excused.txt, logs/e2e, data-USER/).")

    @Argument(help: "The run directory a run printed.")
    var directory: String

    @Flag(help: "Print the report as one JSON object.")
    var json = false

    func run() throws {
        let run = RunDirectory(URL(fileURLWithPath: directory))
        let users = try run.users()
        guard !users.isEmpty else { throw ValidationError("no client logs in \(run.logs.path)") }
        var kept = Set<String>()
        for user in users { kept.formUnion((try? run.keptMessages(of: user)) ?? []) }
        let logs = try users.map { ClientLog(user: $0, events: LogEvent.parseLog(try String(contentsOf: run.log(of: $0), encoding: .utf8))) }
        let report = Checker.check(logs, excused: run.excused(), keptOnDisk: kept, endToEnd: run.endToEnd)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print("messages \(report.messages), accepted \(report.accepted), delivered \(report.delivered), failed \(report.failed), "
                  + "ambiguous \(report.ambiguousFailed), excused lost \(report.excusedLost), kept not shown \(report.keptNotShown)"
                  + (run.endToEnd ? ", decrypted \(report.decrypted), undecryptable \(report.undecryptable)" : ", plaintext run"))
            print("violations: \(report.violations.count)")
            for violation in report.violations { print("  \(violation)") }
        }
        if !report.violations.isEmpty { throw ExitCode(1) }
    }
}

/// Where a run keeps what the checker needs: every client's log, the ids Redis was let lose,
/// and the data directories.
struct RunDirectory {
    let root: URL

    init(_ root: URL) { self.root = root }

    var logs: URL { root.appendingPathComponent("logs") }

    func log(of user: String) -> URL { logs.appendingPathComponent("\(user).jsonl") }

    func dataDirectory(of user: String) -> URL { root.appendingPathComponent("data-\(user)") }

    var excusedFile: URL { logs.appendingPathComponent("excused.txt") }

    /// Present when the run was end-to-end encrypted (every message must have been decrypted).
    var endToEndMarker: URL { logs.appendingPathComponent("e2e") }

    var endToEnd: Bool { FileManager.default.fileExists(atPath: endToEndMarker.path) }

    func users() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: logs.path).filter { $0.hasSuffix(".jsonl") }
            .map { String($0.dropLast(".jsonl".count)) }.sorted()
    }

    func excused() -> Set<String> {
        Set(((try? String(contentsOf: excusedFile, encoding: .utf8)) ?? "").split(whereSeparator: \.isNewline).map(String.init))
    }

    /// The ids of the received messages in a client's data directory (the client store's
    /// `received` table); none when it has no data directory.
    func keptMessages(of user: String) throws -> [String] {
        let path = dataDirectory(of: user).appendingPathComponent("\(user).sqlite").path
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        var configuration = Configuration()
        configuration.readonly = true
        return try DatabaseQueue(path: path, configuration: configuration).read { try String.fetchAll($0, sql: "SELECT id FROM received") }
    }
}
