import SIMPClient
import Foundation
import SIMPCore

/// One line of `simp` REPL input, parsed. Pure, so it is tested without a server.
public enum REPLCommand: Equatable, Sendable {
    case send(to: String, text: String)
    /// `/to USER` sets the conversation plain lines go to; `/to` alone clears it.
    case converse(with: String?)
    case image(to: String, url: String)
    case history(peer: String, limit: Int)
    case status
    case devices
    case revokeDevice(name: String)
    case group(GroupCommand)
    case groups
    case help
    case logout
    case quit
    case empty

    /// `/group ...`: a membership change or a look at one group.
    public enum GroupCommand: Equatable, Sendable {
        case create(name: String, members: [String])
        case add(name: String, users: [String])
        case remove(name: String, users: [String])
        case admin(name: String, users: [String])
        case leave(name: String)
        case members(name: String)
    }

    public struct ParseError: Error, Equatable, Sendable {
        public let message: String
        public init(message: String) { self.message = message }
    }

    public static let usage = """
    messages:
      (USER may be #GROUP, a group)
      /to USER              talk to USER: plain lines are sent there (/to alone ends it)
      /send USER TEXT...    send a text message
      /image USER URL       send an image by URL
    groups:
      /groups               the groups you are in
      /group create NAME [USER...]   a new group you own, with these members
      /group add NAME USER...        add members (owner or admin)
      /group remove NAME USER...     remove members (owner or admin)
      /group admin NAME USER...      make members admins (owner)
      /group leave NAME     leave the group
      /group members NAME   its members and their roles
    history:
      /history USER [N]     show the last N messages with USER (default 20, at most 1000)
    session:
      /status               server, TLS, user, messages pending and received in this run
      /devices              your devices: online, last seen; * marks this one
      /device revoke NAME   end one of your devices: its session closes, its login stops working
      /help                 this list
      /logout               revoke this login on the server and leave
      /quit                 leave (after waiting for outstanding receipts)
    """

    /// `conversation`: where a plain line (not a command) goes; without one it is refused.
    public static func parse(_ line: String, conversation: String? = nil) throws(ParseError) -> REPLCommand {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return .empty }
        guard trimmed.hasPrefix("/") else {
            guard let conversation else {
                throw ParseError(message: "lines are commands; to send text use /send USER TEXT, or /to USER first (try /help)")
            }
            return .send(to: conversation, text: trimmed)
        }
        let parts = trimmed.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true).map(String.init)
        switch parts[0] {
        case "/send":
            guard parts.count == 3 else { throw ParseError(message: "usage: /send USER TEXT...") }
            return .send(to: parts[1], text: parts[2])
        case "/to":
            guard parts.count <= 2 else { throw ParseError(message: "usage: /to USER, or /to alone to end the conversation") }
            guard parts.count == 2 else { return .converse(with: nil) }
            guard UserName.isValid(parts[1]) || GroupName.addressed(by: parts[1]) != nil else {
                throw ParseError(message: "not a user name or #group: \(parts[1])")
            }
            return .converse(with: parts[1])
        case "/image":
            guard parts.count == 3, !parts[2].contains(" ") else { throw ParseError(message: "usage: /image USER URL") }
            return .image(to: parts[1], url: parts[2])
        case "/history":
            guard parts.count >= 2 else { throw ParseError(message: "usage: /history USER [N]") }
            guard parts.count == 3 else { return .history(peer: parts[1], limit: 20) }
            guard let n = Int(parts[2]), (1...1000).contains(n) else {
                throw ParseError(message: "N must be a number from 1 to 1000")
            }
            return .history(peer: parts[1], limit: n)
        case "/status": return .status
        case "/devices":
            guard parts.count == 1 else { throw ParseError(message: "usage: /devices") }
            return .devices
        case "/device":
            guard parts.count == 3, parts[1] == "revoke", !parts[2].contains(" ") else {
                throw ParseError(message: "usage: /device revoke NAME")
            }
            return .revokeDevice(name: parts[2])
        case "/groups":
            guard parts.count == 1 else { throw ParseError(message: "usage: /groups") }
            return .groups
        case "/group": return .group(try parseGroup(trimmed))
        case "/help": return .help
        case "/quit": return .quit
        case "/logout": return .logout
        default:
            throw ParseError(message: "unknown command \(parts[0]) (try /help)")
        }
    }

    static let groupUsage = "usage: /group create|add|remove|admin NAME USER..., /group leave|members NAME"

    private static func parseGroup(_ line: String) throws(ParseError) -> GroupCommand {
        let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard words.count >= 3 else { throw ParseError(message: groupUsage) }
        let name = words[2].first == GroupName.marker ? String(words[2].dropFirst()) : words[2]
        guard GroupName.isValid(name) else { throw ParseError(message: "not a group name: \(words[2])") }
        let users = Array(words.dropFirst(3))
        if let bad = users.first(where: { !UserName.isValid($0) }) { throw ParseError(message: "not a user name: \(bad)") }
        switch (words[1], users.isEmpty) {
        case ("create", _): return .create(name: name, members: users)
        case ("add", false): return .add(name: name, users: users)
        case ("remove", false): return .remove(name: name, users: users)
        case ("admin", false): return .admin(name: name, users: users)
        case ("leave", true): return .leave(name: name)
        case ("members", true): return .members(name: name)
        default: throw ParseError(message: groupUsage)
        }
    }
}

