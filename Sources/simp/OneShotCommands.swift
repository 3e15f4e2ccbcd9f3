import ArgumentParser
import Foundation
import SIMPCore
import SIMPClient
import SIMPTerminal

/// `simp send --to USER TEXT...`: sends one message and exits with a status that says its fate.
struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send one message; exit 0 once it is delivered (or accepted, with --accepted; to a #group, once accepted unless --all-delivered).",
        discussion: "Prints the message id (with --json, one JSON object with its fate). Exit status: 0 delivered "
            + "(or accepted with --accepted), 1 other failure, 2 usage, 3 timeout, 4 refused by the server, "
            + "5 authentication failed, 6 server unreachable.")

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The recipient: a user, or #GROUP.")
    var to: String

    @Argument(help: "The message text; several words are joined with spaces.")
    var words: [String] = []

    @Option(help: "Send the contents of this UTF-8 file as the text (- reads standard input), up to the server's limit (65,536 bytes unless set).")
    var file: String?

    @Flag(help: "Stop once the server has stored the message; do not wait for delivery.")
    var accepted = false

    @Flag(help: "To a #group: wait until every member has confirmed it (else exit once it is accepted).")
    var allDelivered = false

    @Option(help: "Seconds to wait for delivery (or acceptance, with --accepted). Default 30.")
    var timeout: Double = 30

    @Flag(help: "Print the outcome as one JSON object.")
    var json = false

    func validate() throws {
        guard words.isEmpty != (file == nil) else { throw ValidationError(file == nil ? "no message text" : "give the text or --file, not both") }
        guard timeout > 0 else { throw ValidationError("--timeout must be > 0") }
        if allDelivered && !to.hasPrefix("#") { throw ValidationError("--all-delivered is for a #group") }
        if allDelivered && accepted { throw ValidationError("--all-delivered and --accepted contradict each other") }
    }

    /// The text of `--file`: a file, or standard input for "-"; it must be UTF-8.
    private static func read(_ path: String, _ output: Output) throws -> String {
        let data: Data?
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            data = FileManager.default.contents(atPath: path)
        }
        guard let data else {
            output.problem("cannot read \(path)")
            throw ExitCode(ExitStatus.failure)
        }
        guard let text = String(data: data, encoding: .utf8) else {
            output.problem("\(path) is not UTF-8 text")
            throw ExitCode(ExitStatus.failure)
        }
        return text
    }

    func run() async throws {
        let output = Output(json: json)
        let text = try file.map { try Self.read($0, output) } ?? words.joined(separator: " ")
        let client = try await openSession(connection, output)
        let handle: MessageHandle
        do {
            handle = try await client.sendTracked(to: to, text: text)
        } catch {
            await client.close()
            output.notSent(to: to, error)
            throw ExitCode(ExitStatus.refused)
        }
        let untilAccepted = accepted || (to.hasPrefix("#") && !allDelivered)
        let fate = await Fate.awaited(handle, timeout: timeout, untilAccepted: untilAccepted)
        await client.close()
        let status = report(fate, id: handle.id, output)
        if status != 0 { throw ExitCode(status) }
    }

    /// Prints the fate and returns the exit status for it.
    private func report(_ fate: Fate, id: String, _ output: Output) -> Int32 {
        output.sendOutcome(id: id, to: to, fate)
        switch fate {
        case .accepted, .delivered:
            return 0
        case .failed(let reason, _):
            output.problem("message \(id) to \(to) failed: \(reason)")
            return ExitStatus.refused
        case .timedOut(accepted: true):
            let who = to.hasPrefix("#") ? "every member of \(to)" : to
            output.problem("message \(id) to \(to) was accepted (stored) but not delivered within \(timeout)s; "
                           + "it will be delivered when \(who) connects")
            return ExitStatus.timeout
        case .timedOut(accepted: false):
            output.problem("message \(id) to \(to) was not accepted by the server within \(timeout)s")
            return ExitStatus.timeout
        }
    }
}

/// What became of a sent message by the time `simp send` stopped waiting.
enum Fate {
    case accepted(seq: UInt64)
    case delivered(seq: UInt64)
    /// `code`: the server's when it refused, else the client's own.
    case failed(reason: String, code: ErrorCode)
    case timedOut(accepted: Bool)

    /// Watches the message's status until its fate is known or `timeout` seconds have passed.
    static func awaited(_ handle: MessageHandle, timeout: Double, untilAccepted: Bool) async -> Fate {
        await withTaskGroup(of: Fate?.self) { group in
            group.addTask { await watch(handle, untilAccepted: untilAccepted) }
            group.addTask {
                try? await Task.sleep(for: .seconds(timeout))
                return nil
            }
            // The timer ends first with nil; cancelling the watcher then makes it report what it saw.
            var fate: Fate?
            for await result in group {
                group.cancelAll()
                if fate == nil { fate = result }
            }
            return fate ?? .timedOut(accepted: false)
        }
    }

