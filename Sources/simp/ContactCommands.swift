import SIMPClient
import SIMPCore
import SIMPTerminal

/// What `/contact ...`, `/block ...`, `/set ...` (and `simp contact ...`) do, and what they print.
extension REPLCommand.ContactCommand {
    func run(on client: SIMPClient) async throws(ClientError) -> RequestResult {
        switch self {
        case .add(let user):
            let list = try await client.addContact(user)
            return Self.contacts(list, list.state(of: user) == .contact ? "\(user) is your contact" : "asked \(user) to be your contact")
        case .accept(let user): return Self.contacts(try await client.acceptContact(user), "\(user) is your contact")
        case .decline(let user): return Self.contacts(try await client.declineContact(user), "declined \(user)'s request")
        case .remove(let user): return Self.contacts(try await client.removeContact(user), "\(user) is no longer your contact")
        case .list: return Self.contacts(try await client.contacts(), nil)
        case .block(let user): return Self.blocked(try await client.block(user), "blocked \(user)")
        case .unblock(let user): return Self.blocked(try await client.unblock(user), "unblocked \(user)")
        case .blocked: return Self.blocked(try await client.contacts(), nil)
        case .set(let setting, let value): return Self.settings(try await client.set(try Self.change(setting, value)))
        case .settings: return Self.settings(try await client.settings())
        }
    }

    /// `contacts: bob, carol (asked you), dave (you asked)`, after what was done.
    private static func contacts(_ list: ContactList, _ done: String?) -> RequestResult {
        let names = list.contacts.map { contact in
            switch contact.state {
            case .contact: contact.name
            case .received: "\(contact.name) (asked you)"
            case .sent: "\(contact.name) (you asked)"
            }
        }
        let line = names.isEmpty ? "no contacts" : "contacts: " + names.joined(separator: ", ")
        return RequestResult(human: done.map { "\($0); \(line)" } ?? line,
                             json: ["event": "contacts", "contacts": list.contacts.map { ["name": $0.name, "state": $0.state.rawValue] },
                                    "blocked": list.blocked])
    }

    private static func blocked(_ list: ContactList, _ done: String?) -> RequestResult {
        let line = list.blocked.isEmpty ? "you block nobody" : "blocked: " + list.blocked.joined(separator: ", ")
        return RequestResult(human: done.map { "\($0); \(line)" } ?? line,
                             json: ["event": "blocked", "blocked": list.blocked])
    }

    /// A setting as the command line names it ("on" or "off", a policy's name), as the library takes it.
    private static func change(_ setting: UserSetting, _ value: String) throws(ClientError) -> SettingChange {
        if let problem = UserSetting.problem(name: setting.rawValue, value: value) { throw ClientError(problem, code: .badRequest) }
        return switch setting {
        case .contactsOnly: .contactsOnly(value == "on")
        case .readReceipts: .readReceipts(value == "on")
        case .lastSeen: .lastSeen(value == "on")
        case .groupAdds: .groupAdds(GroupAddPolicy(rawValue: value) ?? .contacts)
        }
    }

    private static func settings(_ settings: UserSettings) -> RequestResult {
        func onOff(_ on: Bool) -> String { on ? "on" : "off" }
        let ordered = UserSetting.allCases.map { setting -> (String, String) in
            let value = switch setting {
            case .contactsOnly: onOff(settings.contactsOnly)
            case .readReceipts: onOff(settings.readReceipts)
            case .lastSeen: onOff(settings.lastSeen)
            case .groupAdds: settings.groupAdds.rawValue
            }
            return (setting.rawValue, value)
        }
        return RequestResult(human: ordered.map { "\($0.0) \($0.1)" }.joined(separator: ", "),
                             json: ["event": "settings", "settings": Dictionary(uniqueKeysWithValues: ordered)])
    }
}
