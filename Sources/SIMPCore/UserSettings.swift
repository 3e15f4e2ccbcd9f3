/// The settings a user keeps on the server (`settings` request).
public enum UserSetting: String, CaseIterable, Sendable {
    /// Only contacts' messages are stored for the user; others fail with NOT_A_CONTACT.
    case contactsOnly = "contacts-only"
    /// The user's reads are told to senders, and the user is told of others' reads.
    case readReceipts = "read-receipts"
    /// Others see whether the user is online and when it was last seen.
    case lastSeen = "last-seen"
    /// Who may put the user in a group without asking: `contacts` (the default), `everyone`,
    /// or `nobody`. Anyone else's add is an invitation the user accepts or declines.
    case groupAdds = "group-adds"

    /// The values it takes.
    public var values: [String] {
        switch self {
        case .contactsOnly, .readReceipts, .lastSeen: ["on", "off"]
        case .groupAdds: GroupAdds.allCases.map(\.rawValue)
        }
    }

    /// What a user who never set it has.
    public var defaultValue: String {
        switch self {
        case .contactsOnly: "off"
        case .readReceipts, .lastSeen: "on"
        case .groupAdds: GroupAdds.contacts.rawValue
        }
    }

    /// Why `value` cannot be set for `name`; nil when it can.
    public static func problem(name: String, value: String) -> String? {
        guard let setting = UserSetting(rawValue: name) else {
            return "no such setting: \(name) (there are: \(allCases.map(\.rawValue).joined(separator: ", ")))"
        }
        let values = setting.values
        return values.contains(value) ? nil : "\(name) is \(values.joined(separator: ", ")); not \(value)"
    }
}

/// The `group-adds` setting: whose adds put the user in a group at once.
public enum GroupAdds: String, CaseIterable, Sendable {
    case contacts, everyone, nobody
}
