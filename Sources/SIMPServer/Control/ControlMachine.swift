import NIOCore
import SIMPCore

/// One control connection's decisions, pure: its life (anonymous, logged in, connected,
/// closed), which request may run now (`RequestGate`, `RequestCost` and the user's budget in
/// `Admission`), what each request is answered at once and what the router, the store or the
/// accounts are asked to do for it, and what their answers lead to. One input at a time, with
/// the time it happened (`Moment`, read once by the driver), actions out, in order.
/// `ControlHandler` is its driver: it decodes frames, feeds them here and carries out the
/// actions; every answer it gets comes back as an input. No channel, no event loop, no clock.
///
/// `Admission` is the node's shared count of connections, logged-in connections and user
/// request budgets (a lock inside, one per node): the machine consults it in place, as every
/// connection must see the others' counts at once.
struct ControlMachine {
    /// What every connection of a node shares: its limits and the node's `Admission`, held by
    /// reference (a connection's machine is kept for every session).
    final class Node: Sendable {
        let admission: Admission
        let requests: RequestGate.Settings
        /// A connection must log in (or connect with a token) this soon after it opens.
        let loginDeadline: TimeAmount
        /// The frame limit once logged in; before that (and after logout) only small frames.
        let maxFrameLength: Int
        let anonymousFrameLength: Int
        /// How long the peer may leave our replies unread.
        let unreadGrace: TimeAmount
        let maxGroupMembers: Int
        /// Device certificates a user may have stored (the key directory, `KeyFlow`).
        let maxDevicesPerUser: Int
        /// `--e2e required`: a read mark, one-to-one or a group's, must be sealed (`SEALED_READ`),
        /// and `markRead` naming one is refused E2E_REQUIRED.
        let sealedOnly: Bool

        init(admission: Admission, requests: RequestGate.Settings = .init(), loginDeadline: TimeAmount = .seconds(30),
             maxFrameLength: Int = Frame.defaultMaxLength, anonymousFrameLength: Int = 4_096, unreadGrace: TimeAmount,
             maxGroupMembers: Int, maxDevicesPerUser: Int = 10, sealedOnly: Bool = false) {
            self.sealedOnly = sealedOnly
            self.admission = admission
            self.requests = requests
            self.loginDeadline = loginDeadline
            self.maxFrameLength = maxFrameLength
            self.anonymousFrameLength = anonymousFrameLength
            self.unreadGrace = unreadGrace
            self.maxGroupMembers = maxGroupMembers
            self.maxDevicesPerUser = maxDevicesPerUser
        }
    }

    enum Phase: Equatable {
        case anonymous
        case authenticated(user: String)
        case connected(user: String, session: UInt64)
        /// The channel went inactive: answers that arrive later must not take a slot or open a
        /// session nobody would release.
        case closed

        var user: String? {
            switch self {
            case .authenticated(let user), .connected(let user, _): user
            case .anonymous, .closed: nil
            }
        }
    }

    /// The connection's timers; the driver keeps at most one of each.
    enum Timer: Sendable, Equatable {
        /// Not logged in by then: closed.
        case loginDeadline
        /// The held request's rate allows it now.
        case gate
        /// Our replies left unread for too long: closed.
        case unread
    }

    /// A token the accounts issued or verified, as the machine needs it.
    struct Grant: Sendable, Equatable {
        var user: String
        var device: String
        /// The token itself and its expiry, for a login's answer (empty for a CONNECT's).
        var token = ""
        var expiresAt: Int64 = 0
        /// When it was issued (ms since the epoch), for the login table.
        var issued: Int64
        /// What logout revokes; nil if the accounts could not read back the token they issued.
        var revocable: RevocableToken?
    }

    /// A login on its way: the request's id, who, for which device.
    struct Login: Sendable, Equatable {
        var id: UInt64
        var user: String
        var device: String
    }

    /// A CONNECT on its way, and, once its token is verified, the session it asks for.
    struct Connect: Sendable {
        var id: UInt64
        var device: String
        var lastSeq: UInt64
        var bundles: Bool
        var early: Bool
        var receivedSeq: UInt64 = 0
    }

    /// A connection joining the node's `LoginTable` (the driver holds the channel it needs).
    struct Join: Sendable {
        enum Purpose: Sendable {
            case login(Login, Grant)
            case connect(id: UInt64, Simp_ConnectResponse)
        }

        var user: String
        var device: String
        var tokenIssued: Int64
        var purpose: Purpose
    }

