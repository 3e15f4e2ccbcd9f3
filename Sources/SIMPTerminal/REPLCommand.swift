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
    /// `/device link`: this (new) device asks the user's other devices for the identity and
    /// shows the code to approve there (docs/E2EE.md, "Linking a device").
    case linkDevice
    /// `/device links`: the user's new devices asking to be linked, with their codes.
    case deviceLinks
    /// `/device approve NAME CODE`: link NAME, whose screen shows CODE.
    case approveLink(name: String, code: String)
    case group(GroupCommand)
    case groups
    case contact(ContactCommand)
    /// `/read USER` or `/read #GROUP`: mark every message shown from USER (one to one), or in
    /// GROUP, read.
    case read(peer: String)
    /// `/presence`: contacts and group members, online or when last seen.
    case presence
    /// `/verify USER`: the safety number with USER; `/verify USER NUMBER`: mark USER verified,
    /// NUMBER being the safety number the two compared.
    case verify(user: String, number: String?)
    case help
    /// `/logout`, or `/logout --all`: every login of the user ends, on all its devices.
    case logout(everywhere: Bool)
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
        /// `/group accept NAME`: join the group the user was invited to.
        case accept(name: String)
        /// `/group decline NAME`: turn the invitation down.
        case decline(name: String)
    }

    /// `/contact ...`, `/contacts`, `/block`, `/unblock`, `/blocked`, `/set`.
    public enum ContactCommand: Equatable, Sendable {
        case add(String)
        case accept(String)
        case decline(String)
        case remove(String)
        case list
        case block(String)
        case unblock(String)
        case blocked
        /// `/set NAME VALUE`: on|off, or for group-adds contacts|everyone|nobody.
        case set(UserSetting, String)
        /// `/set` alone: the settings and their values.
        case settings
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
      /group accept NAME    join a group you were invited to (/group decline NAME: turn it down)
      /set group-adds contacts|everyone|nobody   who may add you without asking (default contacts)
    contacts:
      /contacts             your contacts, and requests either way
      /contact add USER     ask USER to be a contact (they see the request)
      /contact accept USER  accept USER's request (or decline it: /contact decline USER)
      /contact remove USER  end the contact, or withdraw your request
      /block USER           nothing USER sends reaches you (/unblock USER; /blocked lists them)
      /set contacts-only on|off   take messages from contacts only (/set alone: your settings)
      /presence             your contacts and group members: online, or when last seen
      /verify USER [NUMBER] the safety number you and USER compare; with it, mark USER verified
      /set last-seen on|off       let them see yours (default on)
      /read USER|#GROUP     mark what was shown from USER or in #GROUP read (in a /to conversation it is at once)
      /set read-receipts on|off   tell senders what you read, and hear what they read (default on)
    history:
      /history USER [N]     show the last N messages with USER (default 20, at most 1000)
    session:
      /status               server, TLS, user, messages pending and received in this run
      /devices              your devices: online, last seen; * marks this one
      /device revoke NAME   end one of your devices: its session closes, its login stops working
      /device link          on a new device: ask your other devices for your identity; shows a code
      /device links         on a device with your identity: new devices asking, with their codes
      /device approve NAME CODE   link NAME once its screen shows the same CODE
      /help                 this list
      /logout               revoke this login on the server and leave
      /logout --all         end every login of yours, on all your devices, and leave
                            (to change your password, which does the same: simp password)
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
            let usage = "usage: /device revoke NAME | /device link | /device links | /device approve NAME CODE"
            let words = trimmed.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            switch (words.count > 1 ? words[1] : "", words.count) {
            case ("link", 2): return .linkDevice
            case ("links", 2): return .deviceLinks
            case ("revoke", 3): return .revokeDevice(name: words[2])
            case ("approve", 4...):
                let code = words.dropFirst(3).joined()
                guard DeviceName.isValid(words[2]) else { throw ParseError(message: "not a device name: \(words[2])") }
                guard code.count == DeviceLink.codeDigits, code.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                    throw ParseError(message: "a link code is \(DeviceLink.codeDigits) digits")
                }
                return .approveLink(name: words[2], code: code)
            default: throw ParseError(message: usage)
            }
        case "/groups":
            guard parts.count == 1 else { throw ParseError(message: "usage: /groups") }
            return .groups
        case "/group": return .group(try parseGroup(trimmed))
        case "/presence":
            guard parts.count == 1 else { throw ParseError(message: "usage: /presence") }
            return .presence
        case "/verify":
            guard parts.count >= 2 else { throw ParseError(message: "usage: /verify USER [SAFETY-NUMBER]") }
            guard UserName.isValid(parts[1]) else { throw ParseError(message: "not a user name: \(parts[1])") }
            let number = parts.dropFirst(2).joined().filter { !$0.isWhitespace }
            guard number.isEmpty || (number.count == 60 && number.allSatisfy(\.isASCII) && number.allSatisfy(\.isNumber)) else {
                throw ParseError(message: "a safety number is 60 digits (spaces allowed)")
            }
            return .verify(user: parts[1], number: number.isEmpty ? nil : number)
        case "/read":
            guard parts.count == 2 else { throw ParseError(message: "usage: /read USER|#GROUP") }
            guard UserName.isValid(parts[1]) || GroupName.addressed(by: parts[1]) != nil else {
                throw ParseError(message: "not a user or group name: \(parts[1])")
            }
            return .read(peer: parts[1])
        case "/contact", "/contacts", "/block", "/unblock", "/blocked", "/set": return .contact(try parseContact(trimmed))
        case "/help": return .help
        case "/quit": return .quit
        case "/password":
            // The chat line is echoed and kept in the REPL's history: no place for a password.
            throw ParseError(message: "change your password with simp password (it asks without echo); every other login of yours then ends")
        case "/logout":
            guard parts.count == 1 || (parts.count == 2 && parts[1] == "--all") else { throw ParseError(message: "usage: /logout [--all]") }
            return .logout(everywhere: parts.count == 2)
        default:
            throw ParseError(message: "unknown command \(parts[0]) (try /help)")
        }
    }

    public static let contactUsage = "usage: /contact add|accept|decline|remove USER, /contacts, /block USER, /unblock USER, /blocked, /set NAME VALUE"

    private static func parseContact(_ line: String) throws(ParseError) -> ContactCommand {
        let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        if words[0] == "/set" { return try parseSet(Array(words.dropFirst())) }
        let user = words.count > 1 ? words[words.count - 1] : ""
        if words.count > 1, !UserName.isValid(user) { throw ParseError(message: "not a user name: \(user)") }
        switch (words[0], words.count > 2 ? words[1] : nil, words.count) {
        case ("/contacts", nil, 1): return .list
        case ("/blocked", nil, 1): return .blocked
        case ("/block", nil, 2): return .block(user)
        case ("/unblock", nil, 2): return .unblock(user)
        case ("/contact", "add"?, 3): return .add(user)
        case ("/contact", "accept"?, 3): return .accept(user)
        case ("/contact", "decline"?, 3): return .decline(user)
        case ("/contact", "remove"?, 3): return .remove(user)
        default: throw ParseError(message: contactUsage)
        }
    }

    private static func parseSet(_ words: [String]) throws(ParseError) -> ContactCommand {
        if words.isEmpty { return .settings }
        guard words.count == 2 else { throw ParseError(message: "usage: /set NAME VALUE, or /set alone for your settings") }
        if let problem = UserSetting.problem(name: words[0], value: words[1]) { throw ParseError(message: problem) }
        return .set(UserSetting(rawValue: words[0])!, words[1])
    }

    static let groupUsage = "usage: /group create|add|remove|admin NAME USER..., /group leave|members|accept|decline NAME"

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
        case ("accept", true): return .accept(name: name)
        case ("decline", true): return .decline(name: name)
        default: throw ParseError(message: groupUsage)
        }
    }
}

