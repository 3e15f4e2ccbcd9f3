import Foundation
import SIMPClient
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `simp send`, `listen`, `history` and `login` as a script runs them: real server and Redis
/// processes, the built `simp` binary, exit statuses and what lands on stdout and stderr.
@Suite(.serialized) struct OneShotCommandTests {
    /// A credentials directory of the test's own, so no test reads or writes the user's.
    let configHome = FileManager.default.temporaryDirectory.appendingPathComponent("simp-config-\(UUID().uuidString)").path

    func simp(_ node: ServerNode, _ command: String, _ args: [String]) throws -> ChildProcess {
        try simp(command, ["--server", "127.0.0.1:\(node.server.tcpPort)"] + args)
    }

    func simp(_ command: String, _ args: [String]) throws -> ChildProcess {
        // Plaintext (the nodes are --e2e optional): what is tested is each command, not encryption.
        try ChildProcess(try productPath("simp"), [command, "--no-e2e"] + args, environment: ["XDG_CONFIG_HOME": configHome])
    }

    func register(_ node: ServerNode, _ users: String...) async throws {
        let client = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: node.server.tcpPort))
        for user in users { try await client.register(user: user, password: "pw-\(user)") }
    }

    func jsonLines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func trimmed(_ text: String) -> String { text.trimmingCharacters(in: .whitespacesAndNewlines) }

    @Test func sendExitsZeroWhenAListenerGotItAndListenStopsOnSIGINT() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "bob")
        let bob = try simp(node, "listen", ["--user", "bob", "--password", "pw-bob", "--json"])
        #expect(bob.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil)

        let send = try simp(node, "send", ["--user", "alice", "--password", "pw-alice", "--to", "bob", "hello", "bob"])
        #expect(send.waitForExit(timeout: 30) == 0, "stderr: \(send.stderr)")
        let id = trimmed(send.stdout)
        #expect(!id.isEmpty && send.stderr.isEmpty)

        #expect(bob.waitForLine(timeout: 10) { $0.contains(#""event":"message""#) } != nil)
        let message = jsonLines(bob.stdout).first { $0["event"] as? String == "message" }
        #expect(message?["id"] as? String == id)
        #expect(message?["from"] as? String == "alice")
        #expect(message?["text"] as? String == "hello bob")
        bob.signal(SIGINT)
        #expect(bob.waitForExit(timeout: 10) == 0)
    }

    /// `send --file` sends a file's text, in parts past one datagram, and `listen` prints it
    /// whole, once; a file over the server's limit is refused (exit 4) and nothing arrives; a
    /// file that cannot be read exits 1, and text with --file is a usage error (exit 2).
    @Test func sendFileDeliversALongTextWholeAndRefusesOneOverTheLimit() async throws {
        let node = try ServerNode(extra: ["--max-message-bytes", "20000"])
        defer { node.stop() }
        try await register(node, "alice", "bob")
        let bob = try simp(node, "listen", ["--user", "bob", "--password", "pw-bob", "--json"])
        #expect(bob.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-file-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let text = (1...300).map { "line \($0): ünïcödé\n" }.joined()
        let notes = directory.appendingPathComponent("notes.txt").path
        try text.write(toFile: notes, atomically: true, encoding: .utf8)
        let tooLong = directory.appendingPathComponent("too-long.txt").path
        try String(repeating: "x", count: 20_001).write(toFile: tooLong, atomically: true, encoding: .utf8)

        let refused = try simp(node, "send", ["--user", "alice", "--password", "pw-alice", "--to", "bob", "--file", tooLong])
        #expect(refused.waitForExit(timeout: 30) == 4)
        #expect(refused.stderr.contains("message is 20001 bytes; the limit is 20000"), "stderr: \(refused.stderr)")
        let unreadable = try simp(node, "send", ["--user", "alice", "--password", "pw-alice", "--to", "bob", "--file", directory.path + "/none"])
        #expect(unreadable.waitForExit(timeout: 30) == 1)
        let both = try simp(node, "send", ["--user", "alice", "--password", "pw-alice", "--to", "bob", "--file", notes, "hi"])
        #expect(both.waitForExit(timeout: 30) == 2)

        let send = try simp(node, "send", ["--user", "alice", "--password", "pw-alice", "--to", "bob", "--file", notes])
        #expect(send.waitForExit(timeout: 30) == 0, "stderr: \(send.stderr)")
        let id = trimmed(send.stdout)
        #expect(bob.waitForLine(timeout: 10) { $0.contains(id) } != nil)
        let messages = jsonLines(bob.stdout).filter { $0["event"] as? String == "message" }
        #expect(messages.count == 1, "only the file that fits arrived, once")
        #expect(messages.first?["id"] as? String == id)
        #expect(messages.first?["text"] as? String == text)
        bob.signal(SIGINT)
        #expect(bob.waitForExit(timeout: 10) == 0)
    }

    /// Two `listen`s of bob on two devices both get alice's message; what bob sends from a
    /// third shows on both with `to`; `/device revoke` from the REPL ends one `listen` (exit 1).
    @Test func twoDevicesListenAndARevokedOneExits() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "bob")
        let phone = try simp(node, "listen", ["--user", "bob", "--password", "pw-bob", "--device", "phone", "--json"])
        let laptop = try simp(node, "listen", ["--user", "bob", "--password", "pw-bob", "--device", "laptop", "--json"])
        for listener in [phone, laptop] {
            #expect(listener.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil)
        }
        let send = try simp(node, "send", ["--user", "alice", "--password", "pw-alice", "--to", "bob", "to both"])
        #expect(send.waitForExit(timeout: 30) == 0, "stderr: \(send.stderr)")
        let reply = try simp(node, "send", ["--user", "bob", "--password", "pw-bob", "--device", "tablet", "--accepted", "--to", "alice", "from the tablet"])
        #expect(reply.waitForExit(timeout: 30) == 0, "stderr: \(reply.stderr)")
        for listener in [phone, laptop] {
            #expect(listener.waitForLine(timeout: 10) { $0.contains("from the tablet") } != nil)
            let messages = jsonLines(listener.stdout).filter { $0["event"] as? String == "message" }
            #expect(messages.map { $0["text"] as? String } == ["to both", "from the tablet"])
            #expect(messages.map { $0["to"] as? String } == ["bob", "alice"])
            #expect(messages.last?["fromDevice"] as? String == "tablet")
        }

        let repl = try ChildProcess(try productPath("simp"), ["--no-e2e", "--server", "127.0.0.1:\(node.server.tcpPort)", "--user", "bob",
                                                             "--password", "pw-bob", "--device", "tablet", "--json"],
                                    environment: ["XDG_CONFIG_HOME": configHome])
        repl.write("/devices\n/device revoke laptop\n")
        #expect(repl.waitForLine(timeout: 20) { $0.contains("device laptop revoked") } != nil, "stderr: \(repl.stderr)")
        let listed = jsonLines(repl.stdout).first { $0["event"] as? String == "devices" }?["devices"] as? [[String: Any]]
        #expect(listed?.map { $0["name"] as? String } == ["laptop", "phone", "tablet"])
        #expect(listed?.map { $0["current"] as? Bool } == [false, false, true])
        #expect(laptop.waitForExit(timeout: 15) == 1)
        #expect(laptop.stdout.contains(#""event":"ended","reason":"this device was revoked from bob's device tablet""#), "\(laptop.stdout)")
        repl.closeStdin()
        #expect(repl.waitForExit(timeout: 20) == 0)
        phone.signal(SIGINT)
        #expect(phone.waitForExit(timeout: 10) == 0)
    }

    /// `simp password` (issue 46): a running `listen` of the same user ends (exit 1) with the
    /// reason, the old password no longer logs in, the new one does; `/logout --all` from the
    /// REPL ends the next `listen` the same way.
    @Test func aPasswordChangeAndLogoutAllEndTheOtherLogins() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "bob")
        let phone = try simp(node, "listen", ["--user", "bob", "--password", "pw-bob", "--device", "phone", "--json"])
        #expect(phone.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil)
        let change = try ChildProcess(try productPath("simp"), ["password", "--no-e2e", "--server", "127.0.0.1:\(node.server.tcpPort)", "--user", "bob",
                                                               "--password", "pw-bob"],
                                      environment: ["XDG_CONFIG_HOME": configHome, "SIMP_NEW_PASSWORD": "new-secret"])
        #expect(change.waitForExit(timeout: 30) == 0, "stderr: \(change.stderr)")
        #expect(change.stdout.contains("password of bob changed; every other login ended"), "\(change.stdout)")
        #expect(phone.waitForExit(timeout: 15) == 1)
        #expect(phone.stdout.contains(#""reason":"the password was changed on another connection; log in with the new one""#), "\(phone.stdout)")
        let old = try simp(node, "history", ["--user", "bob", "--password", "pw-bob", "alice"])
        #expect(old.waitForExit(timeout: 30) == 5)

        let laptop = try simp(node, "listen", ["--user", "bob", "--password", "new-secret", "--device", "laptop", "--json"])
        #expect(laptop.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil)
        let repl = try ChildProcess(try productPath("simp"), ["--no-e2e", "--server", "127.0.0.1:\(node.server.tcpPort)", "--user", "bob",
                                                             "--password", "new-secret", "--device", "tablet"],
                                    environment: ["XDG_CONFIG_HOME": configHome])
        repl.write("/logout --all\n")
        #expect(repl.waitForExit(timeout: 30) == 0, "stderr: \(repl.stderr)")
        #expect(repl.stdout.contains("logged out on every device"), "\(repl.stdout)")
        #expect(laptop.waitForExit(timeout: 15) == 1)
        #expect(laptop.stdout.contains("every login of this user was ended from another connection"), "\(laptop.stdout)")
    }

    @Test func listenPrintsEscapedTextAndStopsOnSIGTERM() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "bob")
        let bob = try simp(node, "listen", ["--user", "bob", "--password", "pw-bob"])
        // Human mode: the status line goes to stderr, stdout holds only messages.
        try await waitFor(timeout: 20) { bob.stderr.contains("connected as bob") }
        let send = try simp(node, "send", ["--user", "alice", "--password", "pw-alice", "--to", "bob", "bell\u{07}here"])
        #expect(send.waitForExit(timeout: 30) == 0, "stderr: \(send.stderr)")
        #expect(bob.waitForLine(timeout: 10) { $0.hasPrefix("alice: ") } == "alice: bell\\x07here")
        bob.signal(SIGTERM)
        #expect(bob.waitForExit(timeout: 10) == 0)
        #expect(!bob.stdout.contains("\u{07}"))
    }

    /// Several nodes in --server: a dead first one is skipped; a malformed list is a usage error.
    @Test func sendTriesTheNextServerInTheList() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "bob")
        let dead = try freeTCPPort()
        let send = try simp("send", ["--server", "127.0.0.1:\(dead),127.0.0.1:\(node.server.tcpPort)", "--user", "alice",
                                     "--password", "pw-alice", "--to", "bob", "--accepted", "hi"])
        #expect(send.waitForExit(timeout: 30) == 0, "stderr: \(send.stderr)")
        let bad = try simp("send", ["--server", "127.0.0.1:\(node.server.tcpPort),nonsense", "--user", "alice",
                                    "--password", "pw-alice", "--to", "bob", "hi"])
        #expect(bad.waitForExit(timeout: 30) == 2)
        #expect(bad.stderr.contains("--server must be HOST:PORT[,HOST:PORT...], got nonsense"), "\(bad.stderr)")
    }

    /// Early delivery needs received messages kept by seq only in memory: with a data
    /// directory the REPL refuses it before connecting.
    @Test func earlyDeliveryWithADataDirectoryIsRefused() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        let repl = try simp("repl", ["--server", "127.0.0.1:\(node.server.tcpPort)", "--user", "alice", "--password", "pw",
                                  "--early", "--data-dir", NSTemporaryDirectory()])
        #expect(repl.waitForExit(timeout: 30) == 2)
        #expect(repl.stderr.contains("--early cannot be used with --data-dir"), "\(repl.stderr)")
    }

    @Test func sendExitStatusesForEachOutcome() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "carol")
        let alice = ["--user", "alice", "--password", "pw-alice"]

        // carol is offline: stored, but nobody confirms it.
        let offline = try simp(node, "send", alice + ["--to", "carol", "--timeout", "1", "are you there"])
        #expect(offline.waitForExit(timeout: 30) == 3)
        #expect(offline.stderr.contains("was accepted (stored) but not delivered within 1.0s"))
        #expect(!trimmed(offline.stdout).isEmpty, "the id is printed even so")

        let stored = try simp(node, "send", alice + ["--to", "carol", "--accepted", "--json", "later"])
        #expect(stored.waitForExit(timeout: 30) == 0, "stderr: \(stored.stderr)")
        let outcome = jsonLines(stored.stdout)
        #expect(outcome.count == 1)
        #expect(outcome.first?["event"] as? String == "accepted")
        #expect(outcome.first?["to"] as? String == "carol")
        #expect(outcome.first?["seq"] is Int)

        let unknown = try simp(node, "send", alice + ["--to", "nobody", "hi"])
        #expect(unknown.waitForExit(timeout: 30) == 4)
        #expect(unknown.stderr.contains("failed: no such user: nobody"))

        let wrong = try simp(node, "send", ["--user", "alice", "--password", "nope", "--to", "carol", "hi"])
        #expect(wrong.waitForExit(timeout: 30) == 5)
        #expect(wrong.stderr == "error: wrong user name or password\n")
        #expect(wrong.stdout.isEmpty)

        let port = try freeTCPPort()
        let down = try simp("send", ["--server", "127.0.0.1:\(port)"] + alice + ["--to", "carol", "hi"])
        #expect(down.waitForExit(timeout: 30) == 6)
        #expect(down.stderr == "error: cannot reach 127.0.0.1:\(port): connection refused\n")

        let usage = try simp(node, "send", alice + ["no recipient"])
        #expect(usage.waitForExit(timeout: 30) == 2)
        #expect(usage.stderr.contains("--to"))
    }

    @Test func historyPrintsTheConversationOldestFirst() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "bob")
        for text in ["one", "two", "three"] {
            let send = try simp(node, "send", ["--user", "alice", "--password", "pw-alice", "--to", "bob", "--accepted", text])
            #expect(send.waitForExit(timeout: 30) == 0, "stderr: \(send.stderr)")
        }
        let json = try simp(node, "history", ["--user", "alice", "--password", "pw-alice", "bob", "--limit", "2", "--json"])
        #expect(json.waitForExit(timeout: 30) == 0, "stderr: \(json.stderr)")
        let history = jsonLines(json.stdout).first
        #expect(history?["peer"] as? String == "bob")
        #expect((history?["messages"] as? [[String: Any]])?.compactMap { $0["text"] as? String } == ["two", "three"])

        let human = try simp(node, "history", ["--user", "bob", "--password", "pw-bob", "alice"])
        #expect(human.waitForExit(timeout: 30) == 0, "stderr: \(human.stderr)")
        #expect(human.stdout == "alice: one\nalice: two\nalice: three\n")
    }

    @Test func savedLoginIsPrivateAndServesTheNextCommands() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "bob")
        let login = try simp(node, "login", ["--user", "alice", "--password", "pw-alice"])
        #expect(login.waitForExit(timeout: 30) == 0, "stderr: \(login.stderr)")

        let file = configHome + "/simp/credentials"
        #expect(try permissions(file) == 0o600)
        #expect(try permissions(configHome + "/simp") == 0o700)
        let saved = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
        #expect(saved["user"] as? String == "alice")
        #expect(saved["server"] as? String == "127.0.0.1:\(node.server.tcpPort)")
        // A token per device: the REPL's (the installation's name) and the one-shot commands' (-cli).
        let tokens = try #require(saved["tokens"] as? [String: [String: Any]])
        let device = try String(contentsOfFile: configHome + "/simp/device", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(Set(tokens.keys) == [device, device + "-cli"])
        for token in tokens.values {
            #expect((token["token"] as? String)?.hasPrefix("alice@") == true)
            #expect((token["expiresAt"] as? Int ?? 0) > Int(Date().timeIntervalSince1970 * 1000))
        }
        #expect(!(try String(contentsOfFile: file, encoding: .utf8)).contains("pw-alice"), "the password is never saved")

        // No --server, --user or password: all from the saved login, twice.
        for text in ["first", "second"] {
            let send = try simp("send", ["--to", "bob", "--accepted", text])
            #expect(send.waitForExit(timeout: 30) == 0, "stderr: \(send.stderr)")
        }

        // A token the server refuses: a clear error (no terminal to ask on) and status 5.
        var forged = saved
        forged["tokens"] = tokens.mapValues { token in
            var token = token
            token["token"] = "alice@\(device)-cli.\(Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000).1.00"
            return token
        }
        try JSONSerialization.data(withJSONObject: forged).write(to: URL(fileURLWithPath: file))
        let refused = try simp("send", ["--to", "bob", "--accepted", "third"])
        #expect(refused.waitForExit(timeout: 30) == 5)
        #expect(refused.stderr.contains("the saved login for alice on 127.0.0.1:\(node.server.tcpPort) has expired or was revoked: run simp login"))

        // An expired one is not even offered to the server.
        var expired = saved
        expired["tokens"] = tokens.mapValues { token in
            var token = token
            token["expiresAt"] = Int64(Date().timeIntervalSince1970 * 1000) - 1000
            return token
        }
        try JSONSerialization.data(withJSONObject: expired).write(to: URL(fileURLWithPath: file))
        let late = try simp("history", ["bob"])
        #expect(late.waitForExit(timeout: 30) == 5)
        #expect(late.stderr.contains("has expired or was revoked: run simp login, or give --password or SIMP_PASSWORD"))

        // --save-login on any command replaces the saved login.
        let bob = try simp(node, "send", ["--user", "bob", "--password", "pw-bob", "--save-login", "--to", "alice", "--accepted", "hi"])
        #expect(bob.waitForExit(timeout: 30) == 0, "stderr: \(bob.stderr)")
        let history = try simp("history", ["alice"])
        #expect(history.waitForExit(timeout: 30) == 0, "stderr: \(history.stderr)")
        #expect(history.stdout.contains("bob: hi"))
        #expect(try permissions(file) == 0o600)
    }

    private func permissions(_ path: String) throws -> Int {
        ((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? 0) & 0o777
    }

    private func waitFor(timeout: Double, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard Date() < deadline else { throw TestSupportError("condition not met within \(timeout)s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
