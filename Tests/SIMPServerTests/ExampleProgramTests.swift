import Foundation
import SIMPClient
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The programs in Examples/ (issue 47), built with the package, run as an application would
/// run them: real Redis and simp-server processes with the server's defaults (`--e2e
/// required`), the example binaries encrypting as they do by default, and the `simp` CLI at
/// the other end of the conversation.
@Suite(.serialized) struct ExampleProgramTests {
    /// Config and data directories of the test's own, so neither the CLI nor the examples read
    /// or write any of the user's (the examples keep their keys under XDG_DATA_HOME too).
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-examples-\(UUID().uuidString)").path

    var environment: [String: String] { ["XDG_CONFIG_HOME": home + "/config", "XDG_DATA_HOME": home + "/data"] }

    func simp(_ node: ServerNode, _ command: [String], _ args: [String]) throws -> ChildProcess {
        try ChildProcess(try productPath("simp"), command + ["--server", "127.0.0.1:\(node.server.tcpPort)"] + args,
                         environment: environment)
    }

    /// An example binary logged in as `user` (password `pw-USER`) on `node`.
    func example(_ name: String, _ node: ServerNode, user: String, _ args: [String] = [],
                 environment extra: [String: String] = [:]) throws -> ChildProcess {
        try ChildProcess(try productPath(name), args, environment: [
            "SIMP_SERVER": "127.0.0.1:\(node.server.tcpPort)", "SIMP_USER": user, "SIMP_PASSWORD": "pw-\(user)",
        ].merging(environment) { $1 }.merging(extra) { $1 })
    }