    /// Returns the message's fate (a group's is delivered once every member it went to has
    /// confirmed it: the library combines them); when cancelled, what is known so far.
    private static func watch(_ handle: MessageHandle, untilAccepted: Bool) async -> Fate {
        for await status in handle.updates() {
            switch status.stage {
            case .sending: continue
            case .failed: return .failed(reason: status.failure?.reason ?? "failed", code: status.failure?.code ?? .unspecified)
            case _ where untilAccepted: return .accepted(seq: status.seq)
            case .accepted: continue
            case .delivered, .read: return .delivered(seq: status.seq)
            }
        }
        let stage = handle.status.stage
        return .timedOut(accepted: stage >= .accepted && stage != .failed)
    }
}

/// `simp listen`: prints incoming messages until SIGINT or SIGTERM. The library confirms each
/// message it hands over, so a message printed here is delivered for its sender.
struct Listen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print incoming messages until SIGINT or SIGTERM (then exit 0), or until the server ends the session for good (then exit 1).")

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print one JSON object per line.")
    var json = false

    @Flag(name: .customLong("mark-read"), help: "Mark each message read once printed (its sender hears it, unless read receipts are off).")
    var markRead = false

    func run() async throws {
        let output = Output(json: json)
        let client = try await openSession(connection, output, commandLine: false)
        // Closing the client ends the events stream, so the loop below ends and we exit 0.
        let stop = StopSignals { Task { await client.close() } }
        for await event in client.events {
            if case .connected(let user, _) = event, !json {
                output.note("connected as \(user)")
            } else {
                output.event(event)
            }
            if markRead, case .message(let message) = event, ReadTracker.markable(message) {
                do throws(ClientError) {
                    try await client.markRead([message])
                } catch {
                    output.error("marking read: \(error.message)")
                }
            }
            // Closed by an administrator, revoked, or replaced by a newer client of this device:
            // nothing more will come.
            if case .ended = event {
                await client.close()
                throw ExitCode(ExitStatus.failure)
            }
        }
        withExtendedLifetime(stop) {}
    }
}

/// `simp group ACTION NAME [USER...]` and `simp group list`: one group request, as in the REPL.
struct Group: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make or change a group, or list yours and your invitations: create|add|remove|admin NAME USER..., leave|members|accept|decline NAME, list.")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "create, add, remove, admin, leave, members, accept, decline or list, then the group and the users.")
    var words: [String]

    @Flag(help: "Print one JSON object.")
    var json = false

    func run() async throws {
        let line = words == ["list"] ? "/groups" : "/group " + words.joined(separator: " ")
        guard case let command? = try? REPLCommand.parse(line), command != .empty else {
            throw ValidationError("usage: simp group create|add|remove|admin NAME USER..., simp group leave|members|accept|decline NAME, simp group list")
        }
        try await runRequest(connection, json: json) { client throws(ClientError) in
            if case .group(let group) = command { try await group.run(on: client) } else { try await GroupListing.run(on: client) }
        }
    }
}

/// `simp contact add|accept|decline|remove USER`, `simp contact list|block|unblock|blocked`,
/// `simp contact set NAME VALUE`: one request, its answer printed.
struct Contact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Contacts, blocks and settings: add|accept|decline|remove|block|unblock USER, list, blocked, set [NAME VALUE].")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "add, accept, decline, remove, block or unblock and a user; list; blocked; set, or set NAME VALUE (on or off; group-adds: contacts, everyone or nobody).")
    var words: [String]

    @Flag(help: "Print one JSON object.")
    var json = false

    static let usage = "usage: simp contact add|accept|decline|remove|block|unblock USER, simp contact list|blocked, simp contact set [NAME VALUE]"

    /// The REPL line the words stand for.
    static func line(_ words: [String]) -> String {
        switch words.first {
        case "list": "/contacts" + (words.count > 1 ? " " + words.dropFirst().joined(separator: " ") : "")
        case "block", "unblock", "blocked", "set": "/" + words.joined(separator: " ")
        default: "/contact " + words.joined(separator: " ")
        }
    }

    func run() async throws {
        guard case .contact(let command)? = try? REPLCommand.parse(Self.line(words)) else { throw ValidationError(Self.usage) }
        try await runRequest(connection, json: json) { client throws(ClientError) in try await command.run(on: client) }
    }
}

/// One request of a one-shot command: a session, the request, its result printed, the session
/// closed. A refusal exits `refused`, a failure to ask `failure`.
func runRequest(_ connection: ConnectionOptions, json: Bool,
                _ request: (SIMPClient) async throws(ClientError) -> RequestResult) async throws {
    let output = Output(json: json)
    let client = try await openSession(connection, output)
    do throws(ClientError) {
        output.result(try await request(client))
        await client.close()
    } catch {
        await client.close()
        output.problem(error.message)
        throw ExitCode(error.code == nil ? ExitStatus.failure : ExitStatus.refused)
    }
}