    /// A device's revocation: by whom, and when (one time for Redis, this node's table and the
    /// announcement: each ends the same tokens).
    struct Revocation: Sendable, Equatable {
        var id: UInt64
        var user: String
        var device: String
        var by: String
        var millis: Int64
    }

    /// What happened, as the driver tells it.
    enum Input: Sendable {
        // The connection.
        /// It opened, from `ip`.
        case opened(ip: String)
        /// A whole envelope from the peer.
        case frame(Simp_Envelope)
        /// The peer reads what we write again (true), or stopped (false).
        case writabilityChanged(Bool)
        /// The heartbeat says ping (`.write`, with a fresh `nonce`) or that the peer went silent (`.read`).
        case heartbeatDue(IdleStateHandler.IdleStateEvent, nonce: UInt64)
        /// The peer broke the framing; the framing writes the error and closes.
        case framingFailed(FrameError)
        case due(Timer)
        case closed

        // Answers to the machine's actions.
        /// A request's answer is ready (an error for the peer, on failure).
        case answered(id: UInt64, Result<Simp_Envelope, ServerError>)
        /// A delivery query's `delivered` frames are queued (the router writes them).
        case queryAnswered
        case loginIssued(Login, Result<Grant, ServerError>)
        case tokenVerified(Connect, Result<Grant, ServerError>)
        case sessionOpened(id: UInt64, DeliveryEngine.SessionRequest, Result<Simp_ConnectResponse, ServerError>)
        /// The login table took the connection, or refused it (a revocation of the device was heard).
        case loginsJoined(Join, Bool)
        case passwordChanged(id: UInt64, user: String, Result<Grant, ServerError>)
        /// The user's contacts and groups were read for a presence request.
        case presenceCircleRead(id: UInt64, user: String, Result<(users: [String], groups: Int), ServerError>)
        /// A page of history with `peer`; nil: the user is no member of that group.
        case historyRead(id: UInt64, peer: String, Result<HistoryPaging.Page?, ServerError>)
        /// The store revoked the device, if the user had it (`found`).
        case revocationStored(Revocation, Result<Bool, ServerError>)
    }

    private let node: Node
    private(set) var phase = Phase.anonymous
    /// The device this connection logged in or connected for.
    private(set) var device: String?
    /// The source IP counted against its connection limit, once admitted.
    private(set) var source: String?
    /// The user whose logged-in slot this connection holds.
    private(set) var slot: String?
    /// Tokens this connection logged in or connected with: logout revokes them.
    private(set) var tokens: [RevocableToken] = []
    private var gate: RequestGate
    /// The request the gate did not let run yet; the framing is paused behind it.
    private var held: HeldRequest?
    private var flags: Flags = [.reading]
    private var actions: [ControlAction] = []

    /// Boxed, since an envelope is 120 bytes inline and a request is held only while the gate says wait.
    private indirect enum HeldRequest {
        case request(Simp_Envelope)

        var envelope: Simp_Envelope {
            switch self { case .request(let envelope): envelope }
        }
    }

    private struct Flags: OptionSet {
        let rawValue: UInt8
        static let connecting = Flags(rawValue: 1 << 0)
        static let paused = Flags(rawValue: 1 << 1)
        static let reading = Flags(rawValue: 1 << 2)
        /// Not logged in yet since the connection opened or logged out: small frames, and the deadline runs.
        static let awaitingLogin = Flags(rawValue: 1 << 3)
        static let gateTimer = Flags(rawValue: 1 << 4)
        static let unreadTimer = Flags(rawValue: 1 << 5)
    }

    init(_ node: Node) {
        self.node = node
        // A full bucket is full whenever it was filled: no clock needed to start one.
        gate = RequestGate(node.requests, now: .distantPast)
    }

    /// The one entry: what happened and when, the actions to carry out (in order) out.
    mutating func handle(_ input: Input, at now: Moment) -> [ControlAction] {
        switch input {
        case .opened(let ip): opened(ip)
        case .frame(let envelope):
            if held == nil, admit(envelope, now: now) { request(envelope, now: now) } else { hold(envelope, now: now) }
        case .writabilityChanged(let writable): writabilityChanged(writable, now: now)
        case .heartbeatDue(let event, let nonce): heartbeatDue(event, nonce: nonce)
        case .framingFailed(let error):
            if case .tooLarge = error { actions.append(.exceeded(.frameSize)) }
            if case .incomplete = error { actions.append(.exceeded(.frameDeadline)) }
        case .due(let timer): due(timer, now: now)
        case .closed: closed()
        default: answer(input, now: now)
        }
        let out = actions
        actions = []
        return out
    }

