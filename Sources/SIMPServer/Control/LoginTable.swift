import NIOConcurrencyHelpers
import NIOCore
import SIMPCore

/// The control connections logged in on this node, by user and device: what a password
/// change, `logout{all}` or a device's revocation closes here. Every node keeps its own; the
/// request reaches the others over the admin channel (`AdminRequest.endLogins`,
/// `.endDevice`). A connected session's connection is in it too, so closing the connection
/// ends the session (its handler's `channelInactive`): one path for both.
final class LoginTable: Sendable {
    /// A connection, by the number its node knows it by (`number(of:)`).
    typealias Connection = UInt64

    private struct Login {
        var device: String
        var channel: any Channel
    }

    private let logins = NIOLockedValueBox([String: [Connection: Login]]())

    /// A connection's number on this node, unique while it is open (its handler's identity).
    static func number(of handler: AnyObject) -> Connection {
        UInt64(UInt(bitPattern: ObjectIdentifier(handler)))
    }

    /// The connection is logged in as `user` for `device` (again, after a CONNECT names the device).
    func loggedIn(_ connection: Connection, user: String, device: String, channel: any Channel) {
        logins.withLockedValue { $0[user, default: [:]][connection] = Login(device: device, channel: channel) }
    }

    func loggedOut(_ connection: Connection, user: String) {
        logins.withLockedValue { table in
            table[user]?[connection] = nil
            if table[user]?.isEmpty == true { table[user] = nil }
        }
    }

    /// How many connections of the user are logged in here.
    func count(of user: String) -> Int {
        logins.withLockedValue { $0[user]?.count ?? 0 }
    }

    /// Sends `error` on every connection of the user (only those logged in for `device`, when
    /// given; never `except`) and closes them. Returns how many it closed.
    @discardableResult
    func close(user: String, device: String? = nil, except: Connection? = nil, with error: Simp_Envelope) -> Int {
        let closing = logins.withLockedValue { table -> [any Channel] in
            guard let mine = table[user] else { return [] }
            let ending = mine.filter { $0.key != except && (device == nil || $0.value.device == device) }
            for connection in ending.keys { table[user]?[connection] = nil }
            if table[user]?.isEmpty == true { table[user] = nil }
            return ending.values.map(\.channel)
        }
        for channel in closing {
            channel.writeAndFlush(error).whenComplete { _ in channel.close(promise: nil) }
        }
        return closing.count
    }
}