    func register(_ node: ServerNode, _ users: String...) async throws {
        let client = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: node.server.tcpPort))
        for user in users { try await client.register(user: user, password: "pw-\(user)") }
    }

    /// The `message` events a `simp listen --json` printed from `sender`.
    func messages(_ listener: ChildProcess, from sender: String) -> [[String: Any]] {
        listener.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["event"] as? String == "message" && $0["from"] as? String == sender }
    }

    /// The bot answers what `simp send` sends it: an echo, and "/time" with the time; the
    /// answers reach alice's `simp listen`, all of it sealed end to end.
    @Test func theBotAnswersTheCLI() async throws {
        let node = try ServerNode(e2e: nil)
        defer { node.stop() }
        defer { try? FileManager.default.removeItem(atPath: home) }
        try await register(node, "alice", "bot")
        let bot = try example("simp-example-bot", node, user: "bot")
        #expect(bot.waitForLine(timeout: 20) { $0.hasPrefix("connected as bot") } != nil, "stderr: \(bot.stderr)")
        #expect(FileManager.default.fileExists(atPath: home + "/data/simp-example-bot/bot.sqlite"), "its keys, under XDG_DATA_HOME")
        let alice = try simp(node, ["listen"], ["--user", "alice", "--password", "pw-alice", "--json"])
        #expect(alice.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil, "stderr: \(alice.stderr)")

        // `simp send` exits 0 once the bot's client confirmed the message.
        let hello = try simp(node, ["send"], ["--user", "alice", "--password", "pw-alice", "--to", "bot", "hello", "bot"])
        #expect(hello.waitForExit(timeout: 30) == 0, "stderr: \(hello.stderr)")
        #expect(alice.waitForLine(timeout: 20) { $0.contains("echo: hello bot") } != nil, "bot: \(bot.stdout) \(bot.stderr)")
        let time = try simp(node, ["send"], ["--user", "alice", "--password", "pw-alice", "--to", "bot", "/time"])
        #expect(time.waitForExit(timeout: 30) == 0, "stderr: \(time.stderr)")
        #expect(alice.waitForLine(timeout: 20) { $0.contains("It is ") } != nil, "bot: \(bot.stdout) \(bot.stderr)")

        #expect(messages(alice, from: "bot").allSatisfy { $0["encrypted"] as? Bool == true }, "\(alice.stdout)")
        let answers = messages(alice, from: "bot").compactMap { $0["text"] as? String }
        #expect(answers.count == 2)
        #expect(answers.first == "echo: hello bot")
        // "It is 2026-11-29T13:20:05Z (UTC)."
        #expect(answers.last?.range(of: #"^It is \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(UTC\)\.$"#, options: .regularExpression) != nil,
                "\(answers)")
        #expect(bot.stdout.split(separator: "\n").filter { $0.hasPrefix("answered alice in alice") }.count == 2, "\(bot.stdout)")
        #expect(!bot.stdout.contains("connected again"), "the first connect is not a reconnect: \(bot.stdout)")

        // SIGTERM closes the client; the bot exits 0.
        bot.signal(SIGTERM)
        #expect(bot.waitForExit(timeout: 10) == 0, "stderr: \(bot.stderr)")
        #expect(bot.stdout.hasSuffix("closed\n"))
        alice.signal(SIGINT)
        #expect(alice.waitForExit(timeout: 10) == 0)
    }

    /// A line typed into the chat reaches bob's `simp` REPL, sealed, and its status follows in
    /// the chat (accepted, delivered); what bob sends is printed. A second run on the same data
    /// directory prints the conversation from the local history first.
    @Test func theChatExchangesLinesWithTheCLI() async throws {
        let node = try ServerNode(e2e: nil)
        defer { node.stop() }
        defer { try? FileManager.default.removeItem(atPath: home) }
        try await register(node, "alice", "bob")
        let dataDir = home + "/chat"
        let bob = try simp(node, [], ["--user", "bob", "--password", "pw-bob", "--json"])
        #expect(bob.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil, "stderr: \(bob.stderr)")
        let chat = try example("simp-example-chat", node, user: "alice", ["bob"], environment: ["SIMP_DATA_DIR": dataDir])
        #expect(chat.waitForLine(timeout: 20) { $0.hasPrefix("connected as alice") } != nil, "stderr: \(chat.stderr)")

        chat.write("hello from the example\n")
        #expect(bob.waitForLine(timeout: 20) { $0.contains("hello from the example") } != nil, "chat: \(chat.stdout) \(chat.stderr)")
        #expect(messages(bob, from: "alice").map { $0["text"] as? String } == ["hello from the example"])
        #expect(messages(bob, from: "alice").first?["encrypted"] as? Bool == true, "\(bob.stdout)")
        #expect(chat.waitForLine(timeout: 20) { $0 == "#1 delivered" } != nil, "chat: \(chat.stdout)")
        #expect(chat.stdout.contains("me -> bob: hello from the example  #1\n"), "\(chat.stdout)")
        // Each stage once, in order (the first line says where it stood when the chat began to watch).
        let stages = chat.stdout.split(separator: "\n").filter { $0.hasPrefix("#1 ") }.map(String.init)
        #expect(["#1 accepted", "#1 delivered"].reversed().starts(with: stages.reversed()) && !stages.isEmpty, "\(stages)")

        bob.write("/send alice hi alice\n")
        #expect(chat.waitForLine(timeout: 20) { $0 == "bob: hi alice" } != nil, "chat: \(chat.stdout)")

        // End of input: the chat closes and exits 0.
        chat.closeStdin()
        #expect(chat.waitForExit(timeout: 20) == 0, "stderr: \(chat.stderr)")
        #expect(chat.stdout.hasSuffix("closed\n"), "\(chat.stdout)")
        #expect(!chat.stdout.contains("connected again"), "the first connect is not a reconnect: \(chat.stdout)")

        // Again, with the same data directory: the history comes first, read from disk.
        let again = try example("simp-example-chat", node, user: "alice", ["bob"], environment: ["SIMP_DATA_DIR": dataDir])
        #expect(again.waitForLine(timeout: 20) { $0.hasPrefix("connected as alice") } != nil, "stderr: \(again.stderr)")
        let history = again.stdout.split(separator: "\n").filter { $0.hasPrefix("history: ") }
        #expect(history == ["history: me -> bob: hello from the example [delivered]", "history: bob: hi alice"], "\(again.stdout)")
        again.closeStdin()
        #expect(again.waitForExit(timeout: 20) == 0, "stderr: \(again.stderr)")
        bob.write("/quit\n")
        #expect(bob.waitForExit(timeout: 30) == 0, "stderr: \(bob.stderr)")
    }

    /// SIMP_PLAINTEXT=1 sends in the clear, which a default server refuses: each line fails
    /// E2E_REQUIRED, said in the chat.
    @Test func theChatInPlaintextIsRefusedByADefaultServer() async throws {
        let node = try ServerNode(e2e: nil)
        defer { node.stop() }
        defer { try? FileManager.default.removeItem(atPath: home) }
        try await register(node, "alice", "bob")
        let chat = try example("simp-example-chat", node, user: "alice", ["bob"], environment: ["SIMP_PLAINTEXT": "1"])
        #expect(chat.waitForLine(timeout: 20) { $0.hasPrefix("connected as alice") } != nil, "stderr: \(chat.stderr)")
        chat.write("in the clear\n")
        let failed = chat.waitForLine(timeout: 20) { $0.hasPrefix("#1 failed") }
        #expect(failed?.hasSuffix("[e2e-required]") == true, "chat: \(chat.stdout)")
        chat.closeStdin()
        #expect(chat.waitForExit(timeout: 20) == 0, "stderr: \(chat.stderr)")
        #expect(!FileManager.default.fileExists(atPath: home + "/data/simp-example-chat"), "plaintext keeps no data directory unless given one")
    }
}
