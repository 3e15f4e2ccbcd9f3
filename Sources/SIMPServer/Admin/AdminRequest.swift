import SIMPCore

/// What an administrator asks every node over the admin channel (`Keys.adminChannel`), as
/// one line of text: `disconnect USER` or `disconnect USER SESSION`. A user name has no
/// space (`UserName`), so the words need no quoting.
public enum AdminRequest: Equatable, Sendable {
    /// Close the user's session (only the one with this id, when given), and tell its client
    /// not to reconnect.
    case disconnect(user: String, session: UInt64?)

    public init?(_ text: String) {
        let words = text.split(separator: " ").map(String.init)
        guard words.first == "disconnect", (2...3).contains(words.count), UserName.isValid(words[1]) else { return nil }
        if words.count == 3 {
            guard let session = UInt64(words[2]) else { return nil }
            self = .disconnect(user: words[1], session: session)
        } else {
            self = .disconnect(user: words[1], session: nil)
        }
    }

    public var text: String {
        switch self {
        case .disconnect(let user, let session?): return "disconnect \(user) \(session)"
        case .disconnect(let user, nil): return "disconnect \(user)"
        }
    }
}
