import ArgumentParser
import Foundation
import SIMPMLS

@main
struct VectorsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-mls-vectors",
        abstract: "Checks SIMPMLS against mlswg/mls-implementations test vector files (RFC 9420).",
        discussion: """
            Each FILE is named as in mls-implementations' test-vectors/ (tree-math.json, crypto-basics.json, ...); \
            its base name selects the check. One line per file: file, cases, passed, failed, skipped. A case of a \
            cipher suite SIMPMLS does not implement is skipped. Exit status: 2 if a file is not implemented by this \
            build (said on stderr), else 1 if a case failed or a file could not be read or parsed, else 0 (64: a usage error).
            """)

    @Flag(name: .long, help: "One JSON object per file instead of a line.")
    var json = false

    @Flag(name: .long, help: "Also print each failed case's index and reason (stderr).")
    var verbose = false

    @Argument(help: "Test vector files.")
    var files: [String]

    func validate() throws {
        if files.isEmpty { throw ValidationError("give at least one test vector file") }
    }

    func run() throws {
        var notImplemented = false
        var failed = false
        for path in files {
            let name = URL(fileURLWithPath: path).lastPathComponent
            guard MLSTestVectors.implemented.contains(name) else {
                let known = MLSTestVectors.known.contains(name) ? "" : " (not a known mls-implementations vector file)"
                printError("simp-mls-vectors: \(path): not implemented by this build\(known)")
                emit(["file": name, "status": "not_implemented", "cases": 0, "passed": 0, "failed": 0, "skipped": 0])
                notImplemented = true
                continue
            }
            let report: MLSTestVectors.FileReport
            do {
                let data = try Data(contentsOf: URL(fileURLWithPath: path))
                report = try MLSTestVectors.check(file: name, contents: data)
            } catch {
                printError("simp-mls-vectors: \(path): \(error)")
                emit(["file": name, "status": "error", "cases": 0, "passed": 0, "failed": 0, "skipped": 0])
                failed = true
                continue
            }
            if report.failed > 0 { failed = true }
            if verbose {
                for (i, outcome) in report.outcomes.enumerated() {
                    if case .failed(let reason) = outcome { printError("\(name) case \(i): FAIL \(reason)") }
                }
            }
            emit([
                "file": name, "status": report.failed > 0 ? "failed" : "ok", "cases": report.cases,
                "passed": report.passed, "failed": report.failed, "skipped": report.skipped,
            ])
        }
        if notImplemented { throw ExitCode(2) }
        if failed { throw ExitCode(1) }
    }

    func emit(_ fields: [String: any Sendable]) {
        if json {
            guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
            print(String(decoding: data, as: UTF8.self))
        } else {
            let f = { (k: String) in "\(fields[k] ?? "")" }
            print("\(f("file")) cases=\(f("cases")) passed=\(f("passed")) failed=\(f("failed")) skipped=\(f("skipped")) \(f("status"))")
        }
    }

    func printError(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
