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
    /// The runner killed this client with SIGKILL here; what follows is its next run.
    case killed
    /// Anything else (`connected`, `error`, `reconnecting`, ...): kept for the record only.
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