    private mutating func answer(_ input: Input, now: Moment) {
        switch input {
        case .answered(let id, let result): finish(id, result, now: now)
        case .queryAnswered:
            gate.finished()
            release(now: now)
        case .loginIssued(let login, let result): loginIssued(login, result, now: now)
        case .tokenVerified(let connect, let result): tokenVerified(connect, result, now: now)
        case .sessionOpened(let id, let request, let result): sessionOpened(id, request, result, now: now)
        case .loginsJoined(let join, let joined): loginsJoined(join, joined, now: now)
        case .passwordChanged(let id, let user, let result):
            switch result {
            case .failure(let error): finish(id, .failure(error), now: now)
            case .success(let grant):
                actions.append(.endOtherLogins(user: user, .password))
                // The tokens this connection held are invalid now; logout revokes the new one.
                if let revocable = grant.revocable { tokens = [revocable] }
                finish(id, .success(Self.loginOK(id, grant)), now: now)
            }
        case .presenceCircleRead(let id, let user, let result):
            switch result {
            case .failure(let error): finish(id, .failure(error), now: now)
            case .success(let circle):
                charge(RequestCost.presenceRead(groups: circle.groups, users: circle.users.count), now: now)
                actions.append(.run(.presence(id: id, user: user, of: circle.users, millis: now.millis)))
            }
        case .historyRead(let id, let peer, let result):
            finish(id, result.flatMap { page in
                guard let page else { return .failure(ServerError(.notAMember, "you are not a member of \(peer)")) }
                return .success(Self.history(id, peer: peer, page))
            }, now: now)
        case .revocationStored(let revocation, let result):
            switch result {
            case .failure(let error): finish(revocation.id, .failure(error), now: now)
            case .success(false):
                finish(revocation.id, .failure(ServerError(.badRequest, "\(revocation.user) has no device \(revocation.device)")), now: now)
            case .success(true):
                actions.append(.endDevice(revocation))
                // Its peers' devices remove its leaves now, not at their next send.
                actions.append(.router(.announceKeys(user: revocation.user)))
                finish(revocation.id, .success(Simp_Envelope(requestID: revocation.id, .ok(Simp_Ok()))), now: now)
            }
        default: assertionFailure("not an answer: \(input)")
        }
    }

    /// A history page's answer; the peer is echoed (a checked name, or the group's address).
    private static func history(_ id: UInt64, peer: String, _ page: HistoryPaging.Page) -> Simp_Envelope {
        var response = Simp_HistoryResponse()
        response.peer = peer
        response.messages = page.items.compactMap { try? Simp_Message(serializedBytes: $0) }
        response.more = page.more
        response.nextBefore = page.nextBefore
        return Simp_Envelope(requestID: id, .historyResult(response))
    }

    // MARK: the connection

    private mutating func opened(_ ip: String) {
        armLoginDeadline()
        if node.admission.admitConnection(from: ip) {
            source = ip
        } else {
            actions.append(.sendThenClose(.error(.tooManyConnections, "more than \(node.admission.connectionsPerIP) connections from \(ip)")))
        }
    }

    /// A connection that has not logged in by the deadline is closed: an anonymous
    /// connection costs a descriptor and memory, and gives nothing back.
    private mutating func armLoginDeadline() {
        flags.insert(.awaitingLogin)
        actions.append(.schedule(.loginDeadline, after: node.loginDeadline))
    }

    private mutating func due(_ timer: Timer, now: Moment) {
        switch timer {
        case .loginDeadline:
            guard phase == .anonymous else { return }
            actions.append(.exceeded(.loginDeadline))
            let seconds = node.loginDeadline.nanoseconds / 1_000_000_000
            actions.append(.sendThenClose(.error(.notAuthenticated, "log in within \(seconds) s of connecting; closing")))
        case .gate:
            flags.remove(.gateTimer)
            release(now: now)
        case .unread:
            actions.append(.exceeded(.outputBacklog))
            actions.append(.close)
        }
    }

