import Foundation
import SIMPCore

/// The user's contacts, blocks and settings: each call is one request and its answer.
extension SIMPClient {
    /// The contacts, the requests either way, and the users blocked.
    public func contacts() async throws(ClientError) -> ContactList {
        try await contactRequest(.list, "")
    }

    /// Asks `user` to be a contact: they get `contactRequest` (unless they blocked this user:
    /// then nothing tells either side). Accepts at once if `user` had asked.
    @discardableResult
    public func addContact(_ user: String) async throws(ClientError) -> ContactList {
        try await contactRequest(.add, user)
    }

    /// Accepts `user`'s request: `user` gets `contactAccepted`.
    @discardableResult
    public func acceptContact(_ user: String) async throws(ClientError) -> ContactList {
        try await contactRequest(.accept, user)
    }

    /// Declines `user`'s request; `user` is not told, and may ask again.
    @discardableResult
    public func declineContact(_ user: String) async throws(ClientError) -> ContactList {
        try await contactRequest(.decline, user)
    }

    /// Ends the contact with `user` (or withdraws a request to them), on both sides.
    @discardableResult
    public func removeContact(_ user: String) async throws(ClientError) -> ContactList {
        try await contactRequest(.remove, user)
    }

    /// Nothing `user` sends reaches this user from now on; `user` is not told which (see
    /// docs/SECURITY.md): their messages fail as they would from a non-contact.
    @discardableResult
    public func block(_ user: String) async throws(ClientError) -> ContactList {
        try await contactRequest(.block, user)
    }

    @discardableResult
    public func unblock(_ user: String) async throws(ClientError) -> ContactList {
        try await contactRequest(.unblock, user)
    }

    /// Whether each contact and member of the user's groups is online, and when it was last seen.
    public func presence() async throws(ClientError) -> [PresenceInfo] {
        let answer = try await ask(.presence(Simp_PresenceRequest()), "a presence request") { body in
            if case .presenceAnswer(let answer)? = body { answer } else { nil }
        }
        return answer.users.map { PresenceInfo(user: $0.user, state: PresenceInfo.State(rawValue: $0.state) ?? .hidden, lastSeen: Date.ifSet(millis: $0.lastSeen)) }
    }

    /// The user's settings.
    public func settings() async throws(ClientError) -> UserSettings {
        UserSettings(try await changeSettings([:]))
    }

    /// Changes one setting; the settings after it.
    @discardableResult
    public func set(_ change: SettingChange) async throws(ClientError) -> UserSettings {
        UserSettings(try await changeSettings([change.setting: change.value]))
    }

    /// Tells the senders of these messages (and this user's other devices) that the user read
    /// them, unless the user turned read receipts off; a group message's sender hears which
    /// member read it. Only what the client confirmed counts (a message is never read before it
    /// is delivered); notices, group changes and messages handed over early and never numbered
    /// (`seq` 0) are left out. Up to 256 at a time.
    /// With `confirmWhenShown`, they are confirmed first (their senders hear **delivered**),
    /// read receipts on or off; a read mark then waits until every message before it was
    /// shown (confirmation is cumulative, and the server tells only what was confirmed), and
    /// this returns without waiting for the server. With `endToEnd`, a one-to-one conversation's
    /// marks go sealed (docs/E2EE.md, Part 7; `tellReads`).
    public func markRead(_ messages: [IncomingMessage]) async throws(ClientError) {
        let reader = try? await loop.submit { [self] in engine.credentials?.user }.get()
        let marks = messages.compactMap { $0.readMark(reader: reader) }
        if configuration.confirmWhenShown {
            return showed(messages.filter { $0.kind == .message }.map(\.seq), marks: marks)
        }
        try await tellReads(marks)
    }

    /// The settings request as the wire says it: names and values (`UserSetting`).
    func changeSettings(_ changes: [UserSetting: String]) async throws(ClientError) -> [UserSetting: String] {
        var request = Simp_SettingsRequest()
        request.set = changes.map { setting, value in
            var item = Simp_Setting()
            item.name = setting.rawValue
            item.value = value
            return item
        }
        let answer = try await ask(.settingsRequest(request), "a settings request") { body in
            if case .settingsAnswer(let answer)? = body { answer } else { nil }
        }
        var settings: [UserSetting: String] = [:]
        for item in answer.settings {
            if let setting = UserSetting(rawValue: item.name) { settings[setting] = item.value }
        }
        return settings
    }

