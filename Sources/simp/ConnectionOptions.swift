import ArgumentParser
import Foundation
import SIMPClient
import SIMPCore
import SIMPTerminal

/// How `simp` reaches the server and logs in: the same flags for the REPL and every subcommand.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "Server control address HOST:PORT, or several nodes of one deployment HOST:PORT,HOST:PORT,... to fail over between (env SIMP_SERVER). Default: the saved login's, else 127.0.0.1:7700.")
    var server: String?

    @Option(help: "Your user name. Default: the saved login's.")
    var user: String?

    @Option(help: "Password; else SIMP_PASSWORD; else the saved login; else a prompt on a terminal.")
    var password: String?

    @Flag(name: .customLong("save-login"), help: "After logging in with the password, save the login token (not the password) in the credentials file.")
    var saveLogin = false

    @Option(help: "Which of your devices this is: 1-16 of a-z, 0-9, '.', '_', '-'. Each device gets every message; what one sends shows on the others; a second client of the same device replaces the first. Default: a name made once for this installation (kept in the config directory, or in --data-dir); the one-shot commands other than `listen`, `verify` and an encrypting `history` use it with -cli appended, so they do not end a running REPL: a device of their own, with a data directory of its own.")
    var device: String?

    @Flag(name: .customLong("e2e"), inversion: .prefixedNo,
          help: "End-to-end encrypt what you send (the default; --e2e is kept so older command lines work). The keys are kept in the data directory. --no-e2e: plaintext, for a server started with --e2e optional (a server's default refuses it with E2E_REQUIRED).")
    var endToEnd = true

    @Option(name: .customLong("data-dir"), help: "Keep this device's keys, outbox, receipts and received messages in DIR/USER.sqlite: a restarted client resends what was not accepted and shows nothing twice. Default: $XDG_DATA_HOME/simp/DEVICE (~/.local/share/simp/DEVICE), one per device; none with --no-e2e. One simp at a time uses it (another waits, or is refused).")
    var dataDir: String?

    @Option(help: "Seconds between UDP keepalives, which hold a NAT mapping open. Default 25.")
    var keepalive: Double = 25

    @Flag(help: "Take a message as soon as it reaches the server, before it is stored, when nothing else is on its way to you; a message whose store then fails is shown as retracted. Only with --no-e2e and no --data-dir.")
    var early = false

    @Flag(name: .customLong("congestion-control"), inversion: .prefixedNo,
          help: "Send under a congestion window and pacing (the default); without, every message leaves at once.")
    var congestionControl = true

    @Flag(inversion: .prefixedNo, exclusivity: .exclusive,
          help: "TLS on the control channel (a server started with --tls-cert). Default: on, unless every server is this machine (127.0.0.0/8, ::1, localhost). --no-tls to another machine needs --allow-plaintext.")
    var tls: Bool?

    @Flag(name: .customLong("allow-plaintext"),
          help: "With --no-tls, talk plain TCP to a server that is not this machine: your password, login token and messages cross the network unencrypted.")
    var allowPlaintext = false

    @Option(help: "PEM file of the CA or self-signed certificate to trust for TLS. Default: the system's roots.")
    var ca: String?

    @Option(name: .customLong("server-name"), help: "Name the server's certificate must carry for TLS. Default: the --server host.")
    var serverName: String?

    @Option(name: .customLong("datagrams-over-stream"),
            help: "auto (when UDP does not work, messages travel inside the control connection, and move to UDP once it answers) or never (UDP only). Default auto.")
    var datagramsOverStream: DatagramsOverStream = .auto

    @Option(name: .customLong("reconnect-base"), help: .hidden)
    var reconnectBase: Double = 2

    /// How this run logs in: the password when one is given, else the saved login for this
    /// server and user, else a password typed on a terminal.
    func loginPlan(needsPassword: Bool = false) throws -> LoginPlan {
        let explicitServer = server ?? ProcessInfo.processInfo.environment["SIMP_SERVER"]
        let saved = CredentialsFile.load().flatMap { login in
            (explicitServer ?? login.server) == login.server && (user ?? login.user) == login.user ? login : nil
        }
        let address = explicitServer ?? saved?.server ?? "127.0.0.1:7700"
        let tls = try usesTLS(address)
        guard let name = user ?? saved?.user else {
            throw ValidationError("no user: pass --user, or save a login with simp login")
        }
        if let given = password ?? ProcessInfo.processInfo.environment["SIMP_PASSWORD"] {
            return LoginPlan(server: address, tls: tls, user: name, method: .password(given))
        }
        if let saved, !needsPassword {
            // A token obtained over TLS must not cross the network in clear.
            guard tls || !saved.tls else { throw ValidationError("the saved login for \(name) was made over TLS: connect with TLS (--tls)") }
            return LoginPlan(server: address, tls: tls, user: name, method: .saved(saved))
        }
        guard let typed = Self.typedPassword(for: name) else {
            throw ValidationError("no password: pass --password, set SIMP_PASSWORD, run on a terminal, or save a login with simp login")
        }
        return LoginPlan(server: address, tls: tls, user: name, method: .password(typed))
    }

    /// Whether to talk TLS to the servers of `addresses` (`TransportChoice`), before any password is asked for.
    private func usesTLS(_ addresses: String) throws -> Bool {
        let servers = try Self.servers(addresses)
        do {
            return try TransportChoice.usesTLS(servers: servers, tls: tls, allowPlaintext: allowPlaintext)
        } catch {
            throw ValidationError(error.message)
        }
    }

    static func servers(_ addresses: String) throws -> [ServerAddress] {
        try addresses.split(separator: ",", omittingEmptySubsequences: false).map { try address(String($0)) }
    }

    /// `commandLine`: for a one-shot command that does not listen (send, group, contact, login,
    /// password; history with --no-e2e): by default a device of its own beside the
    /// installation's, so it does not replace a REPL.
    /// Takes the data directory's lock for `plan.user` (`DataDirectoryLock`): a one-shot command
    /// waits up to 30 s for another to finish, the REPL, `listen` and `verify` do not wait.
    /// `lockWait`: how long to wait for the lock, if not as above.
    func configuration(_ plan: LoginPlan, commandLine: Bool = false, lockWait: Double? = nil) throws -> ClientConfiguration {
        var config = ClientConfiguration(servers: try Self.servers(plan.server))
        config.reconnectBase = .milliseconds(Int64(reconnectBase * 1000))
        guard keepalive > 0 else { throw ValidationError("--keepalive must be > 0") }
        config.keepaliveInterval = .milliseconds(Int64(keepalive * 1000))
        let storage = try storage(commandLine: commandLine)
        config.dataDirectory = storage.directory
        config.endToEnd = endToEnd
        guard !early || storage.directory == nil else {
            throw ValidationError(dataDir != nil ? "--early cannot be used with --data-dir: received messages are kept there by seq"
                                                 : "--early needs --no-e2e: an encrypting client keeps received messages in its data directory by seq")
        }
        config.earlyDelivery = early
        config.congestionControl = congestionControl
        config.datagramsOverStream = datagramsOverStream
        guard plan.tls || (ca == nil && serverName == nil) else { throw ValidationError("--ca and --server-name need TLS: add --tls") }
        if plan.tls { config.tls = ClientTLS(caFile: ca, serverName: serverName) }
        config.allowPlaintext = allowPlaintext
        config.device = storage.device
        // Not a usage error: "Error: ..." on stderr and exit 1. Whatever writes a data directory
        // locks it, plaintext (`--no-e2e --data-dir`) too: two outboxes in one file would resend
        // each other's messages. Plaintext without `--data-dir` writes none (its outbox is in
        // memory): nothing to lock.
        if let directory = storage.directory {
            try DataDirectoryLock.take(directory, user: plan.user, wait: lockWait ?? (commandLine ? 30 : 0))
        }
        return config
    }

    /// Which device this run is and where it keeps its state (`DataHome`). `directory` nil:
    /// nowhere (`--no-e2e` without `--data-dir`); `device` nil: the data directory's own name,
    /// which the library reads (an explicit `--data-dir` is one device, whoever opens it).
    /// `siblings`: where this device may take the user's identity from without a code.
    struct Storage: Equatable {
        var device: String?
        var directory: String?
        var siblings: [String] = []
    }

    func storage(commandLine: Bool) throws -> Storage {
        if let device {
            guard DeviceName.isValid(device) else {
                throw ValidationError("--device must be 1-\(DeviceName.maxBytes) of a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
            }
        }
        if let dataDir { return Storage(device: device, directory: dataDir) }
        let name = device ?? (commandLine ? DeviceFile.name() + "-cli" : DeviceFile.name())
        guard endToEnd else { return Storage(device: name, directory: nil) }
        return Storage(device: name, directory: DataHome.directory(of: name), siblings: DataHome.siblings(of: name))
    }

    /// An encrypting run, once connected: this device's identity (made by the user's first
    /// device; taken from another device of this installation without a code when one holds
    /// it). `.needsLinking`: it must be linked from a device of the user's (`/device link`).
    func setUpIdentity(_ client: SIMPClient, commandLine: Bool) async throws(ClientError) -> IdentityState? {
        guard endToEnd else { return nil }
        var state = try await client.setUpIdentity()
        for sibling in (try? storage(commandLine: commandLine).siblings) ?? [] where state == .needsLinking {
            state = try await client.linkThisDevice(fromDataDirectory: sibling)
        }
        return state
    }

    /// The REPL, encrypting in its default data directory: readies the installation's one-shot
    /// device (`-cli`) too, by logging it in once and giving it the identity (`setUpIdentity`):
    /// its certified keys are then there when the REPL makes a conversation, or sends in one,
    /// so the conversation holds it and `simp send` from another terminal can write there at
    /// once. A device that first appears later is added by the next send of a device of the
    /// conversation (docs/E2EE.md, Part 4). Returns why it could not, nil when it did or when
    /// there is nothing to do (another --device, --data-dir, --no-e2e; a one-shot command
    /// holding that device's lock readies it itself; no saved login for it and no password).
    func prepareOneShotDevice(_ plan: LoginPlan) async -> String? {
        guard endToEnd, dataDir == nil, device == nil else { return nil }
        let configuration: ClientConfiguration
        do {
            configuration = try self.configuration(plan, commandLine: true, lockWait: 0)
        } catch {
            return nil
        }
        guard let directory = configuration.dataDirectory, let device = configuration.device else { return nil }
        defer { DataDirectoryLock.release(directory, user: plan.user) }
        let client = SIMPClient(configuration: configuration)
        do throws(ClientError) {
            switch plan.method {
            case .password(let password):
                try await client.connect(user: plan.user, password: password)
            case .saved(let saved):
                guard let token = saved.loginToken(for: device) else {
                    await client.close()
                    return nil
                }
                try await client.connect(user: plan.user, token: token)
            }
            let state = try await setUpIdentity(client, commandLine: true)
            await client.close()
            return state == .needsLinking ? "the one-shot commands' device \(device) could not take your identity from this one" : nil
        } catch {
            await client.close()
            return "the one-shot commands' device \(device) is not ready: \(error.message)"
        }
    }

    /// One `HOST:PORT` (an IPv6 host in brackets).
    static func address(_ text: String) throws -> ServerAddress {
        let text = text.trimmingCharacters(in: .whitespaces)
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
              (1...65535).contains(port), colon > text.startIndex else {
            throw ValidationError("--server must be HOST:PORT[,HOST:PORT...], got \(text)")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return ServerAddress(host: host, port: port)
    }

    /// Logs in as planned. A saved token that has expired or was revoked falls back to a
    /// password typed on a terminal; without a terminal that is an error saying what to do.
    /// Saves the login when asked to (`save`, `--save-login`) or when a typed password
    /// replaced a stale saved one.
    func connect(_ client: SIMPClient, _ plan: LoginPlan, save: Bool = false) async throws {
        switch plan.method {
        case .password(let password):
            try await client.connect(user: plan.user, password: password)
            if save || saveLogin { try await saveLogin(of: client, plan) }
        case .saved(let saved):
            try await connect(client, plan, saved)
        }
    }

    private func connect(_ client: SIMPClient, _ plan: LoginPlan, _ saved: SavedLogin) async throws {
        // A token opens sessions for its own device only: this run's device needs its own.
        if let token = saved.loginToken(for: await client.deviceName()) {
            do {
                try await client.connect(user: plan.user, token: token)
                return
            } catch {
                guard error.code == .invalidToken else { throw error }
            }
            await client.disconnect()
        }
        guard let typed = Self.typedPassword(for: plan.user) else {
            throw ClientError("the saved login for \(plan.user) on \(plan.server) has expired or was revoked: "
                              + "run simp login, or give --password or SIMP_PASSWORD", code: .invalidToken)
        }
        try await client.connect(user: plan.user, password: typed)
        try await saveLogin(of: client, plan)
    }

    private func saveLogin(of client: SIMPClient, _ plan: LoginPlan) async throws {
        guard let token = await client.loginToken() else { return }
        try CredentialsFile.save(token, for: await client.deviceName(), server: plan.server, user: plan.user, tls: plan.tls)
    }

    /// `simp login`: a token for the installation's REPL device too (the command itself ran as
    /// its one-shot device), logged in without a session, so a running REPL is not replaced.
    /// Nothing more when `--device` named the one device to save.
    func saveREPLLogin(_ client: SIMPClient, _ plan: LoginPlan) async throws {
        guard device == nil, case .password(let password) = plan.method else { return }
        let repl = DeviceFile.name()
        let token = try await client.logIn(user: plan.user, password: password, device: repl)
        try CredentialsFile.save(token, for: repl, server: plan.server, user: plan.user, tls: plan.tls)
    }

    private static func typedPassword(for user: String) -> String? {
        guard isatty(STDIN_FILENO) == 1, let typed = getpass("password for \(user): ") else { return nil }
        return String(cString: typed)
    }
}

struct LoginPlan {
    enum Method {
        case password(String)
        case saved(SavedLogin)
    }

    var server: String
    /// TLS to the servers (`TransportChoice`).
    var tls: Bool
    var user: String
    var method: Method
}

extension DatagramsOverStream: ExpressibleByArgument {}
