import Foundation
import SIMPClient
import SIMPTestSupport
import Testing

/// The REPL on a real pseudo-terminal: tmux runs the built `simp` against a real Redis and
/// server; the test types keys with `send-keys` and reads the screen with `capture-pane`,
/// polling until what it expects appears.
@Suite(.serialized) struct REPLTerminalTests {
    @Test func bannerPromptColourAndArrowKeyEditing() async throws {
        try await withCluster { cluster in
            try await cluster.register("alice")
            let (bob, bobLog) = try await cluster.connectedClient("bob")
            let screen = try Terminal(cluster, user: "alice")
            defer { screen.kill() }

            try screen.waitFor("simp connected to 127.0.0.1:\(cluster.addresses.tcpPort) as alice, TLS off (plain TCP)")
            try screen.waitFor("alice> ")
            #expect(screen.capture(escapes: true).contains("\u{1B}["), "colour on a terminal")

            screen.type("/send bob helo")
            screen.keys("Left", "l", "Enter")
            #expect(await bobLog.wait { $0.messages.map(\.text) == ["hello"] })
            try screen.waitFor("→ bob: hello  #1")
            try screen.waitFor("#1 ✓✓ delivered")

            screen.type("/send nobody hi")
            screen.keys("Enter")
            try screen.waitFor("#2 ✗ failed: no such user: nobody")
            screen.type("/status")
            screen.keys("Enter")
            try screen.waitFor("server 127.0.0.1:\(cluster.addresses.tcpPort), TLS off (plain TCP), user alice (connected, path udp)")
            try screen.waitFor("sent this run: 2, pending (not yet delivered or failed): 0")
            await bob.close()
        }
    }