    private func contactRequest(_ action: Simp_ContactRequest.Action, _ user: String) async throws(ClientError) -> ContactList {
        if action != .list, !UserName.isValid(user) {
            throw ClientError("not a valid user name: \(user)", code: .badRequest)
        }
        var request = Simp_ContactRequest()
        request.action = action
        request.user = user
        let answer = try await ask(.contactRequest(request), "a contact request") { body in
            if case .contactAnswer(let answer)? = body { answer } else { nil }
        }
        return ContactList(answer)
    }
}

/// The user's contacts and blocks, as the server keeps them.
public struct ContactList: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Both agreed.
        case contact
        /// The user asked them; they have not answered.
        case sent
        /// They asked the user (`acceptContact`, `declineContact`).
        case received
    }

    /// By name.
    public var contacts: [(name: String, state: State)]
    /// By name.
    public var blocked: [String]

    init(_ answer: Simp_ContactAnswer) {
        contacts = answer.contacts.compactMap { contact in State(rawValue: contact.state).map { (contact.name, $0) } }
        blocked = answer.blocked
    }

    public func state(of user: String) -> State? {
        contacts.first { $0.name == user }?.state
    }

    public static func == (a: ContactList, b: ContactList) -> Bool {
        a.blocked == b.blocked && a.contacts.elementsEqual(b.contacts) { $0 == $1 }
    }
}

/// The settings a user keeps on the server (`SIMPClient.settings()`); each with the value of a
/// user who never set it.
public struct UserSettings: Sendable, Equatable {
    /// Only contacts' messages are stored for the user; others fail with `.notAContact`.
    public var contactsOnly = false
    /// The user's reads are told to senders, and the user is told of others' reads.
    public var readReceipts = true
    /// Others see whether the user is online and when it was last seen.
    public var lastSeen = true
    /// Whose adds put the user in a group at once; anyone else's is an invitation.
    public var groupAdds = GroupAddPolicy.contacts

    public init(contactsOnly: Bool = false, readReceipts: Bool = true, lastSeen: Bool = true, groupAdds: GroupAddPolicy = .contacts) {
        self.contactsOnly = contactsOnly
        self.readReceipts = readReceipts
        self.lastSeen = lastSeen
        self.groupAdds = groupAdds
    }

    /// The settings as the server answered them ("on" or "off", a policy's name).
    init(_ values: [UserSetting: String]) {
        func flag(_ setting: UserSetting) -> Bool { (values[setting] ?? setting.defaultValue) == "on" }
        contactsOnly = flag(.contactsOnly)
        readReceipts = flag(.readReceipts)
        lastSeen = flag(.lastSeen)
        groupAdds = values[.groupAdds].flatMap(GroupAddPolicy.init(rawValue:)) ?? .contacts
    }
}

/// Who may put the user in a group without asking (`UserSettings.groupAdds`).
public enum GroupAddPolicy: String, Sendable, CaseIterable {
    /// The user's contacts (the default).
    case contacts
    case everyone
    case nobody
}

/// One setting's new value (`SIMPClient.set(_:)`).
public enum SettingChange: Sendable, Equatable {
    case contactsOnly(Bool)
    case readReceipts(Bool)
    case lastSeen(Bool)
    case groupAdds(GroupAddPolicy)

    /// The setting as the wire names it.
    var setting: UserSetting {
        switch self {
        case .contactsOnly: .contactsOnly
        case .readReceipts: .readReceipts
        case .lastSeen: .lastSeen
        case .groupAdds: .groupAdds
        }
    }

    /// The value as the wire says it.
    var value: String {
        switch self {
        case .contactsOnly(let on), .readReceipts(let on), .lastSeen(let on): on ? "on" : "off"
        case .groupAdds(let policy): policy.rawValue
        }
    }
}
