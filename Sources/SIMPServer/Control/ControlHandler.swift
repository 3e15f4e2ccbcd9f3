import Foundation
import Logging
import NIOCore
import SIMPCore

/// What a control connection needs from its node.
struct ControlContext: Sendable {
    var accounts: Accounts
    var router: Router
    /// The open control connections, for closing them at shutdown.
    var connections: ChannelRegistry
    /// The connections logged in on this node, by user and device (`LoginTable`).
    var logins: LoginTable
    var admission: Admission
    var metrics: ServerMetrics
    var logger: Logger
    var unreadGrace: TimeAmount
    var requests = RequestGate.Settings()
    /// A connection must log in (or connect with a token) this soon after it opens.
    var loginDeadline: TimeAmount = .seconds(30)
    /// The frame limit once logged in; before that (and after logout) only small frames.
    var maxFrameLength = Frame.defaultMaxLength
    var anonymousFrameLength = 4_096
}

/// A `ControlContext` held by reference, so a connection's handler keeps one word of it.
@dynamicMemberLookup
final class SharedControlContext: Sendable {
    let value: ControlContext

    init(_ value: ControlContext) {
        self.value = value
    }

    subscript<T>(dynamicMember path: KeyPath<ControlContext, T>) -> T { value[keyPath: path] }
}

/// Serves one control connection: register, login, connect, ping, receipts, history, logout.
/// Lives on its channel's event loop; slow work (scrypt, Redis) runs elsewhere and its
/// results come back to the loop. It frames the connection itself (`EnvelopeFramed`) and
/// keeps its heartbeat, so a connection needs no other handler of ours: each one cost every
/// session a pipeline context.
final class ControlHandler: ChannelDuplexHandler, EnvelopeFramed {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = Simp_Envelope
    typealias OutboundOut = ByteBuffer

    /// Boxed, since an envelope is 120 bytes inline and a request is held only while the
    /// gate says wait.
    private indirect enum HeldRequest {
        case request(Simp_Envelope)
    }

    private enum State {
        case anonymous
        case authenticated(user: String)
        case connected(user: String, session: UInt64)
    }

    private var state = State.anonymous
    /// The device this connection logged in or connected for.
    private var device: String?
    /// The source IP counted against its connection limit, once admitted.
    private var admittedIP: String?
    /// The user whose logged-in slot this connection holds.
    private var heldSlot: String?
    /// Tokens this connection logged in or connected with: logout revokes them.
    private var tokens: [RevocableToken] = []
    private var connecting = false
    /// Set when the channel went inactive: answers that arrive later must not take a slot
    /// or open a session nobody would release.
    private var closed = false
    /// Closes the connection if its peer leaves our replies unread for too long.
    private var stuckTimer: Scheduled<Void>?
    private var gate: RequestGate
    /// The request the gate did not let run yet; the framing is paused behind it.
    private var held: HeldRequest?
    private var gateTimer: Scheduled<Void>?
    private var releasing = false
    private var releaseAgain = false
    private var reading = true
    private var loginTimer: Scheduled<Void>?
    /// The node's parts, read through `node` rather than copied: a connection's handler is
    /// held for every session, and each copy cost it a few words.
    private let node: SharedControlContext
    private var accounts: Accounts { node.accounts }
    private var router: Router { node.router }
    private var admission: Admission { node.admission }
    private var metrics: ServerMetrics { node.metrics }
    private var logger: Logger { node.logger }
    private var unreadGrace: TimeAmount { node.unreadGrace }
    /// The connection's framing, whose frame limit rises after login.
    var framing: EnvelopeFraming

    /// The time of an event, read once for it and handed to `RequestGate`.
    static var now: NIODeadline { .now() }