    /// A peer that does not read what we write: stop reading its requests (so replies cannot
    /// pile up in memory) and drop it if it stays that way.
    private mutating func writabilityChanged(_ writable: Bool, now: Moment) {
        gate.writable = writable
        release(now: now)
        if writable {
            if flags.contains(.unreadTimer) { actions.append(.cancel(.unread)) }
            flags.remove(.unreadTimer)
        } else if !flags.contains(.unreadTimer) {
            flags.insert(.unreadTimer)
            actions.append(.schedule(.unread, after: node.unreadGrace))
        }
    }

    private mutating func heartbeatDue(_ event: IdleStateHandler.IdleStateEvent, nonce: UInt64) {
        switch event {
        case .write:
            var ping = Simp_Ping()
            ping.nonce = nonce
            actions.append(.send(Simp_Envelope(.ping(ping))))
        case .read: actions += [.log("control peer silent for longer than the heartbeat allows; closing"), .close]
        case .all: break
        }
    }

    private mutating func closed() {
        actions += [.cancel(.unread), .cancel(.gate), .cancel(.loginDeadline)]
        if case .connected(_, let session) = phase { actions.append(.router(.closeSession(session))) }
        if let user = phase.user { actions.append(.leaveLogins(user: user)) }
        releaseSlot()
        if let source { node.admission.connectionClosed(from: source) }
        source = nil
        phase = .closed
        held = nil
    }

    // MARK: the gate

    /// The connection's gate, then, once logged in, the user's rate over all its connections;
    /// both charge the request what it makes the node do.
    private mutating func admit(_ envelope: Simp_Envelope, now: Moment) -> Bool {
        let cost = RequestCost.of(envelope)
        guard gate.admit(cost: cost, now: now.deadline) else { return false }
        guard let user = slot else { return true }
        return node.admission.takeRequest(of: user, cost: cost, now: now.deadline)
    }

    /// Charges work a request turned out to cost once it was done (`RequestCost.presenceRead`):
    /// the connection's and the user's next requests wait for it.
    private mutating func charge(_ extra: Int, now: Moment) {
        gate.charge(extra, now: now.deadline)
        if let user = slot { node.admission.charge(user, extra, now: now.deadline) }
    }

    private mutating func hold(_ envelope: Simp_Envelope, now: Moment) {
        assert(held == nil, "the framing hands out nothing while a request is held")
        held = .request(envelope)
        if !flags.contains(.paused) {
            flags.insert(.paused)
            actions.append(.pauseFraming)
        }
        // Counted once per pause for the rate (not for answers being worked out or unread replies).
        if gate.rateWait(cost: RequestCost.of(envelope), now: now.deadline) != nil { actions.append(.exceeded(.controlRequests)) }
        updateReading(now: now)
    }

    /// Runs the held request if the gate now lets it, then lets the framing go on; after an
    /// answer is written, the rate allows one more, or the peer reads again.
    private mutating func release(now: Moment) {
        if let envelope = held?.envelope {
            guard phase != .closed, admit(envelope, now: now) else {
                updateReading(now: now)
                return
            }
            held = nil
            request(envelope, now: now)
        }
        if held == nil, flags.contains(.paused) {
            flags.remove(.paused)
            actions.append(.resumeFraming)
        }
        updateReading(now: now)
    }

    private mutating func updateReading(now: Moment) {
        guard phase != .closed else { return }
        let read = held == nil && gate.writable
        if read != flags.contains(.reading) {
            if read { flags.insert(.reading) } else { flags.remove(.reading) }
            actions.append(.setReading(read))
        }
        guard let envelope = held?.envelope, !flags.contains(.gateTimer),
              let wait = gate.rateWait(cost: RequestCost.of(envelope), now: now.deadline) else { return }
        flags.insert(.gateTimer)
        actions.append(.schedule(.gate, after: wait))
    }

    /// Asks for the request's work; until its answer the request counts against the gate.
    private mutating func start(_ work: ControlWork) {
        gate.started()
        actions.append(.run(work))
    }

    /// The request's answer: written, and the gate may let the next one run.
    private mutating func finish(_ id: UInt64, _ result: Result<Simp_Envelope, ServerError>, now: Moment) {
        gate.finished()
        // Once the peer has proven who it is, it may send frames up to the full limit.
        if phase.user != nil, flags.contains(.awaitingLogin) {
            flags.remove(.awaitingLogin)
            actions += [.cancel(.loginDeadline), .setFrameLimit(node.maxFrameLength)]
        }
        switch result {
        case .success(let envelope): actions.append(.send(envelope))
        case .failure(let error): actions.append(.send(.error(error.code, error.reason, requestID: id)))
        }
        release(now: now)
    }

