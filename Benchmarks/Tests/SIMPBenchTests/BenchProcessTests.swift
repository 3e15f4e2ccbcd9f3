import Foundation
import SIMPTestSupport
import Testing

/// simp-bench as a user runs it: its own Redis and simp-server, a short load, a JSON report.
@Suite struct BenchProcessTests {
    @Test func aShortSpawnedRunReportsEveryMessageOnceAndNoneLost() throws {
        let bench = try ChildProcess(try productPath("simp-bench"),
                                     ["--spawn", "--pairs", "2", "--window", "4", "--duration", "1", "--warmup", "0.5", "--json"])
        #expect(bench.waitForExit(timeout: 60) == 0, "stderr: \(bench.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(bench.stdout.utf8)) as? [String: Any])
        let simp = try #require((report["systems"] as? [[String: Any]])?.first)
        #expect(simp["system"] as? String == "SIMP")
        #expect((simp["received"] as? Int ?? 0) > 0)
        #expect(simp["received"] as? Int == simp["sent"] as? Int)
        #expect(simp["lost"] as? Int == 0)
        #expect(simp["duplicates"] as? Int == 0)
        #expect(simp["failed"] as? Int == 0)
        let usage = simp["usage"] as? [String: Any]
        #expect(usage?["server"] != nil && usage?["redis"] != nil, "server and Redis CPU are reported")
    }

    /// The chat pattern with end-to-end encryption: every user's identity, each user's
    /// conversations with its contacts made first, then the run; every message read decrypted
    /// (the receivers count only texts they could read), none lost or failed.
    @Test func anEncryptedChatRunWithContactsDeliversEveryMessage() throws {
        let bench = try ChildProcess(try productPath("simp-bench"),
                                     ["--spawn", "--sessions", "12", "--rate", "2", "--contacts", "3", "--e2e",
                                      "--duration", "2", "--warmup", "1", "--json"])
        #expect(bench.waitForExit(timeout: 180) == 0, "stderr: \(bench.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(bench.stdout.utf8)) as? [String: Any])
        #expect((report["pattern"] as? [String: Any])?["contacts"] as? Int == 3)
        let simp = try #require((report["systems"] as? [[String: Any]])?.first)
        #expect(simp["system"] as? String == "SIMP (e2e)")
        #expect((simp["received"] as? Int ?? 0) > 0)
        #expect(simp["received"] as? Int == simp["sent"] as? Int)
        #expect(simp["lost"] as? Int == 0 && simp["duplicates"] as? Int == 0 && simp["failed"] as? Int == 0)
        #expect(bench.stderr.contains("making 36 encrypted conversations"))
    }

    @Test func aBadPatternIsRefusedWithAClearError() throws {
        let bench = try ChildProcess(try productPath("simp-bench"), ["--pairs", "0"])
        #expect(bench.waitForExit(timeout: 20) != 0)
        #expect(bench.stderr.contains("--pairs, --window and --threads must be positive"))
    }
}
