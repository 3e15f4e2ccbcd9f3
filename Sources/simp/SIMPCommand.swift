import ArgumentParser
import Foundation
import SIMPClient

@main
struct SIMPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp",
        abstract: "SIMP client: reads commands from stdin (a terminal or a pipe), prints messages and each sent message's fate.",
        discussion: REPLCommand.usage)

    @Option(help: "Server control address HOST:PORT (env SIMP_SERVER). Default 127.0.0.1:7700.")
    var server: String?

    @Option(help: "Your user name.")
    var user: String

    @Option(help: "Password; else SIMP_PASSWORD; else a prompt on a terminal.")
    var password: String?

    @Flag(help: "Create the account first; fails if the name is taken.")
    var register = false

    @Flag(help: "Print one JSON object per line.")
    var json = false

    @Option(help: "At end of input, wait up to this many seconds for outstanding acknowledgements. Default 10.")
    var linger: Double = 10

    @Option(name: .customLong("data-dir"), help: "Keep the outbox, receipts and received messages in DIR/USER.sqlite: a restarted client resends what was not accepted and shows nothing twice.")
    var dataDir: String?

    @Option(help: "Seconds between UDP keepalives, which hold a NAT mapping open. Default 15.")
    var keepalive: Double = 15

    @Flag(help: "Talk TLS on the control channel (a server started with --tls-cert).")
    var tls = false

    @Option(help: "PEM file of the CA or self-signed certificate to trust with --tls. Default: the system's roots.")
    var ca: String?

    @Option(name: .customLong("server-name"), help: "Name the server's certificate must carry with --tls. Default: the --server host.")
    var serverName: String?

    @Option(name: .customLong("reconnect-base"), help: .hidden)
    var reconnectBase: Double = 2

    func run() async throws {
        let output = Output(json: json)
        let client = try SIMPClient(configuration: makeConfiguration())
        let pass = try resolvePassword()
        do {
            if register { try await client.register(user: user, password: pass) }
            try await client.connect(user: user, password: pass)
        } catch {
            output.error(error.message)
            throw ExitCode(1)
        }
        let printer = Task { for await event in client.events { output.event(event) } }
        for await line in StandardInputLines.stream() {
            let command: REPLCommand
            do {
                command = try REPLCommand.parse(line)
            } catch {
                output.error(error.message)
                continue
            }
            if command == .quit { break }
            if command == .logout {
                await logout(client, output)
                await printer.value
                return
            }
            await execute(command, client: client, output: output)
        }
        await waitForOutstanding(client)
        await client.close()
        await printer.value
    }

    private func execute(_ command: REPLCommand, client: SIMPClient, output: Output) async {
        do {
            switch command {
            case .send(let to, let text):
                output.sent(id: try await client.send(to: to, text: text), to: to)
            case .image(let to, let url):
                output.sent(id: try await client.send(to: to, imageURL: url), to: to)
            case .history(let peer, let limit):
                output.history(peer: peer, try await client.history(with: peer, limit: limit))
            case .help:
                output.info(REPLCommand.usage)
            case .quit, .empty, .logout:
                break
            }
        } catch {
            output.error(error.message)
        }
    }

    /// Revokes the login token on the server and leaves; the next start logs in afresh.
    private func logout(_ client: SIMPClient, _ output: Output) async {
        await waitForOutstanding(client)
        do {
            try await client.logout()
            output.info("logged out")
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

    private func makeConfiguration() throws -> ClientConfiguration {
        let address = server ?? ProcessInfo.processInfo.environment["SIMP_SERVER"] ?? "127.0.0.1:7700"
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
              (1...65535).contains(port) else {
            throw ValidationError("--server must be HOST:PORT, got \(address)")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard linger >= 0 else { throw ValidationError("--linger must be >= 0") }
        var config = ClientConfiguration(host: host, port: port)
        config.reconnectBase = .milliseconds(Int64(reconnectBase * 1000))
        guard keepalive > 0 else { throw ValidationError("--keepalive must be > 0") }
        config.keepaliveInterval = .milliseconds(Int64(keepalive * 1000))
        config.dataDirectory = dataDir
        guard tls || (ca == nil && serverName == nil) else { throw ValidationError("--ca and --server-name need --tls") }
        if tls { config.tls = ClientTLS(caFile: ca, serverName: serverName) }
        return config
    }

    private func resolvePassword() throws -> String {
        if let password { return password }
        if let env = ProcessInfo.processInfo.environment["SIMP_PASSWORD"] { return env }
        if isatty(STDIN_FILENO) == 1, let typed = getpass("password for \(user): ") {
            return String(cString: typed)
        }
        throw ValidationError("no password: pass --password, set SIMP_PASSWORD, or run on a terminal")
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