    private mutating func reply(_ envelope: Simp_Envelope) {
        actions.append(.send(envelope))
    }

    // MARK: logins and slots

    /// Takes the user's logged-in slot for this connection, unless the user has too many.
    private mutating func takeSlot(for user: String) -> ServerError? {
        guard phase != .closed else { return ServerError(.notConnected, "the connection closed") }
        guard slot != user else { return nil }
        if let slot { return ServerError(.badRequest, "this connection is logged in as \(slot); open another for \(user)") }
        guard node.admission.admitLogin(of: user) else {
            return ServerError(.tooManySessions, "\(user) already has \(node.admission.sessionsPerUser) logged-in connections")
        }
        slot = user
        return nil
    }

    private mutating func releaseSlot() {
        if let slot { node.admission.loggedOut(slot) }
        slot = nil
    }

    private mutating func loginIssued(_ login: Login, _ result: Result<Grant, ServerError>, now: Moment) {
        let grant: Grant
        switch result {
        case .failure(let error): return finish(login.id, .failure(error), now: now)
        case .success(let issued): grant = issued
        }
        if let problem = takeSlot(for: login.user) { return finish(login.id, .failure(problem), now: now) }
        guard phase == .anonymous else {
            if let revocable = grant.revocable { tokens.append(revocable) }
            return finish(login.id, .success(Self.loginOK(login.id, grant)), now: now)
        }
        actions.append(.joinLogins(Join(user: login.user, device: login.device, tokenIssued: grant.issued, purpose: .login(login, grant))))
    }

    private mutating func tokenVerified(_ connect: Connect, _ result: Result<Grant, ServerError>, now: Moment) {
        let token: Grant
        switch result {
        case .failure(let error): return connectFailed(connect.id, error, now: now)
        case .success(let verified): token = verified
        }
        // A token opens a session for the device it was issued to, and no other: a revoked
        // device's token cannot come back under another name.
        guard token.device == connect.device else {
            let reason = "this token was issued to device \(token.device), not \(connect.device); log in on \(connect.device)"
            return connectFailed(connect.id, ServerError(.invalidToken, reason), now: now)
        }
        // A token opens a session only for the user this connection logged in as (if it did).
        if let user = phase.user, user != token.user {
            let reason = "token belongs to another user than \(user), who is logged in on this connection"
            return connectFailed(connect.id, ServerError(.invalidToken, reason), now: now)
        }
        if let problem = takeSlot(for: token.user) { return connectFailed(connect.id, problem, now: now) }
        if let revocable = token.revocable, !tokens.contains(revocable) { tokens.append(revocable) }
        let request = DeliveryEngine.SessionRequest(user: token.user, device: connect.device, tokenIssuedMillis: token.issued,
                                                    lastSeq: connect.lastSeq, takesBundles: connect.bundles, takesEarly: connect.early,
                                                    receivedSeq: connect.receivedSeq)
        actions.append(.run(.openSession(id: connect.id, request)))
    }

    private mutating func sessionOpened(_ id: UInt64, _ request: DeliveryEngine.SessionRequest,
                                        _ result: Result<Simp_ConnectResponse, ServerError>, now: Moment) {
        switch result {
        case .failure(let error): connectFailed(id, error, now: now)
        case .success(let response) where phase == .closed:
            actions.append(.router(.closeSession(response.sessionID)))
            connectFailed(id, ServerError(.notConnected, "the connection closed"), now: now)
        case .success(let response):
            // The store took the device before a revocation was written, which then closed
            // the device's logins before this one joined them: the revocation wins (`loginsJoined`).
            actions.append(.joinLogins(Join(user: request.user, device: response.device, tokenIssued: request.tokenIssuedMillis,
                                            purpose: .connect(id: id, response))))
        }
    }

