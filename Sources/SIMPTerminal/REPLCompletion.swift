import SIMPClient
import SIMPCore

/// Tab completion for the REPL: the command in the first word, a user name or #group in the
/// second (after /to, /send, /image, /history, /block, /unblock); after /group its action, the
/// group, then users; after /contact its action, then a user; after /set a setting, then on|off.
/// Pure: the line editor asks with the text before the cursor.
public enum REPLCompletion {
    public static let commands = ["/to", "/send", "/image", "/history", "/status", "/devices", "/device", "/groups", "/group",
                                  "/contacts", "/contact", "/block", "/unblock", "/blocked", "/set", "/read", "/presence", "/verify", "/help", "/logout", "/quit"]
    static let commandsTakingUser: Set<String> = ["/to", "/send", "/image", "/history", "/block", "/unblock", "/read", "/verify"]
    static let groupActions = ["create", "add", "remove", "admin", "leave", "members", "accept", "decline"]
    static let contactActions = ["add", "accept", "decline", "remove"]

    public struct Result: Sendable, Equatable {
        /// Text to insert at the cursor (the common part of all candidates, past the typed part,
        /// plus a space when there is exactly one candidate).
        public var insert: String
        /// Every candidate when there is more than one, to show the user; else empty.
        public var alternatives: [String]

        public init(insert: String, alternatives: [String]) {
            self.insert = insert
            self.alternatives = alternatives
        }
    }

    /// What Tab does with `before` (the line up to the cursor), given the known user names.
    public static func complete(_ before: String, users: [String]) -> Result {
        let words = before.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        let endsWord = before.isEmpty || before.hasSuffix(" ")
        let index = endsWord ? words.count : words.count - 1
        let typed = endsWord ? "" : words[words.count - 1]
        let pool: [String]
        switch index {
        case 0: pool = commands
        case 1 where commandsTakingUser.contains(words[0]): pool = users
        case 1 where words[0] == "/group": pool = groupActions
        case 2 where words[0] == "/group": pool = users.filter { $0.first == GroupName.marker }
        case 3... where words[0] == "/group": pool = users.filter { $0.first != GroupName.marker }
        case 1 where words[0] == "/contact": pool = contactActions
        case 2 where words[0] == "/contact": pool = users.filter { $0.first != GroupName.marker }
        case 1 where words[0] == "/set": pool = UserSetting.allCases.map(\.rawValue)
        case 2 where words[0] == "/set": pool = UserSetting(rawValue: words[1]).map(\.values) ?? []
        default: pool = []
        }
        let candidates = Array(Set(pool.filter { $0.hasPrefix(typed) })).sorted()
        guard let first = candidates.first else { return Result(insert: "", alternatives: []) }
        if candidates.count == 1 { return Result(insert: String(first.dropFirst(typed.count)) + " ", alternatives: []) }
        let common = candidates.dropFirst().reduce(first) { commonPrefix($0, $1) }
        return Result(insert: String(common.dropFirst(typed.count)), alternatives: candidates)
    }

    static func commonPrefix(_ a: String, _ b: String) -> String {
        String(zip(a, b).prefix { $0 == $1 }.map(\.0))
    }
}

/// The user names (and #groups) Tab offers: the own user, senders of messages received and
/// recipients of messages sent in this run, groups seen, and names in earlier lines.
public struct KnownUsers: Sendable {
    public private(set) var names: Set<String> = []

    public init() {}

    public mutating func add(_ name: String) {
        // Only names that could be real: a network-provided name never reaches the line editor raw.
        guard UserName.isValid(name) || GroupName.addressed(by: name) != nil else { return }
        names.insert(name)
    }

    /// The user a typed line named (`/send bob ...` -> bob), if it names one.
    public mutating func learn(fromLine line: String) {
        switch try? REPLCommand.parse(line) {
        case .send(let to, _), .image(let to, _): add(to)
        case .history(let peer, _), .converse(let peer?): add(peer)
        case .group(let command): learn(command)
        default: break
        }
    }

    private mutating func learn(_ command: REPLCommand.GroupCommand) {
        switch command {
        case .create(let name, let users), .add(let name, let users), .remove(let name, let users), .admin(let name, let users):
            add(GroupName.address(name))
            users.forEach { add($0) }
        case .leave(let name), .members(let name), .accept(let name), .decline(let name):
            add(GroupName.address(name))
        }
    }

    public var sorted: [String] { names.sorted() }
}
