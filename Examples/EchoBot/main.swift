// simp-example-bot: a bot that embeds SIMPClient. It logs in and answers every message it
// receives: "/time" with the current time (UTC), "/help" with what it understands, anything
// else with the text echoed back. In a group it answers the group.
//
//   SIMP_SERVER=127.0.0.1:7700 SIMP_USER=echo SIMP_PASSWORD=... swift run simp-example-bot
//
// The account must exist (`simp --user echo --register`, or `SIMPClient.register`), and be the
// bot's own: it encrypts end to end (`endToEnd`), as a server requires by default, and makes
// the user's identity on its first run. The identity, the device's keys and each
// conversation's MLS state are kept in SIMP_DATA_DIR (default $XDG_DATA_HOME/simp-example-bot,
// ~/.local/share/simp-example-bot), one process at a time (two would seal with the same keys).
// SIMP_PLAINTEXT=1 answers in the clear, to a server run with `--e2e optional` (talk to it
// with `simp --no-e2e` there).
// Ctrl-C (SIGINT) or SIGTERM closes the client and exits.
import Foundation
import SIMPClient

/// One line on stdout, written at once (`print` would hold it in a buffer when stdout is a pipe or a file).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let environment = ProcessInfo.processInfo.environment
guard let user = environment["SIMP_USER"], let password = environment["SIMP_PASSWORD"] else {
    FileHandle.standardError.write(Data("usage: SIMP_USER=NAME SIMP_PASSWORD=SECRET [SIMP_SERVER=HOST:PORT] [SIMP_DATA_DIR=DIR] [SIMP_PLAINTEXT=1] simp-example-bot\n".utf8))
    exit(2)
}
let server = environment["SIMP_SERVER"] ?? "127.0.0.1:7700"
guard let colon = server.lastIndex(of: ":"), let port = Int(server[server.index(after: colon)...]) else {
    FileHandle.standardError.write(Data("SIMP_SERVER must be HOST:PORT, not \(server)\n".utf8))
    exit(2)
}

var configuration = ClientConfiguration(host: String(server[..<colon]), port: port)
// One device of the bot's user; a second client with the same name would replace this one.
configuration.device = environment["SIMP_DEVICE"] ?? "bot"
let plaintext = environment["SIMP_PLAINTEXT"] == "1"
configuration.endToEnd = !plaintext
configuration.dataDirectory = environment["SIMP_DATA_DIR"] ?? (plaintext ? nil : dataHome() + "/simp-example-bot")
if let caFile = environment["SIMP_CA_FILE"] { configuration.tls = ClientTLS(caFile: caFile) }
let client = SIMPClient(configuration: configuration)

/// $XDG_DATA_HOME, where the XDG base directory spec keeps an application's files (a relative
/// one is ignored, as the spec says); default ~/.local/share.
func dataHome() -> String {
    if let base = environment["XDG_DATA_HOME"], base.hasPrefix("/") { return base }
    return NSHomeDirectory() + "/.local/share"
}

/// What the bot says to `text`.
func answer(to text: String) -> String {
    switch text.trimmingCharacters(in: .whitespaces) {
    case "/time": "It is \(Date().formatted(.iso8601)) (UTC)."
    case "/help": "I answer /time with the time, and echo anything else."
    case let other: "echo: \(other)"
    }
}

// The stream is made before connecting, so no event is missed.
let events = client.events()
do {
    try await client.connect(user: user, password: password)
} catch {
    FileHandle.standardError.write(Data("cannot log in as \(user) to \(server): \(error)\n".utf8))
    exit(1)
}
if configuration.endToEnd {
    // Before answering anyone: the identity made (first run) or checked, and KeyPackages
    // uploaded, so that others can start an encrypted conversation with the bot.
    do {
        if try await client.setUpIdentity() == .needsLinking {
            FileHandle.standardError.write(Data("another device of \(user) made their identity: give the bot a user of its own\n".utf8))
            exit(1)
        }
    } catch {
        FileHandle.standardError.write(Data("cannot set up end-to-end encryption: \(error)\n".utf8))
        exit(1)
    }
}
say("connected as \(user) to \(server)")

// SIGINT and SIGTERM close the client: its event stream ends, and so does the loop below.
var stops: [any DispatchSourceSignal] = []
for sig in [SIGINT, SIGTERM] {
    signal(sig, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
    source.setEventHandler { Task { await client.close() } }
    source.resume()
    stops.append(source)
}

// The stream began before `connect`, so its first `.connected` is the one just printed.
var hasBeenOffline = false
for await event in events {
    switch event {
    case .message(let message) where message.kind == .message && message.groupChange == nil && message.from != user:
        // Answer where it came from: the group for a group message, else the sender.
        let conversation = message.group.map { "#\($0)" } ?? message.from
        do {
            let id = try await client.send(to: conversation, text: answer(to: message.text))
            say("answered \(message.from) in \(conversation) (\(id))")
        } catch {
            say("cannot answer \(message.from): \(error) [\(error.errorCode.rawValue)]")
        }
    case .failed(let id, let to, let reason, _):
        say("answer \(id) to \(to) failed: \(reason)")
    case .disconnected(let reason):
        // The client reconnects by itself; messages sent to the bot meanwhile wait on the server.
        hasBeenOffline = true
        say("disconnected: \(reason)")
    case .connected where hasBeenOffline:
        hasBeenOffline = false
        say("connected again")
    case .ended(let reason):
        // The server ended the session for good (the device was revoked, say): stop.
        say("session ended: \(reason)")
        await client.close()
    default:
        // Other events (deliveries, presence, typing, ...) need nothing from this bot; new
        // kinds of event may come with later versions of the library and land here too.
        break
    }
}
say("closed")