    private mutating func loginsJoined(_ join: Join, _ joined: Bool, now: Moment) {
        let closed = phase == .closed
        // Closed while joining: the table must not keep a connection that is gone.
        if joined, closed { actions.append(.leaveLogins(user: join.user)) }
        switch join.purpose {
        case .login(let login, let grant):
            guard joined, !closed else {
                releaseSlot()
                let error = closed ? ServerError(.notConnected, "the connection closed") : .deviceRevoked(join.device, of: join.user)
                return finish(login.id, .failure(error), now: now)
            }
            device = join.device
            phase = .authenticated(user: join.user)
            if let revocable = grant.revocable { tokens.append(revocable) }
            finish(login.id, .success(Self.loginOK(login.id, grant)), now: now)
        case .connect(let id, let response):
            guard joined, !closed else {
                actions.append(.router(.closeSession(response.sessionID)))
                let error = closed ? ServerError(.notConnected, "the connection closed") : .deviceRevoked(response.device, of: join.user)
                return connectFailed(id, error, now: now)
            }
            device = join.device
            phase = .connected(user: join.user, session: response.sessionID)
            flags.remove(.connecting)
            finish(id, .success(Simp_Envelope(requestID: id, .connected(response))), now: now)
        }
    }

    private mutating func connectFailed(_ id: UInt64, _ error: ServerError, now: Moment) {
        flags.remove(.connecting)
        finish(id, .failure(error), now: now)
    }

    private static func loginOK(_ id: UInt64, _ grant: Grant) -> Simp_Envelope {
        var response = Simp_LoginResponse()
        response.token = grant.token
        response.expiresAt = grant.expiresAt
        return Simp_Envelope(requestID: id, .loginOk(response))
    }
}

// MARK: requests

extension ControlMachine {
    private mutating func request(_ envelope: Simp_Envelope, now: Moment) {
        let id = envelope.requestID
        switch envelope.body {
        case .register(let request):
            start(.register(id: id, user: request.user, password: request.password, source: source ?? "unknown"))
        case .login(let request): login(id, request, now: now)
        case .connect(let request): connect(id, request, now: now)
        case .ping(let ping):
            var pong = Simp_Pong()
            pong.nonce = ping.nonce
            actions += [.keepalive, .send(Simp_Envelope(requestID: id, .pong(pong)))]
        case .pong: actions.append(.keepalive)
        case .receipt(let receipt): forSession(id, "receipt") { .receipt(session: $0, receipt) }
        case .withdraw(let withdraw): forSession(id, "withdraw") { .withdraw(session: $0, withdraw) }
        case .pathResponse(let response): forSession(id, "path response") { .pathResponse(session: $0, token: Array(response.token)) }
        case .datagram(let bytes): forSession(id, "datagram") { .datagram(session: $0, bytes) }
        case .query(let query): self.query(id, query)
        case .history(let request): history(id, request)
        case .logout(let request): logout(id, all: request.all, now: now)
        case .changePassword(let request):
            guard let user = loggedIn(id) else { return }
            start(.changePassword(id: id, user: user, old: request.oldPassword, new: request.newPassword,
                                  device: device ?? DeviceName.unnamed, source: source ?? "unknown", millis: now.millis))
        case .devices:
            guard let user = loggedIn(id) else { return }
            start(.devices(id: id, user: user, millis: now.millis))
        case .revokeDevice(let request): revokeDevice(id, request, now: now)
        case .groupRequest(let request): group(id, request, now: now)
        case .contactRequest(let request): contact(id, request, now: now)
        case .settingsRequest(let request): settings(id, request)
        case .markRead(let request): markRead(id, request, now: now)
        case .presence:
            guard let user = loggedIn(id) else { return }
            start(.presenceCircle(id: id, user: user))
        case .publishIdentity, .publishDevice, .uploadKeyPackages, .keyDirectory, .claimKeyPackages: keys(id, envelope, now: now)
        case .submitCommit, .fetchCommits: commits(id, envelope, now: now)
        case .linkStep, .linkFetch: links(id, envelope, now: now)
        case .none: reply(.error(.badRequest, "envelope without a body", requestID: id))
        default: reply(.error(.badRequest, "a client does not send \(Self.name(envelope.body))", requestID: id))
        }
    }

    /// The user this connection logged in as; nil, and the request refused, before a login.
    private mutating func loggedIn(_ id: UInt64) -> String? {
        guard let user = phase.user else {
            reply(.error(.notAuthenticated, "log in first", requestID: id))
            return nil
        }
        return user
    }

    /// The session this connection opened; nil, and the request refused, before CONNECT.
    private mutating func connected(_ id: UInt64, _ what: String) -> (user: String, session: UInt64)? {
        guard case .connected(let user, let session) = phase else {
            reply(.error(.notConnected, "\(what) before CONNECT", requestID: id))
            return nil
        }
        return (user, session)
    }

