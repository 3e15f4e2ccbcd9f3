/// Where one connected device is: the value of its field in the user's presence hash
/// (`Keys.presence`), as `NODE SESSION ADDRESS SEEN_MS`. A node id and an address have no
/// space. `seen` is when the node last wrote it: an entry not rewritten within the presence
/// TTL belongs to a node that died, and the next write of the user's presence drops it.
struct PresenceEntry: Equatable, Sendable {
    var node: String
    var session: UInt64
    var address: String
    var seenMillis: Int64

    var text: String { "\(node) \(session) \(address) \(seenMillis)" }

    init(node: String, session: UInt64, address: String, seenMillis: Int64) {
        self.node = node
        self.session = session
        self.address = address
        self.seenMillis = seenMillis
    }

    init?(_ text: String) {
        let words = text.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count == 4, let session = UInt64(words[1]), let seen = Int64(words[3]) else { return nil }
        self.init(node: String(words[0]), session: session, address: String(words[2]), seenMillis: seen)
    }
}
