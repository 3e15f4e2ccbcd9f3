/// What a PRESENCE datagram says: `USER online SINCE_MS` or `USER offline SINCE_MS`. Changes
/// from different nodes may arrive out of order: the later `since` is the user's state.
public struct PresenceChange: Equatable, Sendable {
    public var user: String
    public var online: Bool
    /// When it came online or went offline (ms since epoch).
    public var since: Int64

    public init(user: String, online: Bool, since: Int64) {
        self.user = user
        self.online = online
        self.since = since
    }

    public var payload: [UInt8] {
        Array("\(user) \(online ? "online" : "offline") \(since)".utf8)
    }

    public init?(payload: [UInt8]) {
        let words = String(decoding: payload, as: UTF8.self).split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard words.count == 3, UserName.isValid(words[0]), words[1] == "online" || words[1] == "offline",
              let since = Int64(words[2]), since >= 0 else { return nil }
        self.init(user: words[0], online: words[1] == "online", since: since)
    }
}
