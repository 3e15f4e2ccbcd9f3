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

    /// Tells `peer` (its devices that are connected) that the user is typing to it: one TYPING
    /// datagram, never stored nor resent, dropped when not connected. Send it again every few
    /// seconds while the user types.
    public func sendTyping(to peer: String) throws(ClientError) {
        guard UserName.isValid(peer) else { throw ClientError("not a valid user name: \(peer)", code: .badRequest) }
        loop.execute { [self] in typing(to: peer) }
    }

    /// Whether each contact and member of the user's groups is online, and when it was last seen.
    public func presence() async throws(ClientError) -> [PresenceInfo] {
        let answer = try await ask(.presence(Simp_PresenceRequest()), "a presence request") { body in
            if case .presenceAnswer(let answer)? = body { answer } else { nil }
        }
        return answer.users.map { PresenceInfo(user: $0.user, state: PresenceInfo.State(rawValue: $0.state) ?? .hidden, lastSeen: $0.lastSeen) }
    }

    /// The user's settings, each with its value (`UserSetting.values`).
    public func settings() async throws(ClientError) -> [UserSetting: String] {
        try await changeSettings([:])
    }

    /// Sets `setting`; the settings after it.
    @discardableResult
    public func set(_ setting: UserSetting, _ on: Bool) async throws(ClientError) -> [UserSetting: String] {
        try await changeSettings([setting: on ? "on" : "off"])
    }

    /// Sets `setting` to `value`, one of `setting.values` (`group-adds`: contacts, everyone,
    /// nobody); the settings after it.
    @discardableResult
    public func set(_ setting: UserSetting, to value: String) async throws(ClientError) -> [UserSetting: String] {
        try await changeSettings([setting: value])
    }

    /// Tells the senders of these messages (and this user's other devices) that the user read
    /// them, unless the user turned read receipts off. Only what the client confirmed counts
    /// (a message is never read before it is delivered); group messages, notices and messages
    /// handed over early and never numbered (`seq` 0) are left out. Up to 256 at a time.
    public func markRead(_ messages: [IncomingMessage]) async throws(ClientError) {
        let marks = messages.filter { $0.kind == .message && $0.group == nil && $0.seq > 0 && $0.fromDevice.isEmpty }.map { message in
            var mark = Simp_ReadMark()
            mark.fromUser = message.from
            mark.messageID = message.markID
            mark.seq = message.seq
            return mark
        }
        for start in stride(from: 0, to: marks.count, by: 256) {
            var request = Simp_ReadRequest()
            request.reads = Array(marks[start..<min(start + 256, marks.count)])
            _ = try await ask(.markRead(request), "a read request") { body in
                if case .ok? = body { () } else { nil }
            }
        }
    }

    private func changeSettings(_ changes: [UserSetting: String]) async throws(ClientError) -> [UserSetting: String] {
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
