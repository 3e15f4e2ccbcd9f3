import SIMPClient
import Foundation
import SIMPCore

/// What the REPL shows on a terminal, as lines of text: the banner, the prompt, incoming
/// messages with their time, one line per sent message with a short number (`#3`) and one
/// short line per status change, `/status`. It keeps the state those need (numbers and
/// stages, known users, counts). Pure: the terminal layer prints what it returns. Everything
/// others wrote (names, text, URLs, reasons) is escaped with TerminalText before styling.
public struct REPLScreen: Sendable {
    public struct Session: Sendable, Equatable {
        public var server: String
        public var user: String
        public var tls: Bool

        public init(server: String, user: String, tls: Bool) {
            self.server = server
            self.user = user
            self.tls = tls
        }
    }

    public let session: Session
    public let style: ANSIStyle
    private let calendar: Calendar
    public private(set) var marks = SentMarks()
    public private(set) var users = KnownUsers()
    public private(set) var receivedCount = 0
    public private(set) var connection = Connection.connected
    /// Which way the session's datagrams travel (`/status`): UDP, or inside the control
    /// connection where UDP does not work.
    public private(set) var path = DatagramPath.udp
    /// Where plain lines go (`/to USER`); nil: none, plain lines are refused.
    public private(set) var conversation: String?
    /// Messages shown and not yet marked read.
    public var reads = ReadTracker()
    /// Who was last heard typing to the user, and when.
    public private(set) var typing: [String: Date] = [:]
    /// How long `PEER is typing…` stays after the last TYPING from the peer.
    public static let typingShown: TimeInterval = 4
    /// When the user last said it is typing to each peer.
    private var typingSent: [String: Date] = [:]
    /// How often the user's typing is told: a TYPING datagram is never resent, so a few
    /// seconds apart while the user types.
    public static let typingInterval: TimeInterval = 3

    public enum Connection: String, Sendable {
        case connected, reconnecting, disconnected
    }

    public init(session: Session, style: ANSIStyle, timeZone: TimeZone = .current) {
        self.session = session
        self.style = style
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        self.calendar = calendar
        users.add(session.user)
    }

    /// The prompt for libedit (`alice> `, or `alice → bob> ` in a conversation): colour
    /// sequences between \u{1} marks, so they take no column.
    public var prompt: String {
        let name = safe(session.user) + (conversation.map { " → " + safe($0) } ?? "") + typingText + ">"
        guard style.enabled else { return name + " " }
        return "\u{1}\u{1B}[1;34m\u{1}" + name + "\u{1}\u{1B}[0m\u{1} "
    }

    /// The columns the prompt takes on the terminal.
    public var promptColumns: Int {
        safe(session.user).count + (conversation.map { 3 + safe($0).count } ?? 0) + typingText.count + 2
    }

    /// ` (bob is typing…)` while the peer of the conversation is heard typing.
    private var typingText: String {
        guard let peer = conversation, typing[peer] != nil else { return "" }
        return " (\(safe(peer)) is typing…)"
    }

    /// Whether `peer` stopped typing `typingShown` ago: the prompt loses it (true when it changes).
    public mutating func typingExpired(now: Date) -> Bool {
        let before = typingText
        typing = typing.filter { now.timeIntervalSince($0.value) < Self.typingShown }
        return typingText != before
    }

    /// The user typed `line` so far: the peer of the conversation to tell, at most every few
    /// seconds, and not for a command.
    public mutating func userTyped(_ line: String, now: Date) -> String? {
        guard let peer = conversation, UserName.isValid(peer), !line.hasPrefix("/"), !line.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        if let last = typingSent[peer], now.timeIntervalSince(last) < Self.typingInterval { return nil }
        typingSent[peer] = now
        return peer
    }

    /// The user's groups, for Tab (`#NAME`).
    public mutating func know(groups: [String]) {
        groups.forEach { users.add(GroupName.address($0)) }
    }

    /// Plain lines go to `peer` from now on (nil: to nobody); the line saying so.
    public mutating func converse(with peer: String?) -> String {
        conversation = peer
        // What was shown from the peer is in front of the user now.
        if let peer { reads.markAll(from: peer) }
        guard let peer else { return info("no conversation: plain lines are refused; /to USER starts one") }
        users.add(peer)
        return info("talking to \(safe(peer)): plain lines go there; /to alone ends it")
    }

