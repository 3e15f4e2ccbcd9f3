/// Every Redis key SIMP uses, under one namespace prefix (default "simp").
struct Keys: Sendable {
    let prefix: String

    func user(_ name: String) -> String { "\(prefix):user:\(name)" }
    func seq(_ name: String) -> String { "\(prefix):seq:\(name)" }
    func inbox(_ name: String) -> String { "\(prefix):inbox:\(name)" }
    func acked(_ name: String) -> String { "\(prefix):acked:\(name)" }
    /// Redis' run id at NAME's last store, and the seq numbering restarted from while no
    /// CONNECT of NAME has checked it (`Scripts.store`).
    func numbering(_ name: String) -> String { "\(prefix):numbering:\(name)" }
    func presence(_ name: String) -> String { "\(prefix):presence:\(name)" }
    /// The ids of the messages one sender stored in one recipient's inbox, scored by their
    /// seq: a retransmitted datagram is stored once, the sender's share of the inbox is
    /// counted, and a delivery query is answered only to the message's sender.
    func messageIDs(to: String, from: String) -> String { "\(prefix):mids:\(to):\(from)" }
    /// The conversation's history, one list per unordered pair of users.
    func history(_ a: String, _ b: String) -> String {
        a < b ? "\(prefix):hist:\(a):\(b)" : "\(prefix):hist:\(b):\(a)"
    }
    var secret: String { "\(prefix):secret" }
    /// A running node's claim on its id (`NodeRecord`): its instance token, expiring unless renewed.
    func node(_ id: String) -> String { "\(prefix):node:\(id)" }
    /// The pub/sub channel of one node: what other nodes tell it (`NodeNotice`).
    func nodeChannel(_ node: String) -> String { "\(prefix):to-node:\(node)" }
    /// The pub/sub channel every node listens on for administrators' requests (`simp-admin`).
    var adminChannel: String { "\(prefix):admin" }
    /// Failed logins for a name (existing or not), from all sources or (a name has no ':') from
    /// one source address, and the wait they earned (docs/SECURITY.md).
    func loginFailures(_ name: String, from source: String? = nil) -> String {
        "\(prefix):loginfail:\(name)" + (source.map { ":\($0)" } ?? "")
    }
    func loginLock(_ name: String, from source: String? = nil) -> String {
        "\(prefix):loginlock:\(name)" + (source.map { ":\($0)" } ?? "")
    }
    /// Failed logins from one source address across all names, and the wait they earned.
    func sourceFailures(_ source: String) -> String { "\(prefix):loginfailip:\(source)" }
    func sourceLock(_ source: String) -> String { "\(prefix):loginlockip:\(source)" }
    /// The source addresses a user logged in from successfully, scored by the time of the last one.
    func knownSources(_ name: String) -> String { "\(prefix):knownips:\(name)" }
    /// Registrations attempted from one source address in the current window.
    func registrations(_ source: String) -> String { "\(prefix):regs:\(source)" }
    /// A token revoked by logout, by its MAC; expires with the token.
    func revoked(_ tokenID: String) -> String { "\(prefix):revoked:\(tokenID)" }
}
