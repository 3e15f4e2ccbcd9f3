import SIMPCore

/// What one node tells another over that node's pub/sub channel (`Keys.nodeChannel`). A
/// notice only hurries work along: the inbox and the confirmed marks in Redis stay the truth,
/// so a lost notice delays a push or a `delivered`, and loses nothing.
enum NodeNotice: Equatable, Sendable {
    /// Something was stored in the user's inbox (the store script publishes this): push what
    /// the user's session here has not been sent.
    case inbox(user: String)
    /// Recipients confirmed these messages of `sender`, whose session is on the receiving node.
    case delivered(sender: String, messages: [Simp_Accepted])
    /// The user has this many devices now (one of them just connected elsewhere): a device
    /// here copies what it sends for the others from now on.
    case devices(user: String, count: Int)
    /// The user blocked someone or now takes messages from contacts only: nothing more goes
    /// early to its sessions (a message refused by the filters must never reach them).
    case filtered(user: String)
    /// `from` is typing to `to`, who has a device on the receiving node; `sealed`, the MLS
    /// message of a sealed TYPING (relayed as it is).
    case typing(from: String, to: String, sealed: [UInt8]? = nil)
    /// A user came online or went offline; `watchers` (who may see it) have devices on the
    /// receiving node.
    case presence(PresenceChange, watchers: [String])
    /// `user`'s key directory changed; `watchers` (its circle and itself) have devices on the
    /// receiving node.
    case keys(user: String, watchers: [String])

    /// `inbox USER`, `filtered USER`, `typing FROM TO` (a sealed one: then a space and its MLS message's bytes), `presence WATCHER,... USER online|offline MS`, `keys WATCHER,... USER`, `devices USER COUNT`, or `delivered SENDER ` and a serialized
    /// `DeliveryQuery` listing the messages.
    var payload: [UInt8] {
        switch self {
        case .inbox(let user):
            return Array("inbox \(user)".utf8)
        case .filtered(let user):
            return Array("filtered \(user)".utf8)
        case .typing(let from, let to, let sealed):
            return Array("typing \(from) \(to)".utf8) + (sealed.map { [UInt8(ascii: " ")] + $0 } ?? [])
        case .presence(let change, let watchers):
            return Array("presence \(watchers.joined(separator: ",")) ".utf8) + change.payload
        case .keys(let user, let watchers):
            return Array("keys \(watchers.joined(separator: ",")) \(user)".utf8)
        case .devices(let user, let count):
            return Array("devices \(user) \(count)".utf8)
        case .delivered(let sender, let messages):
            var list = Simp_DeliveryQuery()
            list.messages = messages
            return Array("delivered \(sender) ".utf8) + ((try? list.serializedBytes()) ?? [])
        }
    }

    init?(payload: [UInt8]) {
        guard let space = payload.firstIndex(of: UInt8(ascii: " ")) else { return nil }
        let kind = String(decoding: payload[..<space], as: UTF8.self)
        let rest = payload[(space + 1)...]
        switch kind {
        case "inbox":
            let user = String(decoding: rest, as: UTF8.self)
            guard UserName.isValid(user) else { return nil }
            self = .inbox(user: user)
        case "filtered":
            let user = String(decoding: rest, as: UTF8.self)
            guard UserName.isValid(user) else { return nil }
            self = .filtered(user: user)
        case "presence":
            guard let end = rest.firstIndex(of: UInt8(ascii: " ")),
                  let change = PresenceChange(payload: Array(rest[(end + 1)...])) else { return nil }
            let watchers = String(decoding: rest[..<end], as: UTF8.self).split(separator: ",").map(String.init)
            guard !watchers.isEmpty, watchers.allSatisfy(UserName.isValid) else { return nil }
            self = .presence(change, watchers: watchers)
        case "keys":
            let words = String(decoding: rest, as: UTF8.self).split(separator: " ", omittingEmptySubsequences: false)
            guard words.count == 2, UserName.isValid(String(words[1])) else { return nil }
            let watchers = words[0].split(separator: ",").map(String.init)
            guard !watchers.isEmpty, watchers.allSatisfy(UserName.isValid) else { return nil }
            self = .keys(user: String(words[1]), watchers: watchers)
        case "typing":
            guard let end = rest.firstIndex(of: UInt8(ascii: " ")) else { return nil }
            let from = String(decoding: rest[..<end], as: UTF8.self)
            let tail = rest[(end + 1)...]
            let toEnd = tail.firstIndex(of: UInt8(ascii: " ")) ?? tail.endIndex
            let to = String(decoding: tail[..<toEnd], as: UTF8.self)
            guard UserName.isValid(from), UserName.isValid(to) else { return nil }
            if toEnd == tail.endIndex {
                self = .typing(from: from, to: to)
            } else {
                // The sealed form's MLS message, checked as a TYPING body's.
                guard let body = SealedSignals.TypingBody(Array(to.utf8) + [0] + Array(tail[(toEnd + 1)...])),
                      let sealed = body.sealed else { return nil }
                self = .typing(from: from, to: to, sealed: sealed)
            }
        case "devices":
            let words = String(decoding: rest, as: UTF8.self).split(separator: " ")
            guard words.count == 2, UserName.isValid(String(words[0])), let count = Int(words[1]), count > 0 else { return nil }
            self = .devices(user: String(words[0]), count: count)
        case "delivered":
            guard let end = rest.firstIndex(of: UInt8(ascii: " ")) else { return nil }
            let sender = String(decoding: rest[..<end], as: UTF8.self)
            guard UserName.isValid(sender),
                  let list = try? Simp_DeliveryQuery(serializedBytes: Array(rest[(end + 1)...])) else { return nil }
            self = .delivered(sender: sender, messages: list.messages)
        default:
            return nil
        }
    }
}
