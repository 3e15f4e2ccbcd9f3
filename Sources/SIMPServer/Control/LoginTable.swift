import NIOConcurrencyHelpers
import NIOCore
import SIMPCore

/// The control connections logged in on this node, by user and device: what a password
/// change, `logout{all}` or a device's revocation closes here. Every node keeps its own; the
/// request reaches the others over the admin channel (`AdminRequest.endLogins`,
/// `.endDevice`). A connected session's connection is in it too, so closing the connection
/// ends the session (its handler's `channelInactive`): one path for both.
///
/// A revocation closes only the logins its time ends, and is remembered for a while so that a
/// login whose token it ends cannot join after its closes ran (`RecentRevocations`).
final class LoginTable: Sendable {
    /// A connection, by the number its node knows it by (`number(of:)`).
    typealias Connection = UInt64

    private struct Login {
        var device: String
        /// When the token this connection logged in or connected with was issued (ms since the epoch).
        var tokenIssued: Int64
        var channel: any Channel
    }

    private struct State {
        var logins: [String: [Connection: Login]] = [:]
        var revocations: RecentRevocations
    }

    private let state: NIOLockedValueBox<State>

    init(revocations: RecentRevocations = RecentRevocations()) {
        state = NIOLockedValueBox(State(revocations: revocations))
    }

    /// A connection's number on this node, unique while it is open (its handler's identity).
    static func number(of handler: AnyObject) -> Connection {
        UInt64(UInt(bitPattern: ObjectIdentifier(handler)))
    }

    /// Notes the connection as logged in as `user` for `device` with a token issued at
    /// `tokenIssued` (again, after a CONNECT names the device). Refused, and nothing noted, when
    /// a revocation of the device heard lately ends that token: its closes have run already.
    /// `now`: the caller's moment for the event (its driver read the clock once for it).
    func loggedIn(_ connection: Connection, user: String, device: String, tokenIssued: Int64, channel: any Channel,
                  now: NIODeadline) -> Bool {
        state.withLockedValue { state in
            guard !state.revocations.refuses(user: user, device: device, tokenIssued: tokenIssued, now: now) else { return false }
            state.logins[user, default: [:]][connection] = Login(device: device, tokenIssued: tokenIssued, channel: channel)
            return true
        }
    }

    func loggedOut(_ connection: Connection, user: String) {
        state.withLockedValue { state in
            state.logins[user]?[connection] = nil
            if state.logins[user]?.isEmpty == true { state.logins[user] = nil }
        }
    }

    /// How many connections of the user are logged in here.
    func count(of user: String) -> Int {
        state.withLockedValue { $0.logins[user]?.count ?? 0 }
    }

    /// Sends `error` on every connection of the user (never `except`) and closes them. Returns
    /// how many it closed.
    @discardableResult
    func close(user: String, except: Connection? = nil, with error: Simp_Envelope) -> Int {
        let closing = state.withLockedValue { state in
            Self.remove(from: &state, user: user) { connection, _ in connection != except }
        }
        return Self.close(closing, with: error)
    }

    /// The device was revoked at `revokedAt` (ms since the epoch): sends `error` on the
    /// device's connections whose token that ends, closes them, and remembers the revocation
    /// for the logins still on their way to the table. Without a time (an older node's
    /// announcement), closes every connection of the device and remembers nothing. `now`: when
    /// the revocation was heard, the caller's moment for the event.
    @discardableResult
    func revoked(user: String, device: String, at revokedAt: Int64?, with error: Simp_Envelope, now: NIODeadline) -> Int {
        let closing = state.withLockedValue { state in
            if let revokedAt {
                state.revocations.heard(user: user, device: device, revokedAt: revokedAt, now: now)
            }
            return Self.remove(from: &state, user: user) { _, login in
                login.device == device && RecentRevocations.ends(tokenIssued: login.tokenIssued, revokedAt: revokedAt)
            }
        }
        return Self.close(closing, with: error)
    }

    /// Takes the user's logins that `ending` picks out of the table; returns their channels.
    private static func remove(from state: inout State, user: String,
                               _ ending: (Connection, Login) -> Bool) -> [any Channel] {
        guard let mine = state.logins[user] else { return [] }
        let ended = mine.filter { ending($0.key, $0.value) }
        for connection in ended.keys { state.logins[user]?[connection] = nil }
        if state.logins[user]?.isEmpty == true { state.logins[user] = nil }
        return ended.values.map(\.channel)
    }

    private static func close(_ channels: [any Channel], with error: Simp_Envelope) -> Int {
        for channel in channels {
            channel.writeAndFlush(error).whenComplete { _ in channel.close(promise: nil) }
        }
        return channels.count
    }
}
