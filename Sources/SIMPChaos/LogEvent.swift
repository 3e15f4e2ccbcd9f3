import Foundation

/// One line of a client's log: what `simp --json` prints, plus the markers the runner adds
/// (`chaos-start`, `chaos-kill`) between a client's runs.
public enum LogEvent: Equatable, Sendable {
    case sent(id: String, to: String)
    case accepted(id: String, to: String, seq: Int)
    case delivered(id: String, to: String, seq: Int)
    case failed(id: String, to: String, reason: String)
    /// `encrypted`: the line said `"encrypted":true`, the message travelled sealed and this
    /// device decrypted it (docs/E2EE.md, Part 4).
    case message(id: String, from: String, text: String, seq: Int, encrypted: Bool = false)
    /// A sealed message this device could not open: `simp --json`'s `undecryptable` line.
    case undecryptable(id: String, from: String, reason: String)
    /// A session is bound (the client's first, or one after a reconnect or a restart), its
    /// datagrams on `path`: `udp`, or `stream` (inside the control connection); empty when the
    /// line names none.
    case connected(path: String)
    /// The session's datagrams moved: to `udp`, or to the `stream`.
    case path(String)
    /// The runner killed this client with SIGKILL here; what follows is its next run.
    case killed
    /// Anything else (`error`, `reconnecting`, ...): kept for the record only.
    case other(String)

    /// nil for a line that is not a JSON object with an `event` (a line cut by SIGKILL).
    public static func parse(_ line: Substring) -> LogEvent? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let event = object["event"] as? String else { return nil }
        let id = object["id"] as? String ?? ""
        let seq = (object["seq"] as? NSNumber)?.intValue ?? 0
        switch event {
        case "sent": return .sent(id: id, to: object["to"] as? String ?? "")
        case "accepted": return .accepted(id: id, to: object["to"] as? String ?? "", seq: seq)
        case "delivered": return .delivered(id: id, to: object["to"] as? String ?? "", seq: seq)
        case "failed": return .failed(id: id, to: object["to"] as? String ?? "", reason: object["reason"] as? String ?? "")
        case "message":
            return .message(id: id, from: object["from"] as? String ?? "", text: object["text"] as? String ?? "", seq: seq,
                            encrypted: flag(object["encrypted"]))
        case "undecryptable":
            return .undecryptable(id: id, from: object["from"] as? String ?? "", reason: object["reason"] as? String ?? "")
        case "connected": return .connected(path: object["path"] as? String ?? "")
        case "path": return .path(object["path"] as? String ?? "")
        case "chaos-kill": return .killed
        default: return .other(event)
        }
    }

    /// A JSON `true` (Foundation gives a Bool or an NSNumber, by platform).
    private static func flag(_ value: Any?) -> Bool {
        if let bool = value as? Bool { return bool }
        return (value as? NSNumber)?.boolValue ?? false
    }

    public static func parseLog(_ text: String) -> [LogEvent] {
        text.split(whereSeparator: \.isNewline).compactMap(parse)
    }
}

/// Every run of one client, in order, as one list of events.
public struct ClientLog: Sendable {
    public var user: String
    public var events: [LogEvent]

    public init(user: String, events: [LogEvent]) {
        self.user = user
        self.events = events
    }
}

/// The text the traffic generator sends: the sender and its own running count, so that the
/// checker knows the order of sends from the recipient's side alone, even for a message whose
/// `sent` line a SIGKILL cut off.
public enum MessageText {
    public static func make(sender: String, index: Int) -> String { "\(sender)#\(index)" }

    /// The running count, when `text` is one of ours from `sender`.
    public static func index(_ text: String, sender: String) -> Int? {
        guard text.hasPrefix(sender + "#") else { return nil }
        return Int(text.dropFirst(sender.count + 1))
    }
}

/// What one `udp-blocked` fault did, for the run's report: the datagrams its relay dropped while
/// blocked (so the fault was real), and where the client's `path` lines say its datagrams went.
public struct UDPBlockOutcome: Equatable, Codable, Sendable, CustomStringConvertible {
    public var user: String
    public var at: Double
    public var heal: Double
    public var droppedToServer: Int
    public var droppedToClient: Int
    /// The paths the client's `path` and `connected` lines named while UDP was blocked, then
    /// from the heal to the end of the run (or to the same client's next block).
    public var pathsWhileBlocked: [String]
    public var pathsAfter: [String]

    public init(user: String, at: Double, heal: Double, droppedToServer: Int, droppedToClient: Int,
                pathsWhileBlocked: [String], pathsAfter: [String]) {
        self.user = user
        self.at = at
        self.heal = heal
        self.droppedToServer = droppedToServer
        self.droppedToClient = droppedToClient
        self.pathsWhileBlocked = pathsWhileBlocked
        self.pathsAfter = pathsAfter
    }

    /// The paths named in `events`, in order: by `path` lines, and by `connected` lines (a new
    /// session after a reconnect or a restart starts on a path of its own).
    public static func paths(_ events: some Sequence<LogEvent>) -> [String] {
        events.compactMap { event -> String? in
            switch event {
            case .path(let path): path
            case .connected(let path) where !path.isEmpty: path
            default: nil
            }
        }
    }

    public var movedToStream: Bool { pathsWhileBlocked.contains("stream") }
    /// On UDP again after the heal, by a probe that got through or by a new session.
    public var backOnUDP: Bool { pathsAfter.contains("udp") }

    public var description: String {
        let moves = movedToStream ? "moved to the stream while blocked, " + (backOnUDP ? "back on UDP after the heal" : "not back on UDP after the heal")
                                  : "did not move to the stream while blocked"
        return String(format: "%@: UDP blocked t=%.2f-%.2fs, ", user, at, heal)
            + "\(droppedToServer + droppedToClient) datagrams dropped (\(droppedToServer) to the node, \(droppedToClient) to the client); \(moves)"
    }
}
