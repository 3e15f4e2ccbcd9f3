import Foundation
import SIMPCore
import SIMPClient
import SIMPTerminal

/// Everything the REPL prints goes through here: human lines, or one JSON object per line.
/// Human lines show what others wrote through `safe` (TerminalText), so that no message,
/// name or server reason can steer the terminal; JSON is escaped by JSONSerialization.
final class Output: @unchecked Sendable {
    let json: Bool
    private let lock = NSLock()

    init(json: Bool) { self.json = json }

    func event(_ event: ClientEvent) {
        switch event {
        case .connected(let user, let path):
            emit(["event": "connected", "user": user, "path": path.rawValue], human: "connected as \(user)")
        case .path(let path):
            emit(["event": "path", "path": path.rawValue],
                 human: path == .stream ? "UDP does not get through: messages now travel inside the control connection"
                                        : "UDP works: messages travel over UDP again")
        case .disconnected(let reason):
            emit(["event": "disconnected", "reason": reason], human: "disconnected: \(safe(reason))", toStderr: true)
        case .ended(let reason):
            emit(["event": "ended", "reason": reason], human: "session ended: \(safe(reason))", toStderr: true)
        case .reconnecting(let attempt, let delay):
            emit(["event": "reconnecting", "attempt": attempt, "delayMillis": Int(delay.wholeMillis)],
                 human: "reconnecting in \(delay.wholeMillis) ms (attempt \(attempt))", toStderr: true)
        case .accepted(let id, let to, let seq):
            emit(["event": "accepted", "id": id, "to": to, "seq": Int(seq)], human: "[accepted] \(id) -> \(to)")
        case .delivered(let id, let to, let seq):
            emit(["event": "delivered", "id": id, "to": to, "seq": Int(seq)], human: "[delivered] \(id) -> \(to)")
        case .failed(let id, let to, let reason, let code):
            var object: [String: Any] = ["event": "failed", "id": id, "to": to, "reason": reason]
            if let code { object["code"] = code.protocolName }
            emit(object, human: "[failed] \(safe(id)) -> \(safe(to)): \(safe(reason))")
        case .message(let m):
            var object: [String: Any] = ["event": "message", "id": m.id, "from": m.from, "to": m.to, "text": m.text, "seq": Int(m.seq),
                                         "sentAt": Int(m.sentAt.millisSince1970), "receivedAt": Int(Date().timeIntervalSince1970 * 1000)]
            if let url = m.imageURL { object["imageURL"] = url.absoluteString }
            if !m.fromDevice.isEmpty { object["fromDevice"] = m.fromDevice }
            if m.encrypted { object["encrypted"] = true }
            if let group = m.group {
                object["group"] = group
                object["groupSeq"] = Int(m.groupSeq)
            }
            emit(object, human: Self.humanLine(m))
        case .groupAccepted(let id, let to, let seq, let recipients):
            emit(["event": "accepted", "id": id, "to": to, "seq": Int(seq), "recipients": recipients],
                 human: "[accepted] \(id) -> \(to) (\(recipients == 1 ? "1 member" : "\(recipients) members"))")
        case .memberDelivered(let id, let to, let member, let seq):
            emit(["event": "delivered", "id": id, "to": to, "member": member, "seq": Int(seq)], human: "[delivered] \(id) -> \(to): \(safe(member))")
        case .groupChanged(let group, let change, let seq):
            emit(["event": "group", "group": group, "change": change.kind.rawValue, "member": change.member, "by": change.by, "seq": Int(seq)],
                 human: Self.changeLine(group: group, change))
        case .contactRequest(let from):
            emit(["event": "contact-request", "from": from], human: "[contact request] \(safe(from)) asks to be your contact")
        case .presence(let change):
            let object: [String: Any] = ["event": "presence", "user": change.user, "state": change.state.rawValue,
                                         "since": Int(change.lastSeen?.millisSince1970 ?? 0)]
            emit(object, human: "[presence] \(safe(change.user)) \(change.state.rawValue)")
        case .typing(let from):
            emit(["event": "typing", "from": from], human: "[typing] \(safe(from))")
        case .read(let id, let from, let by):
            emit(["event": "read", "id": id, "from": from, "by": by], human: "[read] \(safe(id)) by \(safe(by))")
        case .contactAccepted(let by):
            emit(["event": "contact-accepted", "by": by], human: "[contact accepted] \(safe(by)) accepted your contact request")
        case .groupInvited(let group, let by):
            emit(["event": "group-invited", "group": group, "by": by], human: "[group invitation] \(safe(by)) invites you to #\(safe(group))")
        case .retracted(let id, let from, let reason):
            emit(["event": "retracted", "id": id, "from": from, "reason": reason],
                 human: "[retracted] \(safe(id)) from \(safe(from)): \(safe(reason))")
        case .error(let message, let code):
            error(message, code: code)
        case .eventsDropped(let count):
            error(REPLScreen.droppedEventsText(count))
        case .undecryptable(let from, let id, let reason):
            emit(["event": "undecryptable", "from": from, "id": id, "reason": reason],
                 human: "[cannot decrypt] message \(id) from \(from): \(reason)", toStderr: true)
        case .identityChanged(let user):
            emit(["event": "identity-changed", "user": user], human: "[identity changed] " + REPLScreen.identityChangedText(user), toStderr: true)
        case .uncertifiedDevice(let user, let device):
            emit(["event": "uncertified-device", "user": user, "device": device],
                 human: "[warning] " + REPLScreen.uncertifiedDeviceText(user: user, device: device), toStderr: true)
        case .commitRefused(let conversation, let epoch, let reason):
            emit(["event": "commit-refused", "conversation": conversation, "epoch": Int(epoch), "reason": reason],
                 human: "[warning] " + REPLScreen.commitRefusedText(conversation: conversation, epoch: epoch, reason: reason), toStderr: true)
        @unknown default:
            break
        }
    }

