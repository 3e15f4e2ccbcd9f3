import Foundation
import NIOCore
import SIMPCore

/// What a connection's `ControlMachine` asks its driver (`ControlHandler`) to do, in the order
/// given. The driver carries each out and feeds what comes back to the machine as an input;
/// it decides nothing itself.
enum ControlAction {
    // The connection.
    /// Writes the envelope as a frame, and flushes.
    case send(Simp_Envelope)
    /// Writes the envelope, then closes the connection.
    case sendThenClose(Simp_Envelope)
    case close
    /// A line for the log, about this connection (at info, with who it is).
    case log(String)
    /// The largest frame the peer may send from now on.
    case setFrameLimit(Int)
    /// Reads the socket (true) or leaves what the peer sends in it (false).
    case setReading(Bool)
    /// Stops handing out envelopes: a request is held.
    case pauseFraming
    /// Hands out the envelopes that arrived meanwhile (each fed back as `.frame`).
    case resumeFraming
    /// Arms the timer (in place of one armed before), or cancels it; it comes back as `.due`.
    case schedule(ControlMachine.Timer, after: TimeAmount)
    case cancel(ControlMachine.Timer)

    // The node: counts, the login table, the router.
    case exceeded(Limit)
    /// A PING or PONG came in.
    case keepalive
    /// Notes the connection in the node's `LoginTable` (answered with `.loginsJoined`).
    case joinLogins(ControlMachine.Join)
    case leaveLogins(user: String)
    /// Closes the user's other connections here at once, and on the other nodes through the
    /// admin channel (the accounts already ended their tokens).
    case endOtherLogins(user: String, AdminRequest.LoginEnd)
    /// Closes the revoked device's connections here at once, and on every node (this one again,
    /// harmlessly) through the admin channel.
    case endDevice(ControlMachine.Revocation)
    case router(RouterCall)

    // Work whose answer comes back as an input.
    case run(ControlWork)
}

/// What the router is told on a session's behalf; nothing is answered.
enum RouterCall: Sendable {
    case receipt(session: UInt64, Simp_Receipt)
    case withdraw(session: UInt64, Simp_Withdraw)
    case pathResponse(session: UInt64, token: [UInt8])
    /// A sealed datagram that came inside the connection (the stream path).
    case datagram(session: UInt64, Data)
    case closeSession(UInt64)
    /// The user's key directory changed (a device revoked): tell its circle and its devices.
    case announceKeys(user: String)
}

/// A request's work on the accounts, the store or the router, and the input its answer comes
/// back as (`.answered` unless said otherwise). Times are the request's (`Moment.millis`).
enum ControlWork: Sendable {
    case register(id: UInt64, user: String, password: String, source: String)
    /// Answered with `.loginIssued`.
    case login(ControlMachine.Login, password: String, source: String, millis: Int64)
    /// Answered with `.tokenVerified`.
    case verifyToken(ControlMachine.Connect, token: String, millis: Int64)
    /// Answered with `.sessionOpened`.
    case openSession(id: UInt64, DeliveryEngine.SessionRequest)
    /// Ends every token of the user first when `all` (and its other connections), then revokes these.
    case logout(id: UInt64, user: String, all: Bool, revoking: [RevocableToken], millis: Int64)
    /// Answered with `.passwordChanged`.
    case changePassword(id: UInt64, user: String, old: String, new: String, device: String, source: String, millis: Int64)
    case devices(id: UInt64, user: String, millis: Int64)
    /// Answered with `.revocationStored`.
    case revokeDevice(ControlMachine.Revocation)
    /// Answered with `.historyRead`.
    case history(id: UInt64, user: String, peer: String, before: UInt64, limit: Int)
    case groupHistory(id: UInt64, user: String, group: String, peer: String, before: UInt64, limit: Int)
    /// Answered with `.queryAnswered` (the router writes the answers).
    case query(session: UInt64, Simp_DeliveryQuery)
    case group(id: UInt64, user: String, Simp_GroupRequest, millis: Int64)
    /// The request's steps (`ContactFlow`), run one after another.
    case contact(id: UInt64, ContactFlow, millis: Int64)
    case settings(id: UInt64, user: String, changes: [(name: String, value: String?)], filtering: Bool)
    case markRead(id: UInt64, user: String, session: UInt64, Simp_ReadRequest, millis: Int64)
    /// Answered with `.presenceCircleRead`.
    case presenceCircle(id: UInt64, user: String)
    case presence(id: UInt64, user: String, of: [String], millis: Int64)
    /// A key directory request's steps (`KeyFlow`), run one after another.
    case keys(id: UInt64, KeyFlow)
    /// A commit request's steps (`CommitFlow`), run one after another.
    case commits(id: UInt64, CommitFlow)
    /// A device link's step or fetch (`LinkFlow`).
    case links(id: UInt64, LinkFlow)
}