    @Test func historyIsRecalledAfterARestart() async throws {
        try await withCluster { cluster in
            try await cluster.register("alice")
            let state = FileManager.default.temporaryDirectory.appendingPathComponent("simp-state-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: state) }
            let first = try Terminal(cluster, user: "alice", environment: ["XDG_STATE_HOME": state])
            defer { first.kill() }
            try first.waitFor("alice> ")
            first.type("/history carol 3")
            first.keys("Enter")
            try first.waitFor("no messages with carol")
            first.type("/quit")
            first.keys("Enter")
            try first.waitForExit()
            let file = state + "/simp/history"
            let mode = (try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) ?? 0
            #expect(mode & 0o777 == 0o600)

            let second = try Terminal(cluster, user: "alice", environment: ["XDG_STATE_HOME": state])
            defer { second.kill() }
            try second.waitFor("alice> ")
            second.keys("Up")
            try second.waitFor("alice> /quit")
            second.keys("Up")
            try second.waitFor("alice> /history carol 3")
            second.keys("C-u")
            second.type("/send ca")
            second.keys("Tab")
            try second.waitFor("alice> /send carol ", "a name from the history completes")
        }
    }

    @Test func tabCompletesCommandsAndUsersAndAMessageWaitsAboveTheHalfTypedLine() async throws {
        try await withCluster { cluster in
            try await cluster.register("alice")
            let (bob, bobLog) = try await cluster.connectedClient("bob")
            let screen = try Terminal(cluster, user: "alice")
            defer { screen.kill() }
            try screen.waitFor("alice> ")

            _ = try await bob.send(to: "alice", text: "hi alice")
            try screen.waitFor("bob: hi alice")
            screen.type("/sen")
            screen.keys("Tab")
            try screen.waitFor("alice> /send ")
            screen.type("b")
            screen.keys("Tab")
            try screen.waitFor("alice> /send bob ")
            screen.type("half")
            screen.keys("Left", "Left")
            try screen.waitFor("alice> /send bob half")

            _ = try await bob.send(to: "alice", text: "interrupting")
            try screen.waitFor("bob: interrupting")
            let lines = screen.lines()
            let message = try #require(lines.firstIndex { $0.hasSuffix("bob: interrupting") })
            #expect(lines.last == "alice> /send bob half", "the half-typed line is intact, below the message: \(lines)")
            #expect(lines.firstIndex(of: "alice> /send bob half")! > message)

            screen.type("-")
            try screen.waitFor("alice> /send bob ha-lf", "the cursor is back where it was")
            screen.keys("End")
            screen.type(" dóne ✓")
            screen.keys("Enter")
            #expect(await bobLog.wait { $0.messages.map(\.text) == ["ha-lf dóne ✓"] })
            await bob.close()
        }
    }

    @Test func noColourWithNO_COLORAndHostileTextShownEscaped() async throws {
        try await withCluster { cluster in
            try await cluster.register("alice")
            let (bob, _) = try await cluster.connectedClient("bob")
            let screen = try Terminal(cluster, user: "alice", environment: ["NO_COLOR": "1"])
            defer { screen.kill() }
            try screen.waitFor("alice> ")

            _ = try await bob.send(to: "alice", text: "\u{1B}[2J\u{1B}[31mred\u{07}")
            try screen.waitFor(#"bob: \e[2J\e[31mred\x07"#)
            #expect(screen.lines().contains { $0.contains("simp connected to") }, "the screen was not cleared")
            #expect(!screen.capture(escapes: true).contains("\u{1B}"), "no colour with NO_COLOR")
            await bob.close()
        }
    }
}

/// Through a pipe the REPL keeps its plain line format; /status is one line there.
@Suite struct REPLPipeStatusTests {
    @Test func statusThroughAPipeIsOnePlainLine() async throws {
        try await withCluster { cluster in
            try await cluster.register("alice")
            let alice = try ChildProcess(try productPath("simp"),
                                         ["--no-e2e", "--server", "127.0.0.1:\(cluster.addresses.tcpPort)", "--user", "alice", "--password", "pw-alice"],
                                         environment: ["XDG_CONFIG_HOME": FileManager.default.temporaryDirectory.appendingPathComponent("simp-config-\(UUID().uuidString)").path])
            #expect(alice.waitForLine(timeout: 20) { $0 == "connected as alice" } != nil)
            alice.write("/status\n")
            let line = alice.waitForLine(timeout: 20) { $0.hasPrefix("server ") }
            #expect(line == "server 127.0.0.1:\(cluster.addresses.tcpPort), TLS off, user alice, pending sends 0, path udp")
            alice.closeStdin()
            #expect(alice.waitForExit(timeout: 20) == 0)
            #expect(!alice.stdout.contains("\u{1B}"), "no colour through a pipe")
        }
    }
}

/// A cluster for the body, stopped (Redis too) even when the body throws: a `defer` cannot
/// await, and a stop left to a detached task does not run once the test process exits.
func withCluster(_ body: (TestCluster) async throws -> Void) async throws {
    let cluster = try await TestCluster.start()
    do {
        try await body(cluster)
    } catch {
        await cluster.stop()
        throw error
    }
    await cluster.stop()
}

/// One tmux server of its own (its own socket, in a directory removed at the end) running
/// `simp` in a 120x30 window.
final class Terminal {
    let session = "repl"
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-home-\(UUID().uuidString)").path
    var socket: String { home + "/tmux" }

    init(_ cluster: TestCluster, user: String, environment: [String: String] = [:]) throws {
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let simp = try productPath("simp")
        var env = ["HOME": home, "XDG_CONFIG_HOME": home + "/config", "XDG_STATE_HOME": home + "/state", "LANG": "C.UTF-8",
                   // Colour unless a test asks for NO_COLOR, whatever the runner's environment says.
                   "NO_COLOR": ""]
        env.merge(environment) { $1 }
        let command = ["env"] + env.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            + [simp, "--no-e2e", "--server", "127.0.0.1:\(cluster.addresses.tcpPort)", "--user", user, "--password", "pw-\(user)"]
        _ = try tmux(["new-session", "-d", "-x", "120", "-y", "30", "-s", session, command.map(Self.quoted).joined(separator: " ")])
    }

    /// Literal text, as typed.
    func type(_ text: String) { _ = try? tmux(["send-keys", "-t", session, "-l", text]) }

    /// Named keys (Left, Up, Enter, Tab, C-u).
    func keys(_ names: String...) { _ = try? tmux(["send-keys", "-t", session] + names) }

    func capture(escapes: Bool = false) -> String {
        (try? tmux(["capture-pane", "-p", "-N", "-t", session] + (escapes ? ["-e"] : []))) ?? ""
    }

    /// The screen's lines, trailing blanks and empty lines at the bottom dropped.
    func lines() -> [String] {
        var lines = capture().split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.reversed().drop { $0 == " " }.reversed())
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    func waitFor(_ text: String, _ why: String = "", timeout: TimeInterval = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !capture().contains(text) {
            guard Date() < deadline else {
                throw TestSupportError("\(text.debugDescription) not on the screen \(why) within \(timeout)s:\n\(capture())")
            }
            usleep(50_000)
        }
    }

    /// Until simp has exited and with it the tmux session.
    func waitForExit(timeout: TimeInterval = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while (try? tmux(["has-session", "-t", session])) != nil {
            guard Date() < deadline else { throw TestSupportError("simp still running after \(timeout)s:\n\(capture())") }
            usleep(50_000)
        }
    }

    func kill() {
        _ = try? tmux(["kill-server"])
        try? FileManager.default.removeItem(atPath: home)
    }

    /// Runs one tmux command on this terminal's socket; its stdout, or an error if it failed.
    @discardableResult
    private func tmux(_ args: [String]) throws -> String {
        let process = try ChildProcess("/usr/bin/tmux", ["-S", socket] + args)
        guard process.waitForExit(timeout: 10) == 0 else { throw TestSupportError("tmux \(args.first ?? "") failed: \(process.stderr)") }
        return process.stdout
    }

    private static func quoted(_ word: String) -> String {
        "'" + word.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }
}
