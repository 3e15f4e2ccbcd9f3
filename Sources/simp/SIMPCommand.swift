import ArgumentParser
import Foundation
import SIMPClient
import SIMPCore
import SIMPTerminal

/// Exit statuses of the one-shot subcommands (the REPL exits 0, or 1 when it cannot log in).
enum ExitStatus {
    static let failure: Int32 = 1
    static let usage: Int32 = 2
    static let timeout: Int32 = 3
    static let refused: Int32 = 4
    static let authentication: Int32 = 5
    static let unreachable: Int32 = 6
}

/// Parses like ArgumentParser's own `main`, but a usage error exits 2 (not EX_USAGE, 64),
/// the status scripts expect of a command line tool.
@main
enum SIMPMain {
    static func main() async {
        do {
            var command = try SIMPCommand.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            guard SIMPCommand.exitCode(for: error) == .validationFailure else { SIMPCommand.exit(withError: error) }
            FileHandle.standardError.write(Data((SIMPCommand.fullMessage(for: error) + "\n").utf8))
            exit(ExitStatus.usage)
        }
    }
}

struct SIMPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp",
        abstract: "SIMP client: the REPL when no subcommand is given, or one command for a script.",
        subcommands: [REPL.self, Send.self, Listen.self, History.self, Group.self, Contact.self, Login.self, Password.self, Verify.self],
        defaultSubcommand: REPL.self)
}