    init(_ node: SharedControlContext, framing: EnvelopeFraming) {
        self.node = node
        self.framing = framing
        self.gate = RequestGate(node.requests, now: Self.now)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        framingAdded(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        framingRemoved()
    }

    func channelActive(context: ChannelHandlerContext) {
        framingActive()
        node.connections.add(context.channel)
        armLoginDeadline(context)
        let ip = context.remoteAddress?.ipAddress ?? "unknown"
        if admission.admitConnection(from: ip) {
            admittedIP = ip
        } else {
            let error = Simp_Envelope.error(.tooManyConnections, "more than \(admission.connectionsPerIP) connections from \(ip)")
            let channel = context.channel
            let sent = context.eventLoop.makePromise(of: Void.self)
            send(context, error, promise: sent)
            sent.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        framingRead(context, unwrapInboundIn(data))
    }

    /// Replies and pushes from elsewhere (the router) are framed here too.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        send(context, unwrapOutboundIn(data), flush: false, promise: promise)
    }

    func received(_ envelope: Simp_Envelope, context: ChannelHandlerContext) {
        let now = Self.now
        guard held == nil, admit(envelope, now: now) else {
            hold(context, envelope, now: now)
            return
        }
        handle(context, envelope)
    }

    /// The connection's gate, then, once logged in, the user's rate over all its connections;
    /// both charge the request what it makes the node do.
    private func admit(_ envelope: Simp_Envelope, now: NIODeadline) -> Bool {
        let cost = RequestCost.of(envelope)
        guard gate.admit(cost: cost, now: now) else { return false }
        guard let user = heldSlot else { return true }
        return admission.takeRequest(of: user, cost: cost, now: now)
    }

    /// Charges work a request turned out to cost once it was done (`RequestCost.presenceRead`):
    /// the connection's and the user's next requests wait for it.
    private func charge(_ extra: Int) {
        let now = Self.now
        gate.charge(extra, now: now)
        if let user = heldSlot { admission.charge(user, extra, now: now) }
    }

    private func hold(_ context: ChannelHandlerContext, _ envelope: Simp_Envelope, now: NIODeadline) {
        assert(held == nil, "the framing hands out nothing while a request is held")
        held = .request(envelope)
        pauseFraming()
        // Counted once per pause for the rate (not for answers being worked out or unread replies).
        if gate.rateWait(cost: RequestCost.of(envelope), now: now) != nil { metrics.exceeded(.controlRequests) }
        updateReading(context, now: now)
    }

    private func handle(_ context: ChannelHandlerContext, _ envelope: Simp_Envelope) {
        let id = envelope.requestID
        switch envelope.body {
        case .register(let request): register(context, id, request)
        case .login(let request): login(context, id, request)
        case .connect(let request): connect(context, id, request)
        case .ping(let ping):
            metrics.keepalives.increment()
            var pong = Simp_Pong()
            pong.nonce = ping.nonce
            send(context, Simp_Envelope(requestID: id, .pong(pong)))
        case .pong: metrics.keepalives.increment()
        case .receipt(let receipt): forSession(context, id, "receipt") { $0.receipt(sessionID: $1, receipt) }
        case .history(let request): history(context, id, request)
        case .withdraw(let request): forSession(context, id, "withdraw") { $0.withdraw(sessionID: $1, request) }
        case .query(let query): self.query(context, id, query)
        case .pathResponse(let response):
            let token = Array(response.token)
            forSession(context, id, "path response") { $0.pathResponse(sessionID: $1, token: token) }
        case .logout(let request): logout(context, id, all: request.all)
        case .changePassword(let request): changePassword(context, id, request)
        case .devices: devices(context, id)
        case .revokeDevice(let request): revokeDevice(context, id, request)
        case .groupRequest(let request): group(context, id, request)
        case .contactRequest(let request): contact(context, id, request)
        case .settingsRequest(let request): settings(context, id, request)
        case .markRead(let request): markRead(context, id, request)
        case .presence: presence(context, id)
        case .none: reply(context, .error(.badRequest, "envelope without a body", requestID: id))
        default: reply(context, .error(.badRequest, "a client does not send \(Self.name(envelope.body))", requestID: id))
        }
    }

    /// Runs the held request if the gate now lets it, then lets the framing go on; called when
    /// an answer is written, the rate allows one more, or the peer reads again.
    private func release(_ context: ChannelHandlerContext) {
        guard !releasing else {
            releaseAgain = true
            return
        }
        releasing = true
        let now = Self.now
        repeat {
            releaseAgain = false
            if case .request(let envelope)? = held {
                guard !closed, admit(envelope, now: now) else { break }
                held = nil
                handle(context, envelope)
            }
            if held == nil { resumeFraming() }
        } while releaseAgain && !closed
        releasing = false
        updateReading(context, now: now)
    }

    private func updateReading(_ context: ChannelHandlerContext, now: NIODeadline) {
        guard !closed else { return }
        let read = held == nil && gate.writable
        if read != reading {
            reading = read
            context.channel.setOption(.autoRead, value: read).whenFailure { _ in }
        }
        guard case .request(let envelope)? = held, gateTimer == nil,
              let wait = gate.rateWait(cost: RequestCost.of(envelope), now: now) else { return }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        gateTimer = context.eventLoop.scheduleTask(in: wait) {
            let (handler, context) = bound.value
            handler.gateTimer = nil
            handler.release(context)
        }
    }

    /// A connection that has not logged in by the deadline is closed: an anonymous
    /// connection costs a descriptor and memory, and gives nothing back.
    private func armLoginDeadline(_ context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let deadline = node.loginDeadline
        loginTimer = context.eventLoop.scheduleTask(in: deadline) {
            let (handler, context) = bound.value
            guard handler.authenticatedUser == nil else { return }
            handler.metrics.exceeded(.loginDeadline)
            let error = Simp_Envelope.error(.notAuthenticated, "log in within \(deadline.nanoseconds / 1_000_000_000) s of connecting; closing")
            let channel = context.channel
            let sent = context.eventLoop.makePromise(of: Void.self)
            handler.send(context, error, promise: sent)
            sent.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// Once the peer has proven who it is, it may send frames up to the full limit.
    private func authenticated() {
        loginTimer?.cancel()
        loginTimer = nil
        framing.maxFrameLength = node.maxFrameLength
    }

    func heartbeatDue(_ event: IdleStateHandler.IdleStateEvent) {
        guard let context = framing.context else { return }
        switch event {
        case .write:
            var ping = Simp_Ping()
            ping.nonce = UInt64.random(in: 0...UInt64.max)
            send(context, Simp_Envelope(.ping(ping)))
        case .read:
            logger.info("control peer silent for longer than the heartbeat allows; closing", metadata: logMetadata)
            context.close(promise: nil)
        case .all: break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        framingInactive()
        node.connections.remove(context.channel)
        closed = true
        stuckTimer?.cancel()
        gateTimer?.cancel()
        loginTimer?.cancel()
        endSession()
        leaveLogins()
        releaseSlot()
        if let ip = admittedIP { admission.connectionClosed(from: ip) }
        admittedIP = nil
        context.fireChannelInactive()
    }

    /// A peer that does not read what we write: stop reading its requests (so replies cannot
    /// pile up in memory) and drop it if it stays that way.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        gate.writable = writable
        release(context)
        if writable {
            stuckTimer?.cancel()
            stuckTimer = nil
        } else if stuckTimer == nil {
            let channel = context.channel
            let metrics = self.metrics
            stuckTimer = context.eventLoop.scheduleTask(in: unreadGrace) {
                metrics.exceeded(.outputBacklog)
                channel.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("control connection error", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
        context.close(promise: nil)
    }

    func framingFailed(_ error: FrameError, context: ChannelHandlerContext) {
        logger.debug("control connection error", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
        if case .tooLarge = error { metrics.exceeded(.frameSize) }
        if case .incomplete = error { metrics.exceeded(.frameDeadline) }
    }

    private func endSession() {
        guard case .connected(_, let session) = state else { return }
        router.loop.execute { [router] in router.closeSession(session) }
    }

    /// This connection's number in the node's `LoginTable`.
    private var number: LoginTable.Connection { LoginTable.number(of: self) }

    /// Notes this connection as logged in as `user` for `device` with a token issued at
    /// `tokenIssued`, so that ending the user's logins (or revoking the device) closes it.
    /// False when a revocation of the device that ends the token was heard already: it came
    /// after the token was checked, and its closes could not find this connection.
    private func joinLogins(_ channel: any Channel, user: String, device: String, tokenIssued: Int64) -> Bool {
        guard node.logins.loggedIn(number, user: user, device: device, tokenIssued: tokenIssued, channel: channel) else { return false }
        self.device = device
        return true
    }

    private func leaveLogins() {
        if let user = authenticatedUser { node.logins.loggedOut(number, user: user) }
    }

    private func releaseSlot() {
        if let user = heldSlot { admission.loggedOut(user) }
        heldSlot = nil
    }

    /// Takes the user's logged-in slot for this connection, unless the user has too many.
    private func takeSlot(for user: String) throws(ServerError) {
        guard !closed else { throw ServerError(.notConnected, "the connection closed") }
        guard heldSlot != user else { return }
        guard heldSlot == nil else {
            throw ServerError(.badRequest, "this connection is logged in as \(heldSlot!); open another for \(user)")
        }
        guard admission.admitLogin(of: user) else {
            throw ServerError(.tooManySessions, "\(user) already has \(admission.sessionsPerUser) logged-in connections")
        }
        heldSlot = user
    }

    // MARK: requests

    private func register(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_RegisterRequest) {
        let future = accounts.register(user: request.user, password: request.password, source: admittedIP ?? "unknown",
                                       on: context.eventLoop).map {
            Simp_Envelope(requestID: id, .ok(Simp_Ok()))
        }
        respond(context, id, future)
    }

    private func login(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_LoginRequest) {
        let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
        let channel = context.channel
        if let held = heldSlot, held != request.user {
            reply(context, .error(.badRequest, "this connection is logged in as \(held); open another for \(request.user)", requestID: id))
            return
        }
        guard let device = Self.device(named: request.device) else {
            reply(context, .error(.invalidName, Self.deviceNameRule, requestID: id))
            return
        }
        let future = accounts.login(user: request.user, password: request.password, device: device, source: admittedIP ?? "unknown",
                                    on: context.eventLoop).flatMapThrowing { token -> Simp_Envelope in
            let handler = loop.value
            try handler.takeSlot(for: request.user)
            if case .anonymous = handler.state {
                let issued = handler.accounts.issuedMillis(expiringAt: token.expiresAt)
                guard handler.joinLogins(channel, user: request.user, device: device, tokenIssued: issued) else {
                    handler.releaseSlot()
                    throw ServerError.deviceRevoked(device, of: request.user)
                }
                handler.state = .authenticated(user: request.user)
            }
            if let verified = handler.accounts.parse(token: token.token) { handler.tokens.append(verified.revocable) }
            var response = Simp_LoginResponse()
            response.token = token.token
            response.expiresAt = token.expiresAt
            return Simp_Envelope(requestID: id, .loginOk(response))
        }
        respond(context, id, future)
    }

    private func connect(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_ConnectRequest) {
        if case .connected = state {
            reply(context, .error(.badRequest, "already connected on this control connection", requestID: id))
            return
        }
        guard !connecting else {
            reply(context, .error(.badRequest, "a CONNECT is already in progress on this connection", requestID: id))
            return
        }
        guard let device = Self.device(named: request.device) else {
            reply(context, .error(.invalidName, Self.deviceNameRule, requestID: id))
            return
        }
        connecting = true
        let channel = context.channel
        let accounts = self.accounts
        let router = self.router
        let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
        let future = accounts.verify(token: request.token, on: context.eventLoop).flatMapThrowing { token -> VerifiedToken in
            // A token opens a session for the device it was issued to, and no other: a revoked
            // device's token cannot come back under another name.
            guard token.device == device else {
                throw ServerError(.invalidToken, "this token was issued to device \(token.device), not \(device); log in on \(device)")
            }
            try loop.value.admit(token)
            return token
        }.flatMap { token in
            let issued = accounts.issuedMillis(of: token)
            let wanted = DeliveryEngine.SessionRequest(user: token.user, device: device, tokenIssuedMillis: issued,
                                               lastSeq: request.lastSeq, takesBundles: request.bundles, takesEarly: request.early)
            return router.loop.flatSubmit { router.openSession(wanted, control: channel) }.hop(to: channel.eventLoop).flatMapThrowing { response -> Simp_Envelope in
                guard !loop.value.closed else {
                    router.loop.execute { router.closeSession(response.sessionID) }
                    throw ServerError(.notConnected, "the connection closed")
                }
                // The store took the device before a revocation was written, which then closed
                // the device's logins before this one joined them: the revocation wins.
                guard loop.value.joinLogins(channel, user: token.user, device: response.device, tokenIssued: issued) else {
                    router.loop.execute { router.closeSession(response.sessionID) }
                    throw ServerError.deviceRevoked(response.device, of: token.user)
                }
                loop.value.state = .connected(user: token.user, session: response.sessionID)
                return Simp_Envelope(requestID: id, .connected(response))
            }
        }
        future.whenComplete { _ in loop.value.connecting = false }
        respond(context, id, future)
    }

    private func devices(_ context: ChannelHandlerContext, _ id: UInt64) {
        guard let user = loggedIn(context, id) else { return }
        let future = router.store.devices(of: user, nowMillis: Accounts.nowMillis(), on: context.eventLoop).map { devices in
            var list = Simp_DeviceList()
            list.devices = devices
            return Simp_Envelope(requestID: id, .deviceList(list))
        }
        respond(context, id, future)
    }

    /// Ends one of the user's devices: every node closes its session (if it has it), and a
    /// token issued before now no longer opens one for it.
    private func revokeDevice(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_RevokeDevice) {
        guard let user = loggedIn(context, id) else { return }
        guard DeviceName.isValid(request.name) else {
            reply(context, .error(.badRequest, "\(user) has no device \(request.name)", requestID: id))
            return
        }
        let (router, logins, metrics) = (self.router, node.logins, self.metrics)
        let revoker = device ?? DeviceName.unnamed
        // One time for Redis, this node's table and the announcement: each ends the same tokens.
        let revokedAt = Accounts.nowMillis()
        let future = router.store.revokeDevice(user: user, device: request.name, nowMillis: revokedAt, on: context.eventLoop)
            .flatMapThrowing { found -> Simp_Envelope in
                guard found != nil else { throw ServerError(.badRequest, "\(user) has no device \(request.name)") }
                // Here at once; on every node (this one again, harmlessly) through the admin channel.
                let closed = logins.revoked(user: user, device: request.name, at: revokedAt,
                                            with: .error(.sessionClosed, "this device was revoked from \(user)'s device \(revoker)"))
                metrics.loginsEnded.increment(by: Int64(closed))
                router.store.announce(.endDevice(user: user, device: request.name, by: revoker, at: revokedAt), on: router.loop)
                return Simp_Envelope(requestID: id, .ok(Simp_Ok()))
            }
        respond(context, id, future)
    }

    /// A group request: LIST and MEMBERS are reads; the changes go through the router's loop,
    /// which copies their entries into the members' inboxes before the answer.
    private func group(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_GroupRequest) {
        guard let user = loggedIn(context, id) else { return }
        if let problem = GroupRequestRules.problem(in: request, from: user, maxMembers: router.store.settings.maxGroupMembers) {
            reply(context, .error(problem.code, problem.reason, requestID: id))
            return
        }
        let router = self.router
        let loop = context.eventLoop
        let future: EventLoopFuture<Simp_Envelope>
        switch request.action {
        case .list:
            let groups = router.store.groups(of: user, on: loop)
            let invitations = router.store.invitations(of: user, .list, nowMillis: Accounts.nowMillis(), on: loop)
            future = groups.and(invitations).map { groups, invitations in
                var answer = Simp_GroupAnswer()
                answer.groups = groups
                answer.invitations = invitations
                return Simp_Envelope(requestID: id, .groupAnswer(answer))
            }
        case .members:
            future = router.store.groupMembers(request.group, on: loop).flatMapThrowing { members in
                guard let members else { throw ServerError(.noSuchGroup, "no such group: #\(request.group)") }
                guard members.contains(where: { $0.name == user }) else { throw ServerError(.notAMember, "you are not a member of #\(request.group)") }
                var answer = Simp_GroupAnswer()
                answer.group = request.group
                answer.members = members
                return Simp_Envelope(requestID: id, .groupAnswer(answer))
            }
        case .create, .add:
            future = addToGroup(request, by: user, id: id)
        case .accept, .decline:
            future = answerInvitation(request, by: user, id: id)
        default:
            future = changeGroup(request, by: user, id: id)
        }
        respond(context, id, future)
    }

    /// A create or add: each user named is added, invited, or (it blocked the adder) neither,
    /// by where it stands toward the adder (`GroupConsent`); the invited get a GROUP_INVITED
    /// notice on every device.
    private func addToGroup(_ request: Simp_GroupRequest, by user: String, id: UInt64) -> EventLoopFuture<Simp_Envelope> {
        let router = self.router
        let action = GroupRequestRules.action(of: request)
        let nowMillis = Accounts.nowMillis()
        let (maxMembers, maxGroups) = (router.store.settings.maxGroupMembers, router.store.settings.maxGroupsPerUser)
        // Each user once, in the order named: a name twice would make two entries.
        var seen: Set<String> = [user]
        let others = request.users.filter { seen.insert($0).inserted }
        let creates = action == .create
        let reads = (creates ? [user] : []) + others
        return router.store.groupStanding(of: reads, toward: user, on: router.loop).flatMap { standings in
            var standings = standings
            if creates, let problem = GroupConsent.joinProblem(groups: standings.removeFirst()?.groups ?? 0, maxGroups: maxGroups) {
                return router.loop.makeFailedFuture(problem)
            }
            switch GroupConsent.plan(others, standings: standings, maxGroups: maxGroups) {
            case .failure(let refusal):
                return router.loop.makeFailedFuture(refusal)
            case .success(let plan):
                return router.changeGroup(action, group: request.group, by: user, users: (creates ? [user] : []) + plan.added,
                                          invited: plan.invited, maxMembers: maxMembers, nowMillis: nowMillis).map { ($0, plan) }
            }
        }.flatMapThrowing { (result: MessageStore.GroupChangeResult, plan: GroupConsent.Plan) -> Simp_Envelope in
            switch result {
            case .refused(let code):
                throw ServerError(code, GroupRequestRules.reason(code, group: request.group, max: maxMembers))
            case .changed(let changes, let members, let invited):
                Self.tellInvited(invited, group: request.group, by: user, nowMillis: nowMillis, router: router)
                let answered = Set(invited).union(plan.dropped)
                var answer = Simp_GroupAnswer()
                answer.group = request.group
                answer.members = members
                answer.invited = others.filter { answered.contains($0) }
                answer.groupSeq = changes.map(\.seq).max() ?? 0
                return Simp_Envelope(requestID: id, .groupAnswer(answer))
            }
        }
    }

    /// Each user invited now: the invitation in its list, then a notice on every device.
    private static func tellInvited(_ invited: [String], group: String, by user: String, nowMillis: Int64, router: Router) {
        let lapses = nowMillis + GroupConsent.invitationLifetime
        for invitee in invited {
            let notice = StoreRequest.notice(.groupInvited, from: user, to: invitee, owner: invitee, content: GroupName.address(group),
                                             id: UInt64.random(in: 1...UInt64.max), nowMillis: nowMillis)
            router.store.invitations(of: invitee, .record(group: group, by: user, lapses: lapses), nowMillis: nowMillis, on: router.loop)
                .whenComplete { _ in router.notify(notice) }
        }
    }

    /// An accept (the user joins, unless it is in as many groups as it may be) or a decline of
    /// the user's invitation; either way the invitation leaves its list.
    private func answerInvitation(_ request: Simp_GroupRequest, by user: String, id: UInt64) -> EventLoopFuture<Simp_Envelope> {
        let router = self.router
        let action = GroupRequestRules.action(of: request)
        let nowMillis = Accounts.nowMillis()
        let (maxMembers, maxGroups) = (router.store.settings.maxGroupMembers, router.store.settings.maxGroupsPerUser)
        // Who invited the user: its entry says they added it (else it would read as a create).
        let inviter: EventLoopFuture<String?> = action == .accept
            ? router.store.groupStanding(of: [user], toward: user, on: router.loop).flatMapThrowing { standings in
                if let problem = GroupConsent.joinProblem(groups: standings.first??.groups ?? 0, maxGroups: maxGroups) { throw problem }
            }.flatMap {
                router.store.invitations(of: user, .list, nowMillis: nowMillis, on: router.loop).map { list in
                    list.first { $0.group == request.group }?.by
                }
            }
            : router.loop.makeSucceededFuture(nil)
        return inviter.flatMap { by in
            router.changeGroup(action, group: request.group, by: user, entryBy: by, users: [user], maxMembers: maxMembers, nowMillis: nowMillis)
        }.flatMap { result -> EventLoopFuture<MessageStore.GroupChangeResult> in
            // The list's copy goes whatever the group's record said (lapsed, or the group gone).
            router.store.invitations(of: user, .forget(group: request.group), nowMillis: nowMillis, on: router.loop).map { _ in result }
        }.flatMapThrowing { result -> Simp_Envelope in
            switch result {
            case .refused(let code):
                throw ServerError(code, GroupRequestRules.reason(code, group: request.group, max: maxMembers))
            case .changed(let changes, let members, _):
                var answer = Simp_GroupAnswer()
                answer.group = request.group
                answer.members = action == .accept ? members : []
                answer.groupSeq = changes.map(\.seq).max() ?? 0
                return Simp_Envelope(requestID: id, .groupAnswer(answer))
            }
        }
    }

    /// A remove, leave or admin.
    private func changeGroup(_ request: Simp_GroupRequest, by user: String, id: UInt64) -> EventLoopFuture<Simp_Envelope> {
        let router = self.router
        let action = GroupRequestRules.action(of: request)
        let nowMillis = Accounts.nowMillis()
        // Each user once, in the order named: a name twice would make two entries.
        var seen = Set<String>()
        let users = (action == .leave ? [user] : request.users).filter { seen.insert($0).inserted }
        let max = router.store.settings.maxGroupMembers
        return router.loop.flatSubmit { router.changeGroup(action, group: request.group, by: user, users: users, maxMembers: max, nowMillis: nowMillis) }
            .flatMapThrowing { (result: MessageStore.GroupChangeResult) -> Simp_Envelope in
                switch result {
                case .refused(let code):
                    throw ServerError(code, GroupRequestRules.reason(code, group: request.group, max: max))
                case .changed(let changes, let members, _):
                    var answer = Simp_GroupAnswer()
                    answer.group = request.group
                    answer.members = action == .leave ? [] : members
                    answer.groupSeq = changes.map(\.seq).max() ?? 0
                    return Simp_Envelope(requestID: id, .groupAnswer(answer))
                }
            }
    }

    /// A contact request: its steps (`ContactFlow`) run one after another, each on one user's records.
    private func contact(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_ContactRequest) {
        guard let user = loggedIn(context, id) else { return }
        if let (code, reason) = ContactFlow.problem(in: request, from: user) {
            reply(context, .error(code, reason, requestID: id))
            return
        }
        var flow = ContactFlow(request, user: user)
        let first = flow.start()
        let future = Self.carryOut(first, flow, router: router, on: context.eventLoop).map { answer in
            Simp_Envelope(requestID: id, .contactAnswer(answer))
        }
        respond(context, id, future)
    }

    private static func carryOut(_ next: ContactFlow.Next, _ flow: ContactFlow, router: Router,
                                 on loop: any EventLoop) -> EventLoopFuture<Simp_ContactAnswer> {
        var flow = flow
        switch next {
        case .run(let step, let owner, let peer):
            let current = flow
            return router.store.contactStep(step, owner: owner, peer: peer, on: loop).flatMap { result in
                var flow = current
                let next = flow.finished(step, owner: owner, result)
                return carryOut(next, flow, router: router, on: loop)
            }
        case .notify(let type, let from, let to):
            let notice = ContactFlow.notice(type, from: from, to: to, id: UInt64.random(in: 1...UInt64.max), nowMillis: Accounts.nowMillis())
            router.loop.execute { router.notify(notice) }
            let after = flow.next()
            return carryOut(after, flow, router: router, on: loop)
        case .filtered(let nodes):
            let user = flow.user
            let after = flow.next()
            let rest = flow
            // Done before the answer: the loop may read a datagram before a task queued
            // earlier, and the blocked sender's next message must not go early.
            return router.loop.submit { router.filtered(user: user, nodes: nodes) }.hop(to: loop).flatMap {
                carryOut(after, rest, router: router, on: loop)
            }
        case .answer(let answer):
            return loop.makeSucceededFuture(answer)
        case .refuse(let code, let reason):
            return loop.makeFailedFuture(ServerError(code, reason))
        }
    }

    /// Read marks: those the session confirmed and the store finds genuine are told to their
    /// senders (and the reader's other devices) as notices; answered once they are queued.
    private func markRead(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_ReadRequest) {
        guard case .connected(let user, let session) = state else {
            reply(context, .error(.notConnected, "markRead before CONNECT", requestID: id))
            return
        }
        if let problem = ReadReceipts.problem(in: request, from: user) {
            reply(context, .error(.badRequest, problem, requestID: id))
            return
        }
        let router = self.router
        let future = router.loop.submit { router.reader(of: session) }.flatMap { reader -> EventLoopFuture<Void> in
            guard let reader else { return router.loop.makeFailedFuture(ServerError(.notConnected, "the session ended")) }
            let marks = ReadReceipts.delivered(request, reader: reader)
            return router.store.genuineReads(marks, reader: user, on: router.loop).flatMap { genuine in
                let senders = Array(Set(genuine.map(\.fromUser)))
                return router.store.takingReadReceipts(senders, from: user, on: router.loop).map { taking in
                    let notices = ReadReceipts.notices(genuine, reader: reader, sendersTakingReceipts: taking,
                                                       ids: { UInt64.random(in: 1...UInt64.max) }, nowMillis: Accounts.nowMillis())
                    for notice in notices { router.notify(notice) }
                }
            }
        }.map { Simp_Envelope(requestID: id, .ok(Simp_Ok())) }
        respond(context, id, future)
    }

    /// The presence of the user's contacts and group members, as each lets the user see it.
    private func presence(_ context: ChannelHandlerContext, _ id: UInt64) {
        guard let user = loggedIn(context, id) else { return }
        let store = router.store
        let loop = context.eventLoop
        let handler = NIOLoopBound(self, eventLoop: loop)
        let future = store.presenceCircle(of: user, ignoringOwnSetting: true, on: loop).flatMap { circle in
            handler.value.charge(RequestCost.presenceRead(groups: circle.groups, users: circle.users.count))
            return store.presence(of: circle.users, seenBy: user, nowMillis: Accounts.nowMillis(), on: loop)
        }.map { users in
            var answer = Simp_PresenceAnswer()
            answer.users = users
            return Simp_Envelope(requestID: id, .presenceAnswer(answer))
        }
        respond(context, id, future)
    }

    /// Reads the user's settings, or changes them; turning contacts-only on stops early pushes.
    private func settings(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_SettingsRequest) {
        guard let user = loggedIn(context, id) else { return }
        if let problem = request.set.lazy.compactMap({ UserSetting.problem(name: $0.name, value: $0.value) }).first {
            reply(context, .error(.badRequest, problem, requestID: id))
            return
        }
        let router = self.router
        let changes = request.set.map { ($0.name, Optional($0.value)) }
        let filtering = request.set.contains { $0.name == UserSetting.contactsOnly.rawValue && $0.value == "on" }
        let loop = context.eventLoop
        let future = router.store.settings(of: user, changing: changes, on: loop).flatMap { stored in
            // Before the answer, as for a block (`carryOut`).
            let applied = filtering ? router.loop.submit { router.filtered(user: user, nodes: stored.nodes) }.hop(to: loop)
                : loop.makeSucceededVoidFuture()
            return applied.map { stored }
        }.map { stored in
            var answer = Simp_SettingsAnswer()
            answer.settings = UserSetting.allCases.map { setting in
                var item = Simp_Setting()
                item.name = setting.rawValue
                item.value = stored.settings[setting.rawValue] ?? setting.defaultValue
                return item
            }
            return Simp_Envelope(requestID: id, .settingsAnswer(answer))
        }
        respond(context, id, future)
    }

    /// The user this connection logged in as; nil, and the request refused, before a login.
    private func loggedIn(_ context: ChannelHandlerContext, _ id: UInt64) -> String? {
        guard let user = authenticatedUser else {
            reply(context, .error(.notAuthenticated, "log in first", requestID: id))
            return nil
        }
        return user
    }

    /// A token opens a session only for the user this connection logged in as (if it did).
    private func admit(_ token: VerifiedToken) throws(ServerError) {
        if let user = authenticatedUser, user != token.user {
            throw ServerError(.invalidToken, "token belongs to another user than \(user), who is logged in on this connection")
        }
        try takeSlot(for: token.user)
        if !tokens.contains(token.revocable) { tokens.append(token.revocable) }
    }

    /// Revokes this connection's tokens everywhere, ends its session and frees its slot; with
    /// `all`, first makes every token of the user invalid and closes the user's other
    /// connections on every node.
    private func logout(_ context: ChannelHandlerContext, _ id: UInt64, all: Bool) {
        guard let user = loggedIn(context, id) else { return }
        let ended = all ? endOtherLogins(of: user, .logout, on: context.eventLoop) : context.eventLoop.makeSucceededVoidFuture()
        endSession()
        leaveLogins()
        releaseSlot()
        state = .anonymous
        device = nil
        // Anonymous again: small frames and a deadline to log in, as for a new connection.
        framing.maxFrameLength = node.anonymousFrameLength
        armLoginDeadline(context)
        let revoked = tokens
        tokens = []
        let (accounts, loop) = (self.accounts, context.eventLoop)
        let future = ended.flatMap { accounts.revoke(revoked, on: loop) }.map { Simp_Envelope(requestID: id, .ok(Simp_Ok())) }
        respond(context, id, future)
    }

    /// Makes every token of the user issued before now invalid, then closes the user's other
    /// connections here at once and on the other nodes through the admin channel.
    private func endOtherLogins(of user: String, _ why: AdminRequest.LoginEnd, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let (logins, router, number, metrics) = (node.logins, router, number, metrics)
        return accounts.endLogins(of: user, on: loop).map {
            Self.closeOtherLogins(of: user, why, except: number, logins: logins, router: router, metrics: metrics)
        }
    }

    private static func closeOtherLogins(of user: String, _ why: AdminRequest.LoginEnd, except number: LoginTable.Connection,
                                         logins: LoginTable, router: Router, metrics: ServerMetrics) {
        let closed = logins.close(user: user, except: number, with: .error(.sessionClosed, why.reason))
        metrics.loginsEnded.increment(by: Int64(closed))
        router.store.announce(.endLogins(user: user, why: why, node: router.store.settings.nodeID, connection: number), on: router.loop)
    }

    /// A new password, when the old one is right: every earlier token stops working, the
    /// user's other connections close on every node, and this one gets a new token.
    private func changePassword(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_ChangePassword) {
        guard let user = loggedIn(context, id) else { return }
        let device = self.device ?? DeviceName.unnamed
        let (logins, router, number, metrics) = (node.logins, router, number, metrics)
        let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
        let future = accounts.changePassword(user: user, old: request.oldPassword, new: request.newPassword, device: device,
                                             source: admittedIP ?? "unknown", on: context.eventLoop)
            .hop(to: context.eventLoop).map { token -> Simp_Envelope in
                Self.closeOtherLogins(of: user, .password, except: number, logins: logins, router: router, metrics: metrics)
                // The tokens this connection held are invalid now; logout revokes the new one.
                if let verified = loop.value.accounts.parse(token: token.token) { loop.value.tokens = [verified.revocable] }
                var response = Simp_LoginResponse()
                response.token = token.token
                response.expiresAt = token.expiresAt
                return Simp_Envelope(requestID: id, .loginOk(response))
            }
        respond(context, id, future)
    }

    /// A request's device name, "default" when empty; nil when it is no device name.
    private static func device(named name: String) -> String? {
        let device = name.isEmpty ? DeviceName.unnamed : name
        return DeviceName.isValid(device) ? device : nil
    }

    private static let deviceNameRule = "a device name is 1-\(DeviceName.maxBytes) of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"

    /// Session-level requests go to the router's loop; before CONNECT they are refused.
    private func forSession(_ context: ChannelHandlerContext, _ id: UInt64, _ what: String,
                            _ body: @escaping @Sendable (Router, UInt64) -> Void) {
        guard case .connected(_, let session) = state else {
            reply(context, .error(.notConnected, "\(what) before CONNECT", requestID: id))
            return
        }
        let router = self.router
        router.loop.execute { body(router, session) }
    }

    /// A delivery query: its items' names are checked before any reaches a key, and it counts
    /// against the requests in progress until its answers are written.
    private func query(_ context: ChannelHandlerContext, _ id: UInt64, _ query: Simp_DeliveryQuery) {
        guard case .connected(_, let session) = state else {
            reply(context, .error(.notConnected, "query before CONNECT", requestID: id))
            return
        }
        if let bad = query.messages.first(where: { !UserName.isValid($0.toUser) && GroupName.addressed(by: $0.toUser) == nil }) {
            reply(context, .error(.badRequest, "a query item's toUser is not a user or group name: \(bad.toUser.prefix(64))", requestID: id))
            return
        }
        let router = self.router
        let answered = router.loop.flatSubmit { router.answer(query, sessionID: session) }
        answerless(context, answered)
    }

    private func history(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_HistoryRequest) {
        guard let user = loggedIn(context, id) else { return }
        if let group = GroupName.addressed(by: request.peer) {
            groupHistory(context, id, request, group: group, user: user)
            return
        }
        // The peer is echoed in the answer: an unchecked name could push the page past a frame.
        guard UserName.isValid(request.peer) else {
            reply(context, .error(.badRequest, "history peer is not a valid user name", requestID: id))
            return
        }
        let limit = Int(min(max(request.limit, 1), 1000))
        // Every client reads frames of up to the protocol's default limit, whatever this server accepts.
        let page = router.store.history(between: user, and: request.peer, before: request.before, limit: limit,
                                        budget: HistoryPaging.budget(), on: context.eventLoop)
        let future = page.map { page in
            var response = Simp_HistoryResponse()
            response.peer = request.peer
            response.messages = page.items.compactMap { try? Simp_Message(serializedBytes: $0) }
            response.more = page.more
            response.nextBefore = page.nextBefore
            return Simp_Envelope(requestID: id, .historyResult(response))
        }
        respond(context, id, future)
    }

    private func groupHistory(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_HistoryRequest, group: String, user: String) {
        let limit = Int(min(max(request.limit, 1), 1000))
        let page = router.store.groupHistory(group, for: user, before: request.before, limit: limit, budget: HistoryPaging.budget(),
                                             on: context.eventLoop)
        let future = page.flatMapThrowing { page in
            guard let page else { throw ServerError(.notAMember, "you are not a member of \(request.peer)") }
            var response = Simp_HistoryResponse()
            response.peer = request.peer
            response.messages = page.items.compactMap { try? Simp_Message(serializedBytes: $0) }
            response.more = page.more
            response.nextBefore = page.nextBefore
            return Simp_Envelope(requestID: id, .historyResult(response))
        }
        respond(context, id, future)
    }

    /// Who this connection is, for its log lines: the user once known, the session once connected.
    private var logMetadata: Logger.Metadata {
        switch state {
        case .anonymous: return [:]
        case .authenticated(let user): return ["user": "\(user)"]
        case .connected(let user, let session): return ["user": "\(user)", "session": "\(session)"]
        }
    }

    private var authenticatedUser: String? {
        switch state {
        case .anonymous: return nil
        case .authenticated(let user), .connected(let user, _): return user
        }
    }

    /// Writes the answer when it is ready; until then the request counts against the gate.
    private func respond(_ context: ChannelHandlerContext, _ id: UInt64, _ future: EventLoopFuture<Simp_Envelope>) {
        gate.started()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        future.hop(to: context.eventLoop).whenComplete { result in
            let (handler, context) = bound.value
            handler.gate.finished()
            if handler.authenticatedUser != nil, handler.loginTimer != nil { handler.authenticated() }
            switch result {
            case .success(let envelope):
                context.channel.writeAndFlush(envelope, promise: nil)
            case .failure(let error):
                let e = ServerError.wrap(error)
                context.channel.writeAndFlush(Simp_Envelope.error(e.code, e.reason, requestID: id), promise: nil)
            }
            handler.release(context)
        }
    }

    /// Work whose answers the router writes (a query's `delivered` frames): it holds a place
    /// among the requests in progress until it is done.
    private func answerless(_ context: ChannelHandlerContext, _ future: EventLoopFuture<Void>) {
        gate.started()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        future.hop(to: context.eventLoop).whenComplete { _ in
            let (handler, context) = bound.value
            handler.gate.finished()
            handler.release(context)
        }
    }

    private func reply(_ context: ChannelHandlerContext, _ envelope: Simp_Envelope) {
        send(context, envelope)
    }

    private static func name(_ body: Simp_Envelope.OneOf_Body?) -> String {
        guard let body else { return "nothing" }
        return String(describing: body).split(separator: "(").first.map(String.init) ?? "that"
    }
}