    /// Session-level requests go to the router, unanswered here; before CONNECT they are refused.
    private mutating func forSession(_ id: UInt64, _ what: String, _ call: (UInt64) -> RouterCall) {
        guard let (_, session) = connected(id, what) else { return }
        actions.append(.router(call(session)))
    }

    /// A request's device name, "default" when empty; nil when it is no device name.
    private static func device(named name: String) -> String? {
        let device = name.isEmpty ? DeviceName.unnamed : name
        return DeviceName.isValid(device) ? device : nil
    }

    private static let deviceNameRule = "a device name is 1-\(DeviceName.maxBytes) of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"

    private mutating func login(_ id: UInt64, _ request: Simp_LoginRequest, now: Moment) {
        if let slot, slot != request.user {
            return reply(.error(.badRequest, "this connection is logged in as \(slot); open another for \(request.user)", requestID: id))
        }
        guard let device = Self.device(named: request.device) else { return reply(.error(.invalidName, Self.deviceNameRule, requestID: id)) }
        start(.login(Login(id: id, user: request.user, device: device), password: request.password, source: source ?? "unknown",
                     millis: now.millis))
    }

    private mutating func connect(_ id: UInt64, _ request: Simp_ConnectRequest, now: Moment) {
        if case .connected = phase { return reply(.error(.badRequest, "already connected on this control connection", requestID: id)) }
        guard !flags.contains(.connecting) else {
            return reply(.error(.badRequest, "a CONNECT is already in progress on this connection", requestID: id))
        }
        guard let device = Self.device(named: request.device) else { return reply(.error(.invalidName, Self.deviceNameRule, requestID: id)) }
        flags.insert(.connecting)
        let connect = Connect(id: id, device: device, lastSeq: request.lastSeq, bundles: request.bundles, early: request.early,
                              receivedSeq: request.receivedSeq)
        start(.verifyToken(connect, token: request.token, millis: now.millis))
    }

    /// Revokes this connection's tokens everywhere, ends its session and frees its slot; with
    /// `all`, first makes every token of the user invalid and closes the user's other
    /// connections on every node. Anonymous again: small frames and a deadline to log in.
    private mutating func logout(_ id: UInt64, all: Bool, now: Moment) {
        guard let user = loggedIn(id) else { return }
        if case .connected(_, let session) = phase { actions.append(.router(.closeSession(session))) }
        actions.append(.leaveLogins(user: user))
        releaseSlot()
        phase = .anonymous
        device = nil
        actions.append(.setFrameLimit(node.anonymousFrameLength))
        armLoginDeadline()
        start(.logout(id: id, user: user, all: all, revoking: tokens, millis: now.millis))
        tokens = []
    }

    /// A delivery query: its items' names are checked before any reaches a key, and it counts
    /// against the requests in progress until its answers are written.
    private mutating func query(_ id: UInt64, _ query: Simp_DeliveryQuery) {
        guard let (_, session) = connected(id, "query") else { return }
        if let bad = query.messages.first(where: { !UserName.isValid($0.toUser) && GroupName.addressed(by: $0.toUser) == nil }) {
            return reply(.error(.badRequest, "a query item's toUser is not a user or group name: \(bad.toUser.prefix(64))", requestID: id))
        }
        start(.query(session: session, query))
    }

    private mutating func history(_ id: UInt64, _ request: Simp_HistoryRequest) {
        guard let user = loggedIn(id) else { return }
        let limit = Int(min(max(request.limit, 1), 1000))
        if let group = GroupName.addressed(by: request.peer) {
            return start(.groupHistory(id: id, user: user, group: group, peer: request.peer, before: request.before, limit: limit))
        }
        // The peer is echoed in the answer: an unchecked name could push the page past a frame.
        guard UserName.isValid(request.peer) else { return reply(.error(.badRequest, "history peer is not a valid user name", requestID: id)) }
        start(.history(id: id, user: user, peer: request.peer, before: request.before, limit: limit))
    }

    /// Ends one of the user's devices: every node closes its session (if it has it), and a
    /// token issued before now no longer opens one for it.
    private mutating func revokeDevice(_ id: UInt64, _ request: Simp_RevokeDevice, now: Moment) {
        guard let user = loggedIn(id) else { return }
        guard DeviceName.isValid(request.name) else { return reply(.error(.badRequest, "\(user) has no device \(request.name)", requestID: id)) }
        start(.revokeDevice(Revocation(id: id, user: user, device: request.name, by: device ?? DeviceName.unnamed, millis: now.millis)))
    }

