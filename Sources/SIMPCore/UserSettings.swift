/// The settings a user keeps on the server (`settings` request), each "on" or "off".
public enum UserSetting: String, CaseIterable, Sendable {
    /// Only contacts' messages are stored for the user; others fail with NOT_A_CONTACT.
    case contactsOnly = "contacts-only"
    /// The user's reads are told to senders, and the user is told of others' reads.
    case readReceipts = "read-receipts"
    /// Others see whether the user is online and when it was last seen.
    case lastSeen = "last-seen"

    public static let values = ["on", "off"]

    /// What a user who never set it has.
    public var defaultValue: String {
        switch self {
        case .contactsOnly: "off"
        case .readReceipts, .lastSeen: "on"
        }
    }

    /// Why `value` cannot be set for `name`; nil when it can.
    public static func problem(name: String, value: String) -> String? {
        guard UserSetting(rawValue: name) != nil else {
            return "no such setting: \(name) (there are: \(allCases.map(\.rawValue).joined(separator: ", ")))"
        }
        return values.contains(value) ? nil : "\(name) is on or off, not \(value)"
    }
}
