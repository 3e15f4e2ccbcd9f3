import SIMPCore

/// What an administrator (or a user, for its own devices) asks every node over the admin
/// channel (`Keys.adminChannel`), as one line of text: `disconnect USER`, `disconnect USER
/// SESSION` or `end-device USER DEVICE BY`. Names have no space (`UserName`, `DeviceName`),
/// so the words need no quoting.
public enum AdminRequest: Equatable, Sendable {
    /// Close the user's session (only the one with this id, when given), and tell its client
    /// not to reconnect.
    case disconnect(user: String, session: UInt64?)
    /// Close the session of the user's device, which was revoked from the user's device `by`.
    case endDevice(user: String, device: String, by: String)

    public init?(_ text: String) {
        let words = text.split(separator: " ").map(String.init)
        if words.first == "end-device" {
            guard words.count == 4, UserName.isValid(words[1]), DeviceName.isValid(words[2]), DeviceName.isValid(words[3]) else { return nil }
            self = .endDevice(user: words[1], device: words[2], by: words[3])
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
        case .endDevice(let user, let device, let by): return "end-device \(user) \(device) \(by)"
        }
    }
}
