import Foundation
import SIMPTestSupport
import Testing

/// deploy/simp-server.service as systemd reads it.
@Suite struct DeployTests {
    static let systemdAnalyze = try? findExecutable("systemd-analyze").path

    /// The unit with ExecStart pointing at the binary just built (verify checks that the
    /// program exists), in a directory of its own so the file keeps its unit name.
    func unitUnderTest() throws -> String {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }
        let unit = try String(contentsOf: root.appendingPathComponent("deploy/simp-server.service"), encoding: .utf8)
        #expect(unit.contains("ExecStart=/usr/local/bin/simp-server\n"))
        let built = unit.replacingOccurrences(of: "ExecStart=/usr/local/bin/simp-server", with: "ExecStart=\(try productPath("simp-server"))")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("simp-unit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("simp-server.service").path
        try built.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func analyze(_ arguments: [String]) throws -> (status: Int32?, output: String) {
        let process = try ChildProcess(Self.systemdAnalyze!, arguments)
        let status = process.waitForExit(timeout: 30)
        return (status, process.stdout + process.stderr)
    }

    @Test(.enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed (Debian package systemd; scripts/test.sh installs it)"))
    func unitPassesSystemdVerify() throws {
        let (status, output) = try analyze(["verify", try unitUnderTest()])
        #expect(status == 0, "systemd-analyze verify: \(output)")
        #expect(output.isEmpty, "verify warns: \(output)")
    }

    /// systemd's own score of the sandbox (0 fully locked down ... 10 unprotected); "OK" is below 2.
    @Test(.enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed (Debian package systemd; scripts/test.sh installs it)"))
    func unitIsLockedDown() throws {
        let (status, output) = try analyze(["security", "--offline=true", try unitUnderTest()])
        #expect(status == 0, "systemd-analyze security: \(output)")
        guard let range = output.range(of: #"Overall exposure level for simp-server\.service: \d+\.\d"#, options: .regularExpression),
              let level = Double(output[range].split(separator: " ").last ?? "") else {
            Issue.record("no exposure level in: \(output)")
            return
        }
        #expect(level < 2.0, "exposure \(level): \(output)")
    }
}
