/// What a PRESENCE datagram says: `USER online` or `USER offline LAST_SEEN_MS`.
public struct PresenceChange: Equatable, Sendable {
    public var user: String
    public var online: Bool
    /// When it went offline (ms since epoch); 0 for online.
    public var lastSeen: Int64

    public init(user: String, online: Bool, lastSeen: Int64 = 0) {
        self.user = user
        self.online = online
        self.lastSeen = online ? 0 : lastSeen
    }

    public var payload: [UInt8] {
        Array((online ? "\(user) online" : "\(user) offline \(lastSeen)").utf8)
    }

    public init?(payload: [UInt8]) {
        let words = String(decoding: payload, as: UTF8.self).split(separator: " ").map(String.init)
        guard words.count >= 2, UserName.isValid(words[0]) else { return nil }
        switch (words[1], words.count) {
        case ("online", 2): self.init(user: words[0], online: true)
        case ("offline", 3):
            guard let seen = Int64(words[2]), seen >= 0 else { return nil }
            self.init(user: words[0], online: false, lastSeen: seen)
        default: return nil
        }
    }
}