struct REPL: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repl",
        abstract: "Reads commands from stdin (a terminal or a pipe), prints messages and each sent message's fate.",
        discussion: REPLCommand.usage)

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Create the account first; fails if the name is taken.")
    var register = false

    @Flag(name: .customLong("new-identity"),
          help: "Every other device of yours was lost (or stolen): make a new identity on this one. Your peers are told it changed (those who verified you must verify again), your other devices stop being yours until linked again, and this device's conversations start afresh: your peers' devices add it again as they are told (at once, or when they are back).")
    var newIdentity = false

    func validate() throws {
        if newIdentity && !connection.endToEnd {
            throw ValidationError("--new-identity makes keys for end-to-end encryption: not with --no-e2e")
        }
    }

    @Flag(help: "Print one JSON object per line.")
    var json = false

    @Option(help: "At end of input, wait up to this many seconds for outstanding acknowledgements. Default 10.")
    var linger: Double = 10

    func run() async throws {
        let output = Output(json: json)
        guard linger >= 0 else { throw ValidationError("--linger must be >= 0") }
        let plan = try connection.loginPlan(needsPassword: register)
        let client = SIMPClient(configuration: try connection.configuration(plan))
        do {
            if register, case .password(let password) = plan.method {
                try await client.register(user: plan.user, password: password)
            }
            try await connection.connect(client, plan)
            if newIdentity {
                _ = try await client.setUpIdentity(newIdentity: true)
                output.result(RequestResult(human: "made a new identity on this device: your peers are told it changed, and your other "
                                                + "devices must be linked again (/device link on them)",
                                            json: ["event": "identity-created"]))
            }
            if try await connection.setUpIdentity(client, commandLine: false) == .needsLinking {
                output.result(RequestResult(human: "this device does not hold your identity (another device of yours made it): "
                                                + "link it with /device link before it sends or reads encrypted messages, "
                                                + "or, if every other device of yours was lost, start simp with --new-identity",
                                            json: ["event": "needs-linking"]))
            } else if let problem = await connection.prepareOneShotDevice(plan) {
                // Not this session's failure: `simp send` says what it lacks when it runs.
                output.error(problem)
            }
        } catch {
            output.error(describe(error), code: (error as? ClientError)?.code)
            throw ExitCode(1)
        }
        #if os(Linux)
        // A failed rebind (the connection is down) leaves the socket as it was; the next
        // session binds afresh anyway.
        NetworkChanges.watch { Task { try? await client.rebindUDP() } }
        #endif
        // On a terminal: line editing, history, completion, colour; else today's line reader.
        let terminal = TerminalREPL.wanted(json: json)
            ? TerminalREPL(client: client, session: REPLScreen.Session(server: plan.server, user: plan.user, tls: plan.tls))
            : nil
        // What the line-mode REPL printed and has not marked read (`/read USER`).
        let shown = ShownMessages()
        let printer = terminal?.start() ?? Task {
            for await event in client.events {
                output.event(event)
                shown.record(event)
                if case .ended = event { break }
            }
        }
        let reader = Task { await readCommands(terminal: terminal, client: client, user: plan.user, output: output, shown: shown) }
        if await Self.endsFirst(printer, before: reader) {
            // The session is over for good (an administrator closed it): stop reading and say so
            // with the exit status too.
            reader.cancel()
            terminal?.stop()
            _ = await reader.value
            await client.close()
            throw ExitCode(1)
        }
        terminal?.stop()
        if case .logout(let everywhere) = await reader.value {
            await logout(client, output, everywhere: everywhere)
            await printer.value
            return
        }
        await waitForOutstanding(client)
        await client.close()
        await printer.value
    }

    private enum Ending: Equatable { case quit, logout(everywhere: Bool) }

    /// Marks what was printed from `peer` read; how many.
    private func markShown(from peer: String, _ shown: ShownMessages, client: SIMPClient) async throws(ClientError) -> Int {
        let due = shown.takeAll(from: peer)
        try await client.markRead(due)
        return due.count
    }

    /// Reads and runs commands until /quit, /logout or the end of input.
    private func readCommands(terminal: TerminalREPL?, client: SIMPClient, user: String, output: Output, shown: ShownMessages) async -> Ending {
        // Where plain lines go without a terminal (`/to`); the terminal keeps its own.
        var conversation: String?
        for await line in terminal?.lines ?? StandardInputLines.stream() {
            terminal?.learn(line)
            let command: REPLCommand
            do {
                command = try REPLCommand.parse(line, conversation: terminal?.conversation ?? conversation)
            } catch {
                if let terminal { terminal.error(error.message) } else { output.error(error.message) }
                continue
            }
            if command == .quit { break }
            if case .logout(let everywhere) = command { return .logout(everywhere: everywhere) }
            if terminal == nil, case .converse(let peer) = command {
                conversation = peer
                output.info(peer.map { "talking to \($0): plain lines go there" } ?? "no conversation")
                continue
            }
            if let terminal {
                await terminal.execute(command)
            } else {
                await execute(command, client: client, user: user, output: output, shown: shown)
            }
        }
        return .quit
    }

    /// Whether `printer` (the client's events) ends before `reader` (the user's input).
    private static func endsFirst(_ printer: Task<Void, Never>, before reader: Task<Ending, Never>) async -> Bool {
        let (first, sink) = AsyncStream.makeStream(of: Bool.self)
        Task { await printer.value; sink.yield(true) }
        Task { _ = await reader.value; sink.yield(false) }
        for await printerFirst in first { return printerFirst }
        return false
    }

    private func execute(_ command: REPLCommand, client: SIMPClient, user: String, output: Output, shown: ShownMessages) async {
        do {
            switch command {
            case .send(let to, let text):
                output.sent(id: try await client.send(to: to, text: text), to: to)
            case .image(let to, let url):
                output.sent(id: try await client.send(to: to, imageLink: url), to: to)
            case .history(let peer, let limit):
                output.history(peer: peer, try await client.history(with: peer, limit: limit))
            case .devices:
                output.devices(try await client.devices())
            case .revokeDevice(let name):
                try await client.revokeDevice(name)
                output.info("device \(name) revoked")
            case .linkDevice:
                output.result(try await DeviceLinking.link(on: client) { output.result($0) })
            case .deviceLinks:
                output.result(try await DeviceLinking.links(on: client))
            case .approveLink(let name, let code):
                output.result(try await DeviceLinking.approve(name, code: code, on: client))
            case .group(let group):
                output.result(try await group.run(on: client))
            case .groups:
                output.result(try await GroupListing.run(on: client))
            case .contact(let contact):
                output.result(try await contact.run(on: client))
            case .presence:
                output.presence(try await client.presence())
            case .verify(let peer, let number):
                output.result(try await Verification.run(peer, number: number, on: client))
            case .read(let peer):
                let count = try await markShown(from: peer, shown, client: client)
                output.info("marked \(count) message\(count == 1 ? "" : "s") from \(peer) read")
            case .help:
                output.info(REPLCommand.usage)
            case .status:
                let tls = client.configuration.tls == nil ? "off" : "on"
                let server = "\(client.configuration.host):\(client.configuration.port)"
                output.info("server \(server), TLS \(tls), user \(user), pending sends \(await client.outstandingCount()), path \(client.path?.rawValue ?? "none")")
            case .quit, .empty, .logout, .converse:
                break
            }
        } catch {
            output.error(error.message, code: error.code)
        }
    }

    /// Revokes the login token on the server (`everywhere`: every login of the user) and
    /// leaves; the next start logs in afresh.
    private func logout(_ client: SIMPClient, _ output: Output, everywhere: Bool) async {
        await waitForOutstanding(client)
        do {
            try await client.logout(everywhere: everywhere)
            output.info(everywhere ? "logged out on every device" : "logged out")
        } catch {
            output.error("logout: \(error.message)")
        }
        await client.close()
    }

    private func waitForOutstanding(_ client: SIMPClient) async {
        let deadline = Date().addingTimeInterval(linger)
        while Date() < deadline, await client.outstandingCount() > 0 {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// stdin lines as an async stream; a plain thread does the blocking reads.
enum StandardInputLines {
    static func stream() -> AsyncStream<String> {
        AsyncStream { continuation in
            let thread = Thread {
                while let line = readLine(strippingNewline: true) { continuation.yield(line) }
                continuation.finish()
            }
            thread.start()
        }
    }
}

extension SIMPClient {
    /// `send(to:imageURL:)` for a URL as the user typed it; one that is no URL is refused as the
    /// library refuses one that is no web URL.
    func send(to user: String, imageLink: String) async throws(ClientError) -> String {
        guard let url = URL(string: imageLink) else {
            throw ClientError("\(MessageRules.imageURLReason), got \(imageLink)", code: .badRequest)
        }
        return try await send(to: user, imageURL: url)
    }
}