/// `simp history USER`: prints the conversation with USER, oldest first, and exits. Encrypting,
/// it is the REPL's device (with a REPL running it says so: /history there).
struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the last messages between you and USER, oldest first.")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The other user, or #GROUP.")
    var peer: String

    @Option(help: "How many messages, 1-1000. Default 20.")
    var limit = 20

    @Flag(help: "Print one JSON object.")
    var json = false

    func validate() throws {
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be 1-1000") }
    }

    func run() async throws {
        let output = Output(json: json)
        // An encrypting device's history is its own data directory's (the server holds only
        // ciphertext): the REPL's device's, which has the conversations. Plaintext comes from
        // the server, as the one-shot device, which does not end a running REPL.
        let client = try await openSession(connection, output, commandLine: !connection.endToEnd)
        do {
            output.history(peer: peer, try await client.history(with: peer, limit: limit))
            await client.close()
        } catch {
            await client.close()
            output.problem(error.message)
            throw ExitCode(error.code == nil ? ExitStatus.failure : ExitStatus.refused)
        }
    }
}

/// `simp login`: logs in with the password and saves the token for later commands.
struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log in with the password and save the login token (not the password) in the credentials file.")

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let output = Output(json: false)
        let plan = try connection.loginPlan(needsPassword: true)
        // A token is all it makes: no identity for the one-shot device yet.
        let client = try await openSession(connection, output, plan: plan, save: true, identity: false)
        do {
            try await connection.saveREPLLogin(client, plan)
        } catch {
            await client.close()
            output.problem("login saved for the one-shot commands only: \(describe(error))")
            throw ExitCode(ExitStatus.failure)
        }
        await client.close()
        output.info("login saved in \(CredentialsFile.path)")
    }
}

/// Connects for a subcommand; on failure prints one line on stderr and exits with the status
/// for it: 5 when the login was refused, 6 when the server cannot be reached.
/// `commandLine`: as the installation's one-shot device (`ConnectionOptions.configuration`);
/// false: as its own device, the REPL's (`listen`, and `history` of an encrypting device).
/// `plan`: how to log in, when the caller worked it out already (it may have asked for the password).
/// `identity`: an encrypting run sets up this device's identity first (`ConnectionOptions.setUpIdentity`);
/// a device that must be linked fails here, with what to do (exit 1), rather than at its first send.
func openSession(_ connection: ConnectionOptions, _ output: Output, commandLine: Bool = true,
                 needsPassword: Bool = false, plan given: LoginPlan? = nil, save: Bool = false,
                 identity: Bool = true) async throws -> SIMPClient {
    let plan = try given ?? connection.loginPlan(needsPassword: needsPassword)
    let client = SIMPClient(configuration: try connection.configuration(plan, commandLine: commandLine))
    do {
        try await connection.connect(client, plan, save: save)
    } catch {
        await client.close()
        output.problem(describe(error))
        throw ExitCode(exitStatus(forLogin: error))
    }
    guard identity else { return client }
    do {
        guard try await connection.setUpIdentity(client, commandLine: commandLine) != .needsLinking else {
            let device = await client.deviceName()
            await client.close()
            output.problem("this device (\(device)) does not hold your identity: another device of yours made it, on another machine "
                           + "or with another data directory. Link it: run simp --device \(device) and /device link there, then /device links "
                           + "and /device approve on a device that holds it; or use --no-e2e with a server that allows plaintext")
            throw ExitCode(ExitStatus.failure)
        }
    } catch let error as ClientError {
        await client.close()
        output.problem("cannot set up end-to-end encryption: \(error.message)")
        throw ExitCode(ExitStatus.failure)
    }
    return client
}

private func exitStatus(forLogin error: any Error) -> Int32 {
    guard let error = error as? ClientError else { return ExitStatus.failure }
    switch error.code {
    case .invalidCredentials?, .invalidToken?, .loginThrottled?:
        return ExitStatus.authentication
    case nil:
        // The client's own failures: no connection, no answer, no UDP path, TLS.
        return ExitStatus.unreachable
    default:
        return ExitStatus.failure
    }
}

/// A client error's own message; anything else as it describes itself.
func describe(_ error: any Error) -> String {
    (error as? ClientError)?.message ?? "\(error)"
}

/// Turns SIGINT and SIGTERM into a call to `handler` instead of the default death.
final class StopSignals {
    private let sources: [any DispatchSourceSignal]

    init(_ handler: @escaping @Sendable () -> Void) {
        sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: handler)
            source.resume()
            return source
        }
    }
}