    /// An error; `code` is the server's, when it refused (a script reads it, not the message).
    func error(_ message: String, code: ErrorCode? = nil) {
        var object: [String: Any] = ["event": "error", "message": message]
        if let code { object["code"] = code.protocolName }
        emit(object, human: "error: \(safe(message))", toStderr: true)
    }

    func sent(id: String, to: String) {
        emit(["event": "sent", "id": id, "to": to], human: "[sent] \(id) -> \(to)")
    }

    func history(peer: String, _ messages: [IncomingMessage]) {
        let list: [[String: Any]] = messages.map { m in
            var o: [String: Any] = ["id": m.id, "from": m.from, "to": m.to, "text": m.text, "seq": Int(m.seq)]
            if let url = m.imageURL { o["imageURL"] = url.absoluteString }
            if let group = m.group { o["groupSeq"] = Int(m.groupSeq) ; o["group"] = group }
            if let change = m.groupChange { o["change"] = change.kind.rawValue; o["member"] = change.member; o["by"] = change.by }
            if m.kind != .message { o["kind"] = m.kind.rawValue }
            return o
        }
        let human = messages.isEmpty ? "no messages with \(safe(peer))" : messages.map(Self.humanLine).joined(separator: "\n")
        emit(["event": "history", "peer": peer, "messages": list], human: human)
    }

    func presence(_ users: [PresenceInfo]) {
        let list: [[String: Any]] = users.map { ["user": $0.user, "state": $0.state.rawValue, "lastSeen": Int($0.lastSeen?.millisSince1970 ?? 0)] }
        let human = users.isEmpty ? "no contacts or group members" : users.map { user in
            safe(user.user) + " " + user.state.rawValue + (user.state == .offline ? user.lastSeen.map { " (last seen \(Self.time($0)))" } ?? "" : "")
        }.joined(separator: "\n")
        emit(["event": "presence", "users": list], human: human)
    }

    /// `2026-11-26T19:21:13Z`.
    static func time(_ date: Date) -> String {
        ISO8601DateFormatter().string(from: date)
    }

    func devices(_ devices: [DeviceInfo]) {
        let list: [[String: Any]] = devices.map {
            ["name": $0.name, "online": $0.online, "lastSeen": Int($0.lastSeen?.millisSince1970 ?? 0), "current": $0.current]
        }
        let human = devices.isEmpty ? "no devices" : devices.map { device in
            (device.current ? "* " : "  ") + safe(device.name) + "  " + (device.online ? "online" : "offline")
        }.joined(separator: "\n")
        emit(["event": "devices", "devices": list], human: human)
    }

