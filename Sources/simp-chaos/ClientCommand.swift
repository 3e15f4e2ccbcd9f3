import ArgumentParser
import Foundation
import SIMPClient

/// `simp-chaos client`: one SIMPClient in a process of its own, for a client whose datagrams
/// go through a lossy relay (`simp` has no flag for a datagram port other than the one the
/// server names), end-to-end encrypted with `--encrypt` as `simp` is by default. It reads
/// `/send USER TEXT` lines on stdin and prints every event as the JSON line `simp --json`
/// prints for it, so the checker reads both alike.
struct ClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "client", shouldDisplay: false)

    @Option var server: String
    @Option var user: String
    @Option var password: String
    @Option(name: .customLong("udp-port")) var udpPort: Int
    @Option(name: .customLong("data-dir")) var dataDirectory: String?
    /// End-to-end encrypted, as `simp` is by default (needs --data-dir, where the keys are kept). Not
    /// `--e2e`: that name is the run's own option (`--e2e on|off`), which would take it.
    @Flag(name: .customLong("encrypt")) var endToEnd = false

    func validate() throws {
        guard !endToEnd || dataDirectory != nil else { throw ValidationError("--encrypt needs --data-dir: the keys are kept there") }
    }

    func run() async throws {
        let parts = server.split(separator: ":")
        guard parts.count == 2, let port = Int(parts[1]) else { throw ValidationError("--server must be HOST:PORT") }
        var config = ClientConfiguration(host: String(parts[0]), port: port)
        config.reconnectBase = .milliseconds(200)
        config.udpPortOverride = udpPort
        config.dataDirectory = dataDirectory
        config.endToEnd = endToEnd
        let output = JSONLines()
        let client = SIMPClient(configuration: config)
        do {
            try await client.connect(user: user, password: password)
            // As simp: the identity (made on the first run, kept in the data directory)
            // and KeyPackages before the first line, so `connected` means ready to encrypt.
            if endToEnd, try await client.setUpIdentity() == .needsLinking {
                output.emit(["event": "needs-linking"])
            }
        } catch {
            output.emit(["event": "error", "message": "\(error)"])
            throw ExitCode(1)
        }
        let printer = Task {
            for await event in client.events { output.event(event) }
        }
        for await line in Self.standardInputLines() {
            let words = line.split(separator: " ", maxSplits: 2).map(String.init)
            guard words.count == 3, words[0] == "/send" else {
                output.emit(["event": "error", "message": "not a /send line: \(line)"])
                continue
            }
            do {
                output.emit(["event": "sent", "id": try await client.send(to: words[1], text: words[2]), "to": words[1]])
            } catch {
                output.emit(["event": "error", "message": "\(error)"])
            }
        }
        await client.close()
        await printer.value
    }

    /// stdin lines; a plain thread does the blocking reads.
    static func standardInputLines() -> AsyncStream<String> {
        AsyncStream { continuation in
            Thread {
                while let line = readLine(strippingNewline: true) { continuation.yield(line) }
                continuation.finish()
            }.start()
        }
    }
}

/// One JSON object per line on stdout, each written whole by one write(2), so that a SIGKILL
/// leaves at most the line being written cut.
private final class JSONLines: @unchecked Sendable {
    private let lock = NSLock()

    func event(_ event: ClientEvent) {
        switch event {
        case .connected(let user, let path): emit(["event": "connected", "user": user, "path": path.rawValue])
        case .path(let path): emit(["event": "path", "path": path.rawValue])
        case .disconnected(let reason): emit(["event": "disconnected", "reason": reason])
        case .ended(let reason): emit(["event": "ended", "reason": reason])
        case .reconnecting(let attempt, let delay): emit(["event": "reconnecting", "attempt": attempt, "delayMillis": Int(delay / .milliseconds(1))])
        case .accepted(let id, let to, let seq): emit(["event": "accepted", "id": id, "to": to, "seq": Int(seq)])
        case .delivered(let id, let to, let seq): emit(["event": "delivered", "id": id, "to": to, "seq": Int(seq)])
        case .failed(let id, let to, let reason, _): emit(["event": "failed", "id": id, "to": to, "reason": reason])
        case .message(let m):
            var object: [String: Any] = ["event": "message", "id": m.id, "from": m.from, "text": m.text, "seq": Int(m.seq),
                                         "sentAt": Int((m.sentAt.timeIntervalSince1970 * 1000).rounded()),
                                         "receivedAt": Int(Date().timeIntervalSince1970 * 1000)]
            if m.encrypted { object["encrypted"] = true }
            emit(object)
        case .undecryptable(let from, let id, let reason): emit(["event": "undecryptable", "from": from, "id": id, "reason": reason])
        case .identityChanged(let user): emit(["event": "identity-changed", "user": user])
        case .uncertifiedDevice(let user, let device): emit(["event": "uncertified-device", "user": user, "device": device])
        case .commitRefused(let conversation, let epoch, let reason):
            emit(["event": "commit-refused", "conversation": conversation, "epoch": Int(epoch), "reason": reason])
        case .retracted(let id, let from, let reason): emit(["event": "retracted", "id": id, "from": from, "reason": reason])
        case .error(let message, _): emit(["event": "error", "message": message])
        case .eventsDropped(let count):
            emit(["event": "error", "message": "events dropped: \(count) (this consumer fell behind its buffer; read the local history to catch up)"])
        case .groupAccepted, .memberDelivered, .groupChanged, .contactRequest, .contactAccepted, .groupInvited, .read, .typing, .presence: break
        @unknown default: break
        }
    }

    func emit(_ object: [String: Any]) {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}
