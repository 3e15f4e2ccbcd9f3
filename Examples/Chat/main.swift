// simp-example-chat: a line-based chat with one peer, embedding SIMPClient. Each line read
// from stdin is sent to the peer; what the peer sends is printed as it arrives, and each
// line sent gets a number whose status follows (accepted, delivered, read, or failed).
//
//   SIMP_SERVER=127.0.0.1:7700 SIMP_USER=alice SIMP_PASSWORD=... swift run simp-example-chat bob
//
// It encrypts end to end (`endToEnd`), as a server requires by default: the user's identity,
// this device's keys and each conversation's MLS state are kept in its data directory,
// SIMP_DATA_DIR (default $XDG_DATA_HOME/simp-example-chat, ~/.local/share/simp-example-chat),
// one process at a time (two would seal with the same keys). It must be its user's first
// device, which makes the identity: one whose identity another device made would have to be
// linked (`simp`'s /device link), which this example does not do, so run it as a user of its
// own. SIMP_PLAINTEXT=1 sends in the clear, to a server run with `--e2e optional` (a default one
// refuses each line: E2E_REQUIRED).
//
// The data directory also keeps a local history: it starts by printing the last messages
// with the peer (from disk, before connecting), and marks what it printed as shown, which
// tells the peer it was read (in plaintext only with SIMP_DATA_DIR). At end of input it waits
// until the server has accepted (or refused) every line, then exits.
import Foundation
import SIMPClient

/// One line on stdout, written at once (`print` would hold it in a buffer when stdout is a pipe or a file).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let environment = ProcessInfo.processInfo.environment
guard CommandLine.arguments.count == 2, let user = environment["SIMP_USER"], let password = environment["SIMP_PASSWORD"] else {
    FileHandle.standardError.write(Data("usage: SIMP_USER=NAME SIMP_PASSWORD=SECRET [SIMP_SERVER=HOST:PORT] [SIMP_DATA_DIR=DIR] [SIMP_PLAINTEXT=1] simp-example-chat PEER\n".utf8))
    exit(2)
}
let peer = CommandLine.arguments[1]
let server = environment["SIMP_SERVER"] ?? "127.0.0.1:7700"
guard let colon = server.lastIndex(of: ":"), let port = Int(server[server.index(after: colon)...]) else {
    FileHandle.standardError.write(Data("SIMP_SERVER must be HOST:PORT, not \(server)\n".utf8))
    exit(2)
}

var configuration = ClientConfiguration(host: String(server[..<colon]), port: port)
configuration.device = environment["SIMP_DEVICE"] ?? "chat"
let plaintext = environment["SIMP_PLAINTEXT"] == "1"
configuration.endToEnd = !plaintext
configuration.dataDirectory = environment["SIMP_DATA_DIR"] ?? (plaintext ? nil : dataHome() + "/simp-example-chat")
if let caFile = environment["SIMP_CA_FILE"] { configuration.tls = ClientTLS(caFile: caFile) }
let client = SIMPClient(configuration: configuration)

/// $XDG_DATA_HOME, where the XDG base directory spec keeps an application's files (a relative
/// one is ignored, as the spec says); default ~/.local/share.
func dataHome() -> String {
    if let base = environment["XDG_DATA_HOME"], base.hasPrefix("/") { return base }
    return NSHomeDirectory() + "/.local/share"
}

/// stdin's lines, read on a thread of their own (a blocking read must not hold one of the
/// threads Swift concurrency runs tasks on).
func standardInputLines() -> AsyncStream<String> {
    AsyncStream { continuation in
        Thread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }.start()
    }
}

func show(_ message: LocalMessage) {
    if message.isOutgoing {
        say("history: me -> \(message.conversation): \(message.text) [\(message.status.map { "\($0.stage)" } ?? "sent")]")
    } else {
        say("history: \(message.from): \(message.text)")
    }
}

// The local history is on disk: it can be read before (and without) connecting.
if configuration.dataDirectory != nil {
    do {
        try await client.openHistory(user: user)
        for message in try await client.messages(in: peer, limit: 20) { show(message) }
    } catch {
        say("no local history: \(error)")
    }
}

let events = client.events()
do {
    try await client.connect(user: user, password: password)
} catch {
    FileHandle.standardError.write(Data("cannot log in as \(user) to \(server): \(error)\n".utf8))
    exit(1)
}
if configuration.endToEnd {
    // Before anything is sent: the identity made (first device) or checked, and KeyPackages
    // uploaded, so that others can start an encrypted conversation with this device too.
    do {
        if try await client.setUpIdentity() == .needsLinking {
            // Linking takes a code shown here and approved on that device: more than this example does.
            let advice = "run it as a user of its own (or SIMP_PLAINTEXT=1 with a server run with --e2e optional)"
            FileHandle.standardError.write(Data("another device of \(user) made their identity, and this example cannot be linked to it: \(advice)\n".utf8))
            exit(1)
        }
    } catch {
        FileHandle.standardError.write(Data("cannot set up end-to-end encryption: \(error)\n".utf8))
        exit(1)
    }
}
say("connected as \(user); lines you type go to \(peer)")

// Incoming messages and the connection's ups and downs, printed as they come.
let printer = Task {
    // The stream began before `connect`, so its first `.connected` is the one just printed.
    var hasBeenOffline = false
    for await event in events {
        switch event {
        case .message(let message) where message.kind == .message && message.group == nil && message.from == peer:
            say("\(message.from): \(message.text)")
            if configuration.dataDirectory != nil {
                // Printed is shown: it no longer counts as unread, and the peer hears it was read.
                _ = try? await client.markShown(in: peer)
            }
        case .typing(let from) where from == peer:
            say("(\(peer) is typing)")
        case .disconnected(let reason):
            hasBeenOffline = true
            say("disconnected: \(reason)")
        case .reconnecting(let attempt, _):
            say("reconnecting (attempt \(attempt))")
        case .connected where hasBeenOffline:
            hasBeenOffline = false
            say("connected again")
        case .ended(let reason):
            say("session ended: \(reason)")
        default:
            // Statuses come through each message's handle below; other events are not for
            // this program. Cases added by later versions of the library land here too.
            break
        }
    }
}

var number = 0
var watchers: [Task<Void, Never>] = []
for await line in standardInputLines() where !line.isEmpty {
    number += 1
    let tag = "#\(number)"
    do {
        let handle = try await client.sendTracked(to: peer, text: line)
        say("me -> \(peer): \(line)  \(tag)")
        // Its status now, then each change, until it is read or failed (or the client closes).
        let updates = handle.updates()
        watchers.append(Task {
            var shown = MessageStatus.Stage.sending
            for await status in updates where status.stage != shown {
                shown = status.stage
                if let failure = status.failure {
                    say("\(tag) failed: \(failure.reason) [\(failure.code.rawValue)]")
                } else {
                    say("\(tag) \(status.stage)")
                }
            }
        })
        // Wait for the server's answer before the next line, so lines keep their order on screen.
        _ = await handle.wait(for: .accepted)
    } catch {
        say("\(tag) not sent: \(error) [\(error.errorCode.rawValue)]")
    }
}

// End of input: every line was accepted or refused (above). Close, which ends the streams.
await client.close()
for watcher in watchers { await watcher.value }
await printer.value
say("closed")