    /// Each line of `human` escaped on its own: a result may take several lines.
    func result(_ result: RequestResult) {
        emit(result.json, human: result.human.split(separator: "\n", omittingEmptySubsequences: false).map { safe(String($0)) }.joined(separator: "\n"))
    }

    func info(_ text: String) {
        emit(["event": "info", "message": text], human: text)
    }

    /// One line on stderr in both modes: for the subcommands, stdout holds only the result.
    func problem(_ message: String) {
        note("error: " + message)
    }

    /// A status line on stderr, out of the way of the results on stdout.
    func note(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardError.write(Data((safe(text) + "\n").utf8))
    }

    /// What `simp send` prints on stdout: the message id, or with --json its fate as one object.
    func sendOutcome(id: String, to: String, _ fate: Fate) {
        guard json else {
            emit([:], human: id)
            return
        }
        var object: [String: Any] = ["id": id, "to": to]
        switch fate {
        case .accepted(let seq):
            object.merge(["event": "accepted", "seq": Int(seq)]) { $1 }
        case .delivered(let seq):
            object.merge(["event": "delivered", "seq": Int(seq)]) { $1 }
        case .failed(let reason, let code):
            object.merge(["event": "failed", "reason": reason]) { $1 }
            if let name = code.protocolName { object["code"] = name }
        case .timedOut(let accepted):
            object.merge(["event": "timeout", "accepted": accepted]) { $1 }
        }
        emit(object, human: id)
    }

    /// `simp send`'s message refused before it left (no such user, a peer without keys, over
    /// the size limit): the reason on stderr and, with --json, a `failed` object without an id
    /// on stdout, with the server's code as a refusal after sending has it.
    func notSent(to: String, _ error: ClientError) {
        if json {
            var object: [String: Any] = ["event": "failed", "to": to, "reason": error.message]
            if let name = error.code?.protocolName { object["code"] = name }
            emit(object, human: "")
        }
        problem(error.message)
    }

    private static func changeLine(group: String, _ change: GroupChange) -> String {
        switch change.kind {
        case .added where change.by == change.member: return "\(safe(change.by)) created #\(safe(group))"
        case .added: return "\(safe(change.by)) added \(safe(change.member)) to #\(safe(group))"
        case .removed: return "\(safe(change.by)) removed \(safe(change.member)) from #\(safe(group))"
        case .left: return "\(safe(change.member)) left #\(safe(group))"
        }
    }

    /// `bob: hi`; what the user sent from another device, or to a group, `alice -> bob: hi`.
    private static func humanLine(_ m: IncomingMessage) -> String {
        if let change = m.groupChange, let group = m.group { return changeLine(group: group, change) }
        if let notice = m.noticeText { return safe(notice) }
        let who = m.fromDevice.isEmpty && m.group == nil ? safe(m.from) : "\(safe(m.from)) -> \(safe(m.to))"
        if let url = m.imageURL {
            return "\(who): [image] \(safe(url.absoluteString))\(m.text.isEmpty ? "" : " \(safe(m.text))")"
        }
        return "\(who): \(safe(m.text))"
    }

    private func emit(_ object: [String: Any], human: String, toStderr: Bool = false) {
        let line: String
        if json {
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            line = String(decoding: data, as: UTF8.self)
        } else {
            line = human
        }
        let handle = (toStderr && !json) ? FileHandle.standardError : FileHandle.standardOutput
        lock.lock()
        defer { lock.unlock() }
        handle.write(Data((line + "\n").utf8))
    }
}

/// Untrusted text as a terminal may show it.
private func safe(_ text: String) -> String { TerminalText.escaped(text) }

/// The messages a line-mode REPL or `simp listen` printed, for marking them read: a
/// `ReadTracker` shared by the task that prints and the one that reads commands.
final class ShownMessages: @unchecked Sendable {
    private let lock = NSLock()
    private var tracker = ReadTracker()

    func record(_ event: ClientEvent) {
        lock.lock()
        defer { lock.unlock() }
        switch event {
        case .message(let message): tracker.shown(message, conversation: nil)
        case .read(let id, _, _): tracker.readElsewhere(id)
        default: break
        }
    }

    func takeAll(from peer: String) -> [IncomingMessage] {
        lock.lock()
        defer { lock.unlock() }
        tracker.markAll(from: peer)
        return tracker.takeDue()
    }
}
