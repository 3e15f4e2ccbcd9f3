import Foundation
import NIOCore
import SIMPConformance
import SIMPCore
import SIMPMLS
import SIMPServer
import SIMPTestSupport
import Testing

/// `simp-conformance`'s checks against this project's server (issue 28): all pass, against its
/// default settings (`--e2e required`) and taking plaintext (`--e2e optional`); a server with one
/// rule changed fails the check of that rule, named by its section.
@Suite struct ConformanceTests {
    /// Short, so that the heartbeat checks (5.x) wait seconds, not the default minute and a half;
    /// not shorter, since the checker answers no pings: at 3 s (closed after 4.5 s of silence)
    /// check 7.1's 4,000 answers took longer than that on a loaded CI machine, and the server
    /// rightly closed the silent peer.
    static let heartbeat = TimeAmount.seconds(5)

    /// A server as an operator starts it, but for `heartbeat` and `configure`: `TestCluster`
    /// takes plaintext for the tests that talk through SIMPClient unencrypted, the suite runs
    /// against the server's own default (`--e2e required`).
    static func server(configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> TestCluster {
        try await TestCluster.start(heartbeat: heartbeat) { configuration in
            configuration.endToEnd = ServerConfiguration().endToEnd
            configure(&configuration)
        }
    }

    /// The checks use blocking sockets: they run on a thread of their own, not the test's pool.
    func run(_ cluster: TestCluster, only prefix: String = "") async -> [ConformanceResult] {
        await run(port: cluster.addresses.tcpPort, only: prefix)
    }

    func run(port: Int, only prefix: String = "", ids: Set<String>? = nil,
             endToEnd: ConformanceTarget.EndToEnd? = nil) async -> [ConformanceResult] {
        let target = ConformanceTarget(host: "127.0.0.1", port: port, endToEnd: endToEnd)
        let checks = Conformance.all.filter { check in check.id.hasPrefix(prefix) && (ids?.contains(check.id) ?? true) }
        return await withCheckedContinuation { done in
            Thread { done.resume(returning: Conformance.run(target, checks: checks)) }.start()
        }
    }

    /// `--only 4.1` is one check, not 4.10-4.12 as well; `--only 4` is the section; no two
    /// checks share an id.
    @Test func onlyPicksOneCheckOrOneSection() {
        #expect(Conformance.all.filter { $0.isIn("4.1") }.map(\.id) == ["4.1"])
        #expect(Conformance.all.filter { $0.isIn("4") }.map(\.id) == Conformance.all.filter { $0.id.hasPrefix("4.") }.map(\.id))
        #expect(Conformance.all.filter { $0.isIn("4.") }.count == Conformance.all.filter { $0.isIn("4") }.count)
        #expect(Conformance.all.filter { $0.isIn("4.1") || $0.isIn("4.10") }.count == 2)
        #expect(Set(Conformance.all.map(\.id)).count == Conformance.all.count, "two checks share an id")
    }

    /// The checks' sealed messages are what the document says one is, though no member could
    /// open them: an MLS PrivateMessage (SIMPMLS reads it so) whose SEALED message the server's
    /// rules take.
    @Test func theChecksMadeUpPrivateMessagesAreWellFormed() throws {
        let group = MLSFraming.groupID()
        let made = MLSFraming.privateMessage(group: group, epoch: 7, ciphertextBytes: 80)
        guard case .privateMessage(let message) = try MLSMessage(mlsDecoding: made) else {
            Issue.record("not an mls_private_message")
            return
        }
        #expect(message.groupID == group && message.epoch == 7 && message.contentType == .application)
        #expect(message.encryptedSenderData.count == 28 && message.ciphertext.count == 80)
        let sealed = Simp_Message.with { $0.messageID = "s1"; $0.toUser = "bob"; $0.type = .sealed; $0.content = Data(made).base64EncodedString() }
        #expect(MessageRules.problem(in: sealed, sealedOnly: true) == nil)
    }

    /// The key directory's checks on their own, twice against one server: a second run (the
    /// same accounts, what the first left stored) passes too.
    @Test func theKeyChecksPassAndPassAgain() async throws {
        let cluster = try await Self.server()
        for _ in 0..<2 {
            let results = await run(port: cluster.addresses.tcpPort, ids: ["4.15", "4.16", "4.32", "4.34", "4.35"])
            #expect(results.count == 5)
            #expect(results.allSatisfy { $0.passed }, "\(results.filter { !$0.passed }.map { "\($0.id): \($0.detail)" })")
        }
        await cluster.stop()
    }

    /// The commit checks on their own, twice against one server: each starts at the
    /// conversation's epoch the run before left, framing its commits for the MLS group the run
    /// before recorded.
    @Test func theCommitChecksPassAndPassAgain() async throws {
        let cluster = try await Self.server()
        for _ in 0..<2 {
            let results = await run(port: cluster.addresses.tcpPort, ids: ["4.17", "4.18", "4.26", "4.33"])
            #expect(results.count == 4)
            #expect(results.allSatisfy { $0.passed }, "\(results.filter { !$0.passed }.map { "\($0.id): \($0.detail)" })")
        }
        await cluster.stop()
    }

    @Test func theServerWithItsDefaultSettingsPassesEveryCheck() async throws {
        let cluster = try await Self.server()
        let results = await run(cluster)
        #expect(results.count == Conformance.all.count)
        #expect(results.allSatisfy { $0.passed }, "\(results.filter { !$0.passed }.map { "\($0.id): \($0.detail)" })")
        await cluster.stop()
    }

    /// Taking plaintext, the checks whose subject is plaintext (a plain TYPING, `markRead`, a
    /// plaintext message) expect it relayed, told and stored. The heartbeat's checks (5.x) do
    /// not depend on it and wait seconds: left out.
    @Test func aServerTakingPlaintextPassesEveryCheck() async throws {
        let cluster = try await Self.server { $0.endToEnd = .optional }
        let results = await run(port: cluster.addresses.tcpPort, ids: Set(Conformance.all.map(\.id).filter { !$0.hasPrefix("5.") }))
        #expect(results.contains { $0.id == "4.29" })
        #expect(results.allSatisfy { $0.passed }, "\(results.filter { !$0.passed }.map { "\($0.id): \($0.detail)" })")
        await cluster.stop()
    }

    /// The checks whose subject is plaintext, run as for a server that requires end-to-end
    /// encryption against one that takes plaintext, each fail: what they expect of
    /// `--e2e required` (nothing relayed, told or stored) is checked, not assumed.
    @Test func aServerTakingPlaintextWhereRequiredIsExpectedFailsThePlaintextChecks() async throws {
        let cluster = try await Self.server { $0.endToEnd = .optional }
        let plaintext: Set = ["2.5", "4.14", "4.19", "4.20", "4.29"]
        let failed = await run(port: cluster.addresses.tcpPort, ids: plaintext, endToEnd: .required).filter { !$0.passed }
        #expect(Set(failed.map(\.id)) == plaintext, "\(failed.map { "\($0.id): \($0.detail)" })")
        await cluster.stop()
    }

    @Test func aServerTakingLargerFramesBeforeLoginFailsTheFrameLimitCheck() async throws {
        let cluster = try await Self.server { $0.limits.anonymousFrameLength = 65_536 }
        let failed = await run(cluster, only: "1.").filter { !$0.passed }
        #expect(failed.map(\.id) == ["1.2"] && failed.first?.section == "1. Control frames", "\(failed)")
        await cluster.stop()
    }

    @Test func aServerTakingLargerFramesAfterLoginFailsThatLimitsCheck() async throws {
        let cluster = try await Self.server { $0.maxFrameLength = 131_072 }
        let failed = await run(cluster, only: "1.").filter { !$0.passed }
        #expect(failed.map(\.id) == ["1.10"] && failed.first?.section == "1. Control frames", "\(failed)")
        await cluster.stop()
    }

    /// A server behind the proxy takes 250 DATA datagrams a second (bursts of 500): the proxy
    /// relays on one thread of a debug build, under a loaded CI machine sometimes slower than
    /// the default 1,000 a second, and check 7.1's burst must still overrun the budget (it did
    /// not in 1 of 4 full runs on 2026-11-28). No other check sends more than a few datagrams.
    static func behindTheProxy(_ configuration: inout ServerConfiguration) {
        configuration.limits.messagesPerSecond = 250
        configuration.limits.messageBurst = 500
    }

    /// The proxy forwards everything unchanged when no rule is broken: what fails below is
    /// the rule, not the proxy.
    @Test func throughTheTamperingProxyWithNoRuleBrokenEveryCheckPasses() async throws {
        let cluster = try await Self.server(configure: Self.behindTheProxy)
        let proxy = try TamperingProxy(serverTCP: cluster.addresses.tcpPort, serverUDP: cluster.addresses.udpPort, rule: nil)
        let failed = await run(port: proxy.tcpPort).filter { !$0.passed }
        #expect(failed.isEmpty, "\(failed.map { "\($0.id): \($0.detail)" })")
        proxy.stop()
        await cluster.stop()
    }

    /// Each rule with the checks that test it (`bound`'s request id is checked at the bind
    /// and after a new address is taken), and their sections.
    @Test(arguments: [(TamperingProxy.Rule.acceptsReplays, ["2.1"], ["2. Datagrams"]),
                      (.acceptsForeignBindTokens, ["3.3"], ["3. Session set-up"]),
                      (.boundCarriesARequestID, ["2.3", "3.2"], ["2. Datagrams", "3. Session set-up"])])
    func aServerBreakingOneRuleFailsThatRulesChecksOnly(rule: TamperingProxy.Rule, checks: [String], sections: [String]) async throws {
        let cluster = try await Self.server(configure: Self.behindTheProxy)
        let proxy = try TamperingProxy(serverTCP: cluster.addresses.tcpPort, serverUDP: cluster.addresses.udpPort, rule: rule)
        let failed = await run(port: proxy.tcpPort).filter { !$0.passed }
        #expect(failed.map(\.id) == checks && failed.map(\.section) == sections, "\(failed.map { "\($0.id): \($0.detail)" })")
        proxy.stop()
        await cluster.stop()
    }

    /// The executable, as an operator runs it: a host name, `--json`, exit 0 when all pass,
    /// 1 with the failed check named when one fails.
    @Test func theCommandPrintsEachCheckAndExitsByTheResult() async throws {
        let cluster = try await Self.server()
        let binary = try productPath("simp-conformance")
        let run = try ChildProcess(binary, ["--server", "localhost:\(cluster.addresses.tcpPort)", "--json", "--only", "1."])
        #expect(run.waitForExit(timeout: 60) == 0, "\(run.stdout)\(run.stderr)")
        let lines = run.stdout.split(separator: "\n")
        #expect(lines.count == Conformance.all.filter { $0.id.hasPrefix("1.") }.count + 1)
        #expect(lines.last == #"{"checks":10,"failed":0,"passed":10}"#)

        let broken = try await Self.server { $0.limits.anonymousFrameLength = 65_536 }
        let failing = try ChildProcess(binary, ["--server", "127.0.0.1:\(broken.addresses.tcpPort)", "--only", "1.2"])
        #expect(failing.waitForExit(timeout: 60) == 1)
        #expect(failing.stdout.contains("FAIL 1.2 [1. Control frames]") && failing.stdout.contains("0 of 1 checks passed"), "\(failing.stdout)")
        let refused = try ChildProcess(binary, ["--server", "no-such-host.invalid:1"])
        #expect(refused.waitForExit(timeout: 30) != 0 && refused.stderr.contains("--server must be HOST:PORT"), "\(refused.stderr)")
        // A server meant to require encryption that takes plaintext: told what to expect, the
        // command fails the plaintext checks where learning the mode would pass them.
        let plaintext = try await Self.server { $0.endToEnd = .optional }
        let expecting = try ChildProcess(binary, ["--server", "127.0.0.1:\(plaintext.addresses.tcpPort)", "--only", "4.29", "--expect-e2e", "required"])
        #expect(expecting.waitForExit(timeout: 60) == 1 && expecting.stdout.contains("FAIL 4.29"), "\(expecting.stdout)")
        let learning = try ChildProcess(binary, ["--server", "127.0.0.1:\(plaintext.addresses.tcpPort)", "--only", "4.29"])
        #expect(learning.waitForExit(timeout: 60) == 0, "\(learning.stdout)")
        await plaintext.stop()
        await broken.stop()
        await cluster.stop()
    }
}