    private mutating func group(_ id: UInt64, _ request: Simp_GroupRequest, now: Moment) {
        guard let user = loggedIn(id) else { return }
        if let problem = GroupRequestRules.problem(in: request, from: user, maxMembers: node.maxGroupMembers) {
            return reply(.error(problem.code, problem.reason, requestID: id))
        }
        start(.group(id: id, user: user, request, millis: now.millis))
    }

    private mutating func contact(_ id: UInt64, _ request: Simp_ContactRequest, now: Moment) {
        guard let user = loggedIn(id) else { return }
        if let (code, reason) = ContactFlow.problem(in: request, from: user) { return reply(.error(code, reason, requestID: id)) }
        start(.contact(id: id, ContactFlow(request, user: user), millis: now.millis))
    }

    /// Reads the user's settings, or changes them; turning contacts-only on stops early pushes.
    private mutating func settings(_ id: UInt64, _ request: Simp_SettingsRequest) {
        guard let user = loggedIn(id) else { return }
        if let problem = request.set.lazy.compactMap({ UserSetting.problem(name: $0.name, value: $0.value) }).first {
            return reply(.error(.badRequest, problem, requestID: id))
        }
        let filtering = request.set.contains { $0.name == UserSetting.contactsOnly.rawValue && $0.value == "on" }
        start(.settings(id: id, user: user, changes: request.set.map { ($0.name, Optional($0.value)) }, filtering: filtering))
    }

    /// Read marks: those the session confirmed and the store finds genuine are told to their
    /// senders (and the reader's other devices) as notices; answered once they are queued.
    private mutating func markRead(_ id: UInt64, _ request: Simp_ReadRequest, now: Moment) {
        guard let (user, session) = connected(id, "markRead") else { return }
        if let problem = ReadReceipts.problem(in: request, from: user) { return reply(.error(.badRequest, problem, requestID: id)) }
        if let problem = ReadReceipts.sealedOnlyProblem(in: request, sealedOnly: node.sealedOnly) {
            return reply(.error(.e2ERequired, problem, requestID: id))
        }
        start(.markRead(id: id, user: user, session: session, request, millis: now.millis))
    }

    /// A key directory request (`KeyFlow`): checked for names, sizes and counts here, then its
    /// steps run in the worker.
    private mutating func keys(_ id: UInt64, _ envelope: Simp_Envelope, now: Moment) {
        guard let user = loggedIn(id), let body = envelope.body, let parsed = KeyFlow.request(from: body) else { return }
        switch parsed {
        case .failure(let refusal): reply(.error(refusal.code, refusal.reason, requestID: id))
        case .success(let request):
            let flow = KeyFlow(request, user: user, device: device ?? DeviceName.unnamed, nowMillis: now.millis,
                               maxDevices: node.maxDevicesPerUser)
            start(.keys(id: id, flow))
        }
    }

    /// A commit request (`CommitFlow`): checked for names, sizes and counts here, then its
    /// steps run in the worker, with the login's device and the request's time.
    private mutating func commits(_ id: UInt64, _ envelope: Simp_Envelope, now: Moment) {
        guard let user = loggedIn(id), let body = envelope.body, let parsed = CommitFlow.request(from: body, user: user) else { return }
        switch parsed {
        case .failure(let refusal): reply(.error(refusal.code, refusal.reason, requestID: id))
        case .success(let request): start(.commits(id: id, CommitFlow(request, user: user, device: device ?? DeviceName.unnamed, nowMillis: now.millis)))
        }
    }

    /// A device link's step or fetch (`LinkFlow`): checked for kind, names, sizes and who may
    /// take the step here, then run in the worker with the login's device.
    private mutating func links(_ id: UInt64, _ envelope: Simp_Envelope, now: Moment) {
        let sender = device ?? DeviceName.unnamed
        guard let user = loggedIn(id), let body = envelope.body, let parsed = LinkFlow.request(from: body, device: sender) else { return }
        switch parsed {
        case .failure(let refusal): reply(.error(refusal.code, refusal.reason, requestID: id))
        case .success(let request): start(.links(id: id, LinkFlow(request: request, user: user, device: sender, nowMillis: now.millis)))
        }
    }

    private static func name(_ body: Simp_Envelope.OneOf_Body?) -> String {
        guard let body else { return "nothing" }
        return String(describing: body).split(separator: "(").first.map(String.init) ?? "that"
    }
}