    public func banner() -> [String] {
        [style.paint("simp", .bold) + " connected to \(safe(session.server)) as " + style.paint(safe(session.user), .bold)
            + ", " + tlsText,
         style.paint("Tab completes commands and names, Up recalls earlier lines, /help lists the commands", .dim)]
    }

    private var tlsText: String {
        session.tls ? style.paint("TLS on", .green) : style.paint("TLS off (plain TCP)", .yellow)
    }

    // MARK: sent messages

    /// The line for a message just sent, then any status change that overtook it.
    public mutating func sent(id: String, to: String, text: String) -> [String] {
        users.add(to)
        let (number, changes) = marks.register(id: id, to: to)
        let line = style.paint("→ " + safe(to) + ":", .green) + " " + safe(text) + "  " + style.paint("#\(number) …", .dim)
        return [line] + changes.map(changeLine)
    }

    func changeLine(_ change: SentMarks.Change) -> String {
        style.paint("#\(change.number)", .dim) + " " + stageText(change.stage, reason: change.reason, member: change.member)
    }

    /// Status changes of messages this run did not send (another device's, or resent from the
    /// data directory): which message (its recipient, when known, and its id's start), and
    /// which member's mark it is.
    public mutating func unregisteredChanges() -> [String] {
        marks.takeUnregistered().map { change in
            let which = change.to.map { "your message to \(safe($0)) (\(safe(String(change.id.prefix(6)))))" }
                ?? "your message \(safe(String(change.id.prefix(6))))"
            return style.paint(which, .dim) + " " + stageText(change.stage, reason: change.reason, member: change.member)
        }
    }

    private func stageText(_ stage: SentMarks.Stage, reason: String?, member: String? = nil) -> String {
        switch stage {
        case .sent: return "sent"
        case .accepted: return style.paint("✓ accepted", .green)
        case .delivered: return style.paint("✓✓ delivered" + (member.map { " to " + safe($0) } ?? ""), .green, .bold)
        case .read: return style.paint("✓✓ read" + (member.map { " by " + safe($0) } ?? ""), .blue, .bold)
        case .failed: return style.paint("✗ failed: " + safe(reason ?? "unknown reason"), .red)
        }
    }

    // MARK: events

    /// What the user is told of a device the server lists for `user` that `user`'s identity never
    /// certified (`ClientEvent.uncertifiedDevice`).
    public static func uncertifiedDeviceText(user: String, device: String) -> String {
        let user = TerminalText.escaped(user)
        return "the server lists a device \(TerminalText.escaped(device)) of \(user) that \(user)'s identity never certified: "
            + "nothing is encrypted to it (the server, or someone with access to it, added it)"
    }

    /// What the user is told of a commit of a conversation's order this device refused
    /// (`ClientEvent.commitRefused`).
    public static func commitRefusedText(conversation: String, epoch: UInt64, reason: String) -> String {
        "the server's commit for epoch \(epoch) of \(TerminalText.escaped(conversation)) was refused (\(TerminalText.escaped(reason))): "
            + "this device stays at its epoch and cannot read what was sent after it"
    }

    /// What the user is told when a peer's identity key changed (`ClientEvent.identityChanged`).
    public static func identityChangedText(_ user: String) -> String {
        "\(TerminalText.escaped(user))'s identity key changed: they made a new identity, or someone put another key in their place; "
            + "compare the safety number again (/verify \(TerminalText.escaped(user))) before you trust it"
    }

