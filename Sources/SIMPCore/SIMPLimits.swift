/// Names that the server accepts as user names: 1-32 of [a-z0-9_.-], starting with a letter or digit.
public enum UserName {
    public static func isValid(_ name: String) -> Bool {
        guard (1...32).contains(name.utf8.count), let first = name.utf8.first else { return false }
        func allowed(_ c: UInt8) -> Bool {
            (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x5f || c == 0x2e || c == 0x2d
        }
        return name.utf8.allSatisfy(allowed) && first != 0x2e && first != 0x2d && first != 0x5f
    }
}

/// Names of groups: the rules of user names. On the wire a group is addressed as `#NAME`
/// (`Message.toUser`), which no user name can be.
public enum GroupName {
    public static let marker: Character = "#"

    public static func isValid(_ name: String) -> Bool { UserName.isValid(name) }

    /// The group a message's `toUser` addresses (`#NAME`), or nil when it addresses a user.
    public static func addressed(by to: String) -> String? {
        guard to.first == marker else { return nil }
        let name = String(to.dropFirst())
        return isValid(name) ? name : nil
    }

    public static func address(_ name: String) -> String { "#\(name)" }
}

/// Which of a user's devices a session is: 1-16 of a-z, 0-9, '.', '_' and '-', not starting
/// with a symbol. Short, because the copy of a message kept for its sender's other devices
/// carries it (`Message.fromDevice`) within the datagram budget.
public enum DeviceName {
    public static let maxBytes = 16
    /// The device of a client that names none (as every client did before devices).
    public static let unnamed = "default"

    public static func isValid(_ name: String) -> Bool {
        name.utf8.count <= maxBytes && UserName.isValid(name)
    }
}
