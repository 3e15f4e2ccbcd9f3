import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// The defaults of issue 44, item 6, as a user meets them (real simp-server, simp and
/// redis-server processes): a server started without `--e2e` refuses what is not end-to-end
/// encrypted (E2E_REQUIRED), and `simp` without `--data-dir` encrypts, its keys in
/// ~/.local/share/simp/DEVICE (`DataHome`); the one-shot commands are a device of their own.
@Suite(.serialized) struct EndToEndDefaultTests {
    /// A home directory per user, as on separate machines: nothing of the runner's is read or
    /// written (the XDG variables are emptied so the defaults under HOME are what is used).
    func home() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("simp-home-\(UUID().uuidString)").path
    }

    /// `simp COMMAND... --server NODE --user USER --password pw-USER ARGS...` in `home`.
    func simp(_ node: ServerNode, _ home: String, _ user: String, _ command: [String] = [], _ args: [String] = []) throws -> ChildProcess {
        try ChildProcess(try productPath("simp"),
                         command + ["--server", "127.0.0.1:\(node.server.tcpPort)", "--user", user, "--password", "pw-\(user)"] + args,
                         environment: ["HOME": home, "XDG_CONFIG_HOME": "", "XDG_DATA_HOME": ""])
    }

    func register(_ node: ServerNode, _ users: String...) async throws {
        let client = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: node.server.tcpPort))
        for user in users { try await client.register(user: user, password: "pw-\(user)") }
    }

    func connected(_ process: ChildProcess) -> Bool {
        process.waitForLine(timeout: 30) { $0.contains(#""event":"connected""#) } != nil
    }

    /// The installation's device name `simp` made in `home` (`DeviceFile`).
    func device(in home: String) throws -> String {
        try String(contentsOfFile: home + "/.config/simp/device", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aServerWithoutE2ERefusesPlaintext() async throws {
        let node = try ServerNode(e2e: nil)
        defer { node.stop() }
        try await register(node, "alice", "bob")
        // The library does not encrypt unless told (it needs a data directory): refused.
        let alice = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: node.server.tcpPort))
        let log = EventLog(alice)
        try await alice.connect(user: "alice", password: "pw-alice")
        let plain = try await alice.send(to: "bob", text: "in the clear")
        #expect(await log.wait { log in log.all.contains { if case .failed(id: plain, _, _, .e2eRequired?) = $0 { true } else { false } } })
        await alice.close()

        // `simp --no-e2e`: refused the same, said on stderr, exit 4 (refused).
        let home = home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let send = try simp(node, home, "alice", ["send", "--no-e2e", "--to", "bob"], ["in", "the", "clear"])
        #expect(send.waitForExit(timeout: 30) == 4, "stderr: \(send.stderr)")
        #expect(send.stderr.contains("this server takes only end-to-end encrypted messages"), "stderr: \(send.stderr)")
        #expect(!FileManager.default.fileExists(atPath: home + "/.local/share/simp"), "--no-e2e keeps no data directory")
    }

    @Test func simpEncryptsByDefaultAndItsOneShotCommandsAreADeviceOfTheirOwn() async throws {
        let node = try ServerNode(e2e: nil)
        defer { node.stop() }
        try await register(node, "alice", "bob", "carol")
        let homes = (0..<3).map { _ in home() }
        defer { for home in homes { try? FileManager.default.removeItem(atPath: home) } }
        let bob = try simp(node, homes[1], "bob", [], ["--json"])
        // `--e2e`, as older command lines say: the default.
        let carol = try simp(node, homes[2], "carol", [], ["--json", "--e2e"])
        let alice = try simp(node, homes[0], "alice", [], ["--json"])
        for repl in [bob, carol, alice] { #expect(connected(repl), "stderr: \(repl.stderr)") }

        alice.write("/send bob sealed by default\n")
        let line = bob.waitForLine(timeout: 30) { $0.contains("sealed by default") }
        #expect(line?.contains(#""encrypted":true"#) == true, "bob printed: \(line ?? bob.stdout)")
        let device = try device(in: homes[0])
        let data = homes[0] + "/.local/share/simp/"
        #expect(FileManager.default.fileExists(atPath: data + device + "/alice.sqlite"), "the keys are in ~/.local/share/simp/DEVICE")

        // A second client of the REPL's device would seal with the same keys: refused, said.
        let second = try simp(node, homes[0], "alice", [], ["--json"])
        #expect(second.waitForExit(timeout: 30) == 1, "stderr: \(second.stderr)")
        #expect(second.stderr.contains("the data directory \(data + device) is in use by another simp"), "stderr: \(second.stderr)")

        // The REPL readied the installation's one-shot device (-cli) as it started: a device of
        // its own, its data directory beside the REPL's, holding alice's identity (taken from
        // the REPL's directory, no code: same machine, same files). So the conversation the
        // REPL made with bob holds it, and a one-shot command while the REPL runs writes there.
        #expect(FileManager.default.fileExists(atPath: data + device + "-cli/alice.sqlite"))
        let toBob = try simp(node, homes[0], "alice", ["send", "--to", "bob"], ["from", "the", "one-shot"])
        #expect(toBob.waitForExit(timeout: 60) == 0, "stderr: \(toBob.stderr)")
        let atBob = bob.waitForLine(timeout: 30) { $0.contains("from the one-shot") }
        #expect(atBob?.contains(#""encrypted":true"#) == true, "bob printed: \(atBob ?? bob.stdout)")
        // The REPL, alice's other device, shows it as hers, from the one-shot device.
        let atREPL = alice.waitForLine(timeout: 30) { $0.contains("from the one-shot") }
        #expect(atREPL?.contains(#""encrypted":true"#) == true && atREPL?.contains(#""fromDevice":"\#(device)-cli""#) == true,
                "alice's REPL printed: \(atREPL ?? alice.stdout)")
        // A conversation the one-shot device starts holds alice's REPL device too.
        let toCarol = try simp(node, homes[0], "alice", ["send", "--to", "carol"], ["to", "carol"])
        #expect(toCarol.waitForExit(timeout: 60) == 0, "stderr: \(toCarol.stderr)")
        #expect(carol.waitForLine(timeout: 30) { $0.contains("to carol") && $0.contains(#""encrypted":true"#) } != nil, "carol printed: \(carol.stdout)")
        #expect(alice.waitForLine(timeout: 30) { $0.contains("to carol") && $0.contains(#""encrypted":true"#) } != nil, "alice printed: \(alice.stdout)")
        bob.write("/send alice hello back\n")
        #expect(alice.waitForLine(timeout: 30) { $0.contains("hello back") && $0.contains(#""encrypted":true"#) } != nil,
                "alice printed: \(alice.stdout)")

        // An encrypting history is the REPL's device's own (the server holds ciphertext): with
        // the REPL running it says so; after, it prints what the REPL decrypted.
        let busy = try simp(node, homes[0], "alice", ["history", "bob"])
        #expect(busy.waitForExit(timeout: 30) == 1 && busy.stderr.contains("is in use by another simp"), "stderr: \(busy.stderr)")
        alice.write("/quit\n")
        #expect(alice.waitForExit(timeout: 30) == 0, "stderr: \(alice.stderr)")
        let history = try simp(node, homes[0], "alice", ["history", "bob"])
        #expect(history.waitForExit(timeout: 30) == 0, "stderr: \(history.stderr)")
        #expect(history.stdout.contains("sealed by default") && history.stdout.contains("hello back"), "printed: \(history.stdout)")
        for repl in [bob, carol] {
            repl.write("/quit\n")
            #expect(repl.waitForExit(timeout: 30) == 0, "stderr: \(repl.stderr)")
        }
    }

    /// A user who does not exist is "no such user" (UNKNOWN_USER), as the key directory answers,
    /// not a user without keys; one who exists but published no identity key keeps that message.
    @Test func aUserWhoDoesNotExistIsNoSuchUser() async throws {
        let node = try ServerNode(e2e: nil)
        defer { node.stop() }
        // carol's account exists, but no client of hers ever made an identity.
        try await register(node, "alice", "carol")
        let home = home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let alice = try simp(node, home, "alice", [], ["--json"])
        #expect(connected(alice), "stderr: \(alice.stderr)")
        alice.write("/send nobody hi\n")
        let unknown = alice.waitForLine(timeout: 30) { $0.contains(#""event":"error""#) }
        #expect(unknown == #"{"code":"UNKNOWN_USER","event":"error","message":"no such user: nobody"}"#, "printed: \(alice.stdout)")
        alice.write("/send carol hi\n")
        let keyless = alice.waitForLine(timeout: 30) { $0.contains("carol") && $0.contains(#""event":"error""#) }
        #expect(keyless == #"{"code":"NO_IDENTITY","event":"error","message":"carol has no identity key yet: their client has not set up end-to-end encryption"}"#,
                "printed: \(alice.stdout)")
        alice.write("/quit\n")
        #expect(alice.waitForExit(timeout: 30) == 0, "stderr: \(alice.stderr)")

        // `simp send`: refused (exit 4), the reason on stderr; with --json the same `failed`
        // object, with the server's code, as a refusal after sending.
        let send = try simp(node, home, "alice", ["send", "--to", "nobody"], ["hi"])
        #expect(send.waitForExit(timeout: 30) == 4, "stderr: \(send.stderr)")
        #expect(send.stderr == "error: no such user: nobody\n", "stderr: \(send.stderr)")
        let json = try simp(node, home, "alice", ["send", "--json", "--to", "nobody"], ["hi"])
        #expect(json.waitForExit(timeout: 30) == 4, "stderr: \(json.stderr)")
        #expect(json.stdout == #"{"code":"UNKNOWN_USER","event":"failed","reason":"no such user: nobody","to":"nobody"}"# + "\n")
        let toCarol = try simp(node, home, "alice", ["send", "--json", "--to", "carol"], ["hi"])
        #expect(toCarol.waitForExit(timeout: 30) == 4, "stderr: \(toCarol.stderr)")
        #expect(toCarol.stderr.contains("carol has no identity key yet"), "stderr: \(toCarol.stderr)")
        #expect(!toCarol.stdout.contains("UNKNOWN_USER") && toCarol.stdout.contains(#""code":"NO_IDENTITY""#), "\(toCarol.stdout)")
    }

    /// A plaintext REPL (`--no-e2e`) writes a data directory only when given one (`--data-dir`:
    /// its outbox, receipts and received messages), and then holds its lock as an encrypting one
    /// does. Without one its outbox is in memory and it writes none: nothing to lock.
    @Test func aPlaintextREPLLocksTheDataDirectoryItWritesAndWritesNoneUnlessGiven() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        try await register(node, "alice", "bob")
        let home = home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let inMemory = try simp(node, home, "alice", [], ["--json", "--no-e2e", "--linger", "1"])
        #expect(connected(inMemory), "stderr: \(inMemory.stderr)")
        inMemory.write("/send bob in the clear\n")
        #expect(inMemory.waitForLine(timeout: 30) { $0.contains(#""event":"accepted""#) } != nil, "printed: \(inMemory.stdout)")
        #expect(!FileManager.default.fileExists(atPath: home + "/.local/share/simp"), "--no-e2e keeps no data directory")
        inMemory.write("/quit\n")
        #expect(inMemory.waitForExit(timeout: 30) == 0, "stderr: \(inMemory.stderr)")

        let directory = home + "/plain"
        let first = try simp(node, home, "alice", [], ["--json", "--no-e2e", "--data-dir", directory])
        #expect(connected(first), "stderr: \(first.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory + "/alice.sqlite"))
        let second = try simp(node, home, "alice", [], ["--json", "--no-e2e", "--data-dir", directory])
        #expect(second.waitForExit(timeout: 30) == 1, "stderr: \(second.stderr)")
        #expect(second.stderr.contains("the data directory \(directory) is in use by another simp"), "stderr: \(second.stderr)")
        first.write("/quit\n")
        #expect(first.waitForExit(timeout: 30) == 0, "stderr: \(first.stderr)")
    }

    /// The data directory follows the XDG base directory spec: `$XDG_DATA_HOME/simp/DEVICE`, a
    /// relative XDG_DATA_HOME ignored (then ~/.local/share). Taken before connecting, so no
    /// server is needed to see it: the command then exits 6 (unreachable).
    @Test func theDefaultDataDirectoryIsUnderXDGDataHome() throws {
        let home = home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let unreachable = "127.0.0.1:\(try freeTCPPort())"
        func history(_ dataHome: String) throws -> ChildProcess {
            try ChildProcess(try productPath("simp"), ["history", "bob", "--server", unreachable, "--user", "alice", "--password", "pw"],
                             environment: ["HOME": home, "XDG_CONFIG_HOME": "", "XDG_DATA_HOME": dataHome])
        }
        let given = try history(home + "/data")
        #expect(given.waitForExit(timeout: 30) == 6, "stderr: \(given.stderr)")
        let device = try device(in: home)
        #expect(FileManager.default.fileExists(atPath: home + "/data/simp/\(device)/alice.lock"))
        let relative = try history("data")
        #expect(relative.waitForExit(timeout: 30) == 6, "stderr: \(relative.stderr)")
        #expect(FileManager.default.fileExists(atPath: home + "/.local/share/simp/\(device)/alice.lock"))
        let attributes = try FileManager.default.attributesOfItem(atPath: home + "/.local/share/simp/\(device)")
        #expect((attributes[.posixPermissions] as? Int) == 0o700, "the user's alone: it holds private keys")
    }

    /// A device whose user's identity was made elsewhere (another machine) cannot encrypt until
    /// linked: a one-shot command says so and what to do, exit 1, before sending anything.
    @Test func aOneShotCommandOfADeviceToLinkSaysSo() async throws {
        let node = try ServerNode(e2e: nil)
        defer { node.stop() }
        try await register(node, "dave", "bob")
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("simp-data-\(UUID().uuidString)").path
        let home = home()
        defer { for directory in [elsewhere, home] { try? FileManager.default.removeItem(atPath: directory) } }
        var configuration = ClientConfiguration(host: "127.0.0.1", port: node.server.tcpPort)
        configuration.dataDirectory = elsewhere
        configuration.endToEnd = true
        let phone = SIMPClient(configuration: configuration)
        try await phone.connect(user: "dave", password: "pw-dave")
        #expect(try await phone.setUpIdentity() == .created)
        await phone.close()

        let send = try simp(node, home, "dave", ["send", "--to", "bob"], ["hello"])
        #expect(send.waitForExit(timeout: 30) == 1, "stderr: \(send.stderr)")
        #expect(send.stderr.contains("does not hold your identity") && send.stderr.contains("/device link"), "stderr: \(send.stderr)")
    }
}