    /// The lines for one client event; `now` stamps a message that carries no time.
    public mutating func handle(_ event: ClientEvent, now: Date) -> [String] {
        switch event {
        case .connected(let user, let path):
            // The banner already said so for the first login; a reconnect is worth a line.
            self.path = path
            defer { connection = .connected }
            return connection == .connected ? [] : [style.paint("connected as \(safe(user))", .dim)]
        case .disconnected(let reason):
            connection = .disconnected
            return [style.paint("disconnected: \(safe(reason))", .yellow)]
        case .path(let path):
            self.path = path
            return [style.paint(path == .stream ? "UDP does not get through: messages now travel inside the control connection"
                                                : "UDP works: messages travel over UDP again", .dim)]
        case .ended(let reason):
            connection = .disconnected
            return [style.paint("session ended: \(safe(reason))", .yellow)]
        case .reconnecting(let attempt, let delay):
            connection = .reconnecting
            return [style.paint("reconnecting in \(delay.wholeMillis) ms (attempt \(attempt))", .yellow)]
        case .accepted(let id, let to, _):
            return marks.update(id: id, to: .accepted, recipient: to).map { [changeLine($0)] } ?? []
        case .delivered(let id, let to, _):
            return marks.update(id: id, to: .delivered, recipient: to).map { [changeLine($0)] } ?? []
        case .failed(let id, let to, let reason, _):
            return marks.update(id: id, to: .failed, reason: reason, recipient: to).map { [changeLine($0)] } ?? []
        case .typing(let from):
            typing[from] = now
            return []
        case .presence(let change):
            users.add(change.user)
            return [style.paint(change.state == .online ? "\(safe(change.user)) is online" : "\(safe(change.user)) went offline", .dim)]
        case .read(let id, _, let by):
            if by == session.user {
                reads.readElsewhere(id)
                return []
            }
            // In a group, whose read it is; one to one, the recipient's own; another device's
            // message, whoever read it.
            let member = marks.recipient(of: id).map { GroupName.addressed(by: $0) == nil ? nil : by } ?? by
            return marks.update(id: id, to: .read, member: member).map { [changeLine($0)] } ?? []
        case .message(let m):
            receivedCount += 1
            // What they were typing has come.
            typing[m.from] = nil
            reads.shown(m, conversation: conversation)
            users.add(m.from)
            if let group = m.group { users.add(GroupName.address(group)) }
            return [messageLine(m, now: now)]
        case .groupAccepted(let id, let to, _, _):
            return marks.update(id: id, to: .accepted, recipient: to).map { [changeLine($0)] } ?? []
        case .memberDelivered(let id, let to, let member, _):
            // Each member's, named.
            return marks.update(id: id, to: .delivered, recipient: to, member: member).map { [changeLine($0)] } ?? []
        case .groupChanged(let group, let change, _):
            users.add(change.member)
            users.add(GroupName.address(group))
            return [style.paint(changeText(group: group, change), .dim)]
        case .retracted(_, let from, let reason):
            return [style.paint("\(safe(from))'s last message was not stored and is withdrawn: \(safe(reason))", .yellow)]
        case .contactRequest(let from):
            users.add(from)
            return [style.paint(contactText(.contactRequest, from: from), .yellow)]
        case .contactAccepted(let by):
            users.add(by)
            return [style.paint(contactText(.contactAccepted, from: by), .green)]
        case .groupInvited(let group, let by):
            users.add(GroupName.address(group))
            return [style.paint("\(safe(by)) invites you to #\(safe(group)) (/group accept \(safe(group)), /group decline \(safe(group)))", .yellow)]
        case .error(let message, _):
            return [error(message)]
        case .eventsDropped(let count):
            return [error(Self.droppedEventsText(count))]
        case .identityChanged(let user):
            return [error(Self.identityChangedText(user))]
        case .undecryptable(let from, let id, let reason):
            return [error("cannot decrypt message \(id) from \(from): \(reason)")]
        case .uncertifiedDevice(let user, let device):
            return [error(Self.uncertifiedDeviceText(user: user, device: device))]
        case .commitRefused(let conversation, let epoch, let reason):
            return [error(Self.commitRefusedText(conversation: conversation, epoch: epoch, reason: reason))]
        @unknown default:
            return []
        }
    }

    /// What the REPL and `simp --json` say when its event stream dropped `count` events.
    public static func droppedEventsText(_ count: Int) -> String {
        "events dropped: \(count) (this consumer fell behind its buffer; read the local history to catch up)"
    }

    /// `/presence`: one line per contact and group member.
    public func presence(_ users: [PresenceInfo], now: Date) -> [String] {
        guard !users.isEmpty else { return [info("no contacts or group members")] }
        return users.map { user in
            switch user.state {
            case .online: return style.paint(safe(user.user), .bold) + " " + style.paint("online", .green)
            case .hidden: return safe(user.user) + " " + style.paint("hidden", .dim)
            case .offline:
                let seen = user.lastSeen.map { ", last seen " + lastSeenText($0, now: now) } ?? ""
                return safe(user.user) + " offline" + seen
            }
        }
    }

    /// `14:05` today, else `2026-11-25 14:05`.
    func lastSeenText(_ date: Date, now: Date) -> String {
        guard !calendar.isDate(date, inSameDayAs: now) else { return clock(date) }
        let day = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d ", day.year ?? 0, day.month ?? 0, day.day ?? 0) + clock(date)
    }

