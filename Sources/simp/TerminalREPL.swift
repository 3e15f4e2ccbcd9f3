import Foundation
import SIMPClient
import SIMPTerminal

/// The REPL when stdin and stdout are a terminal: lines come from the line editor, and every
/// line shown goes through it, so messages arriving while a line is typed appear above it.
/// What the lines say is REPLScreen's business; this type only connects the client, the
/// screen state and the editor.
final class TerminalREPL: @unchecked Sendable {
    private let client: SIMPClient
    private let lock = NSLock()
    private var screen: REPLScreen
    private var editor: LineEditor!

    static func wanted(json: Bool) -> Bool {
        !json && isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1
    }

    init(client: SIMPClient, session: REPLScreen.Session) {
        self.client = client
        let environment = ProcessInfo.processInfo.environment
        screen = REPLScreen(session: session, style: .forOutput(isTerminal: true, environment: environment))
        let historyPath = REPLHistoryFile.path(environment: environment)
        if let historyPath {
            try? FileManager.default.createDirectory(atPath: (historyPath as NSString).deletingLastPathComponent,
                                                     withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        editor = LineEditor(prompt: screen.prompt, promptColumns: screen.promptColumns, historyPath: historyPath, completer: { [unowned self] before in
            let result = REPLCompletion.complete(before, users: withScreen { $0.users.sorted })
            return (result.insert, result.alternatives)
        }, edited: { [unowned self] line in
            // A few seconds apart while the user types in a conversation (REPLScreen.userTyped).
            if let peer = withScreen({ $0.userTyped(line, now: Date()) }) { try? client.sendTyping(to: peer) }
        })
    }

    var lines: AsyncStream<String> { editor.lines }

    /// Starts the editor, shows the banner, and prints the client's events until they end or
    /// the session does.
    func start() -> Task<Void, Never> {
        let earlier = editor.start()
        withScreen { screen in earlier.forEach { screen.learn(fromLine: $0) } }
        show(withScreen { $0.banner() })
        return Task { [self] in
            let sweeper = Task { await sweepUnregistered() }
            // Tab knows the user's groups from the start; without them it learns as it goes.
            Task { [self] in
                if let groups = try? await client.groups() { withScreen { $0.know(groups: groups) } }
            }
            for await event in client.events {
                show(withScreen { $0.handle(event, now: Date()) })
                markDueRead()
                if case .typing = event { typingChanged() }
                if case .ended = event { break }
            }
            sweeper.cancel()
        }
    }

    /// Puts the terminal back; later lines are printed plainly.
    func stop() { editor.stop() }

    func learn(_ line: String) { withScreen { $0.learn(fromLine: line) } }

    func error(_ message: String) { show([withScreen { $0.error(message) }]) }

    /// Where plain lines go (`/to`).
    var conversation: String? { withScreen { $0.conversation } }

    func execute(_ command: REPLCommand) async {
        do {
            switch command {
            case .converse(let peer):
                let (line, prompt, columns) = withScreen { screen in
                    (screen.converse(with: peer), screen.prompt, screen.promptColumns)
                }
                editor.setPrompt(prompt, columns: columns)
                show([line])
                markDueRead()
            case .send(let to, let text):
                let id = try await client.send(to: to, text: text)
                show(withScreen { $0.sent(id: id, to: to, text: text) })
            case .image(let to, let url):
                let id = try await client.send(to: to, imageLink: url)
                show(withScreen { $0.sent(id: id, to: to, text: "[image] " + url) })
            case .history(let peer, let limit):
                let messages = try await client.history(with: peer, limit: limit)
                show(withScreen { $0.history(peer: peer, messages, now: Date()) })
            case .status:
                show(withScreen { $0.status() })
            case .devices:
                let devices = try await client.devices()
                show(withScreen { $0.devices(devices, now: Date()) })
            case .revokeDevice(let name):
                try await client.revokeDevice(name)
                show([withScreen { $0.info("device \(name) revoked") }])
            case .linkDevice:
                let result = try await DeviceLinking.link(on: client) { [self] shown in show([withScreen { $0.info(shown.human) }]) }
                show([withScreen { $0.info(result.human) }])
            case .deviceLinks:
                let result = try await DeviceLinking.links(on: client)
                show([withScreen { $0.info(result.human) }])
            case .approveLink(let name, let code):
                let result = try await DeviceLinking.approve(name, code: code, on: client)
                show([withScreen { $0.info(result.human) }])
            case .group(let group):
                let result = try await group.run(on: client)
                show([withScreen { $0.info(result.human) }])
            case .groups:
                let groups = try await client.groups()
                let result = GroupListing.result(groups, invitations: try await client.groupInvitations())
                show([withScreen { screen in
                    screen.know(groups: groups)
                    return screen.info(result.human)
                }])
            case .contact(let contact):
                let result = try await contact.run(on: client)
                show([withScreen { $0.info(result.human) }])
            case .presence:
                let users = try await client.presence()
                show(withScreen { $0.presence(users, now: Date()) })
            case .verify(let peer, let number):
                let result = try await Verification.run(peer, number: number, on: client)
                show([withScreen { $0.info(result.human) }])
            case .read(let peer):
                let count = withScreen { $0.reads.markAll(from: peer) }
                try await client.markRead(withScreen { $0.reads.takeDue() })
                show([withScreen { $0.info("marked \(count) message\(count == 1 ? "" : "s") from \(peer) read") }])
            case .help:
                show(withScreen { $0.help() })
            case .quit, .empty, .logout:
                break
            }
        } catch {
            self.error(error.message)
        }
    }

    /// Someone was heard typing: the prompt says so for a few seconds (until no more comes).
    private func typingChanged() {
        updatePrompt()
        Task { [self] in
            try? await Task.sleep(for: .seconds(REPLScreen.typingShown))
            if withScreen({ $0.typingExpired(now: Date()) }) { updatePrompt() }
        }
    }

    private func updatePrompt() {
        let (prompt, columns) = withScreen { ($0.prompt, $0.promptColumns) }
        editor.setPrompt(prompt, columns: columns)
    }

    /// Tells the server what the user has now seen (not waited for: a failure is a line).
    private func markDueRead() {
        let due = withScreen { $0.reads.takeDue() }
        guard !due.isEmpty else { return }
        Task { [self] in
            do throws(ClientError) {
                try await client.markRead(due)
            } catch {
                self.error("marking read: \(error.message)")
            }
        }
    }

    /// Fates of messages this run did not send (resent from --data-dir) would otherwise wait
    /// for a registration that never comes; a second is far longer than a send takes to return.
    private func sweepUnregistered() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            show(withScreen { $0.unregisteredChanges() })
        }
    }

    private func show(_ lines: [String]) { editor.print(lines) }

    private func withScreen<T>(_ body: (inout REPLScreen) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&screen)
    }
}
