import SIMPCore

/// What an administrator (or a user, for its own logins) asks every node over the admin
/// channel (`Keys.adminChannel`), as one line of text: `disconnect USER`, `disconnect USER
/// SESSION`, `end-device USER DEVICE BY AT` or `end-logins USER WHY NODE CONNECTION`. Names have
/// no space (`UserName`, `DeviceName`, node ids are user names), so the words need no quoting.
public enum AdminRequest: Equatable, Sendable {
    /// Close the user's session (only the one with this id, when given), and tell its client
    /// not to reconnect.
    case disconnect(user: String, session: UInt64?)
    /// Close the connections of the user's device, which was revoked from the user's device `by`
    /// at `at` (ms since the epoch, the time written to Redis): only those whose token was
    /// issued at or before it, so a login made after the revocation outlives a late
    /// announcement. nil: `end-device USER DEVICE BY`, from a node of an earlier version, which
    /// closes every connection of the device (as that node does), so a cluster being upgraded
    /// one node at a time still ends the device everywhere.
    case endDevice(user: String, device: String, by: String, at: Int64?)
    /// Close every connection logged in as the user, except the one that asked (`connection`
    /// on node `node`): its password changed, or it ended every login.
    case endLogins(user: String, why: LoginEnd, node: String, connection: UInt64)

    /// Why a user's logins were ended, as a word in the request and a reason in the error.
    public enum LoginEnd: String, Sendable {
        case password = "password"
        case logout = "logout"

        var reason: String {
            switch self {
            case .password: "the password was changed on another connection; log in with the new one"
            case .logout: "every login of this user was ended from another connection; log in again"
            }
        }
    }

    public init?(_ text: String) {
        let words = text.split(separator: " ").map(String.init)
        if words.first == "end-device" {
            guard (4...5).contains(words.count), UserName.isValid(words[1]), DeviceName.isValid(words[2]),
                  DeviceName.isValid(words[3]) else { return nil }
            guard words.count == 5 else {
                self = .endDevice(user: words[1], device: words[2], by: words[3], at: nil)
                return
            }
            guard let at = Self.millis(words[4]) else { return nil }
            self = .endDevice(user: words[1], device: words[2], by: words[3], at: at)
            return
        }
        if words.first == "end-logins" {
            guard words.count == 5, UserName.isValid(words[1]), let why = LoginEnd(rawValue: words[2]),
                  UserName.isValid(words[3]), let connection = UInt64(words[4]) else { return nil }
            self = .endLogins(user: words[1], why: why, node: words[3], connection: connection)
            return
        }
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
        case .endDevice(let user, let device, let by, let at?): return "end-device \(user) \(device) \(by) \(at)"
        case .endDevice(let user, let device, let by, nil): return "end-device \(user) \(device) \(by)"
        case .endLogins(let user, let why, let node, let connection): return "end-logins \(user) \(why.rawValue) \(node) \(connection)"
        }
    }

    /// A time in ms as a node writes it: decimal digits only (no sign), within Int64.
    private static func millis(_ word: String) -> Int64? {
        guard word.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(word)
    }
}