    /// `alice asks to be your contact (/contact accept alice, /contact decline alice)`.
    public func contactText(_ kind: IncomingMessage.Kind, from: String) -> String {
        switch kind {
        case .contactRequest: "\(safe(from)) asks to be your contact (/contact accept \(safe(from)), /contact decline \(safe(from)))"
        case .contactAccepted: "\(safe(from)) accepted your contact request"
        case .message, .read, .groupInvited: ""
        }
    }

    /// `alice added carol to #team`.
    public func changeText(group: String, _ change: GroupChange) -> String {
        let where_ = "#" + safe(group)
        switch change.kind {
        case .added: return change.by == change.member ? "\(safe(change.member)) created \(where_)" : "\(safe(change.by)) added \(safe(change.member)) to \(where_)"
        case .removed: return "\(safe(change.by)) removed \(safe(change.member)) from \(where_)"
        case .left: return "\(safe(change.member)) left \(where_)"
        }
    }

    /// `14:05 bob: hello`, the time the server stored it (else the sender's, else now).
    public func messageLine(_ m: IncomingMessage, now: Date) -> String {
        let time = style.paint(clock(m.storedAt ?? (m.sentAt.timeIntervalSince1970 > 0 ? m.sentAt : now)), .dim)
        if let change = m.groupChange, let group = m.group { return time + " " + style.paint(changeText(group: group, change), .dim) }
        if let notice = m.noticeText { return time + " " + style.paint(safe(notice), .dim) }
        let own = m.from == session.user
        // What the user sent from another device (or shows in history), and what was said in a
        // group, names where it went.
        let who = (own && m.to != session.user) || m.group != nil ? "\(safe(m.from)) → \(safe(m.to))" : safe(m.from)
        let name = style.paint(who + ":", own ? .green : .cyan, .bold)
        guard let url = m.imageURL else { return time + " " + name + " " + safe(m.text) }
        return time + " " + name + " " + style.paint("[image]", .magenta) + " " + safe(url.absoluteString) + (m.text.isEmpty ? "" : " " + safe(m.text))
    }

    func clock(_ date: Date) -> String {
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
    }

    public mutating func history(peer: String, _ messages: [IncomingMessage], now: Date) -> [String] {
        users.add(peer)
        guard !messages.isEmpty else { return [style.paint("no messages with \(safe(peer))", .dim)] }
        return messages.map { messageLine($0, now: now) }
    }

    public mutating func learn(fromLine line: String) { users.learn(fromLine: line) }

    // MARK: commands

    public func status() -> [String] {
        ["server \(safe(session.server)), " + tlsText + ", user " + style.paint(safe(session.user), .bold) + " (\(connection.rawValue), path \(path.rawValue))",
         "sent this run: \(marks.sentCount), pending (not yet delivered or failed): \(marks.pendingCount)",
         "received this run: \(receivedCount)"]
    }

    /// One line per device: name (`*` for this one), online or when last seen.
    public func devices(_ devices: [DeviceInfo], now: Date) -> [String] {
        guard !devices.isEmpty else { return [info("no devices")] }
        return devices.map { device in
            let name = (device.current ? "* " : "  ") + safe(device.name)
            let state = device.online ? style.paint("online", .green) : style.paint("last seen " + Self.seen(device.lastSeen, now: now), .dim)
            return name + "  " + state
        }
    }

    /// `14:05` today, else the date and time; `never` for 0.
    static func seen(_ date: Date?, now: Date) -> String {
        guard let date else { return "never" }
        let formatter = DateFormatter()
        formatter.dateFormat = Calendar.current.isDate(date, inSameDayAs: now) ? "HH:mm" : "yyyy-MM-dd HH:mm"
        return formatter.string(from: date)
    }

    public func help() -> [String] {
        REPLCommand.usage.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            + [style.paint("keys: Tab completes a command or user name; Up and Down recall earlier lines (kept across runs)", .dim)]
    }

    public func error(_ message: String) -> String {
        style.paint("error: " + safe(message), .red)
    }

    public func info(_ message: String) -> String {
        style.paint(safe(message), .dim)
    }

    private func safe(_ text: String) -> String { TerminalText.escaped(text) }
}

/// Where the REPL keeps the lines typed on a terminal, across runs.
public enum REPLHistoryFile {
    /// `$XDG_STATE_HOME/simp/history`, else `~/.local/state/simp/history`; nil without either.
    public static func path(environment: [String: String]) -> String? {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/simp/history" }
        guard let home = environment["HOME"], !home.isEmpty else { return nil }
        return home + "/.local/state/simp/history"
    }
}
