import Foundation
import Logging
import NIOCore
import SIMPCore

/// Serves one control connection: register, login, connect, ping, receipts, history.
/// Lives on its channel's event loop; slow work (scrypt, Redis) runs elsewhere and its
/// results come back to the loop.
final class ControlHandler: ChannelInboundHandler {
    typealias InboundIn = Simp_Envelope
    typealias OutboundOut = Simp_Envelope

    private enum State {
        case anonymous
        case authenticated(user: String)
        case connected(user: String, session: UInt64)
    }

    private let accounts: Accounts
    private let router: Router
    private let logger: Logger
    private var state = State.anonymous

    init(accounts: Accounts, router: Router, logger: Logger) {
        self.accounts = accounts
        self.router = router
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let id = envelope.requestID
        switch envelope.body {
        case .register(let request): register(context, id, request)
        case .login(let request): login(context, id, request)
        case .connect(let request): connect(context, id, request)
        case .ping(let ping):
            var pong = Simp_Pong()
            pong.nonce = ping.nonce
            context.writeAndFlush(wrapOutboundOut(Simp_Envelope(requestID: id, .pong(pong))), promise: nil)
        case .pong: break
        case .receipt(let receipt): forSession(context, id, "receipt") { $0.receipt(sessionID: $1, receipt) }
        case .history(let request): history(context, id, request)
        case .withdraw(let request): forSession(context, id, "withdraw") { $0.withdraw(sessionID: $1, request) }
        case .query(let query): forSession(context, id, "query") { $0.answer(query, sessionID: $1) }
        case .pathResponse(let response):
            let token = Array(response.token)
            forSession(context, id, "path response") { $0.pathResponse(sessionID: $1, token: token) }
        case .none: reply(context, .error(.badRequest, "envelope without a body", requestID: id))
        default: reply(context, .error(.badRequest, "a client does not send \(Self.name(envelope.body))", requestID: id))
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let idle = event as? IdleStateHandler.IdleStateEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        switch idle {
        case .write:
            var ping = Simp_Ping()
            ping.nonce = UInt64.random(in: 0...UInt64.max)
            context.writeAndFlush(wrapOutboundOut(Simp_Envelope(.ping(ping))), promise: nil)
        case .read:
            logger.info("control peer silent for three heartbeats; closing")
            context.close(promise: nil)
        case .all: break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .connected(_, let session) = state {
            router.loop.execute { [router] in router.closeSession(session) }
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("control connection error", metadata: ["error": "\(error)"])
        if !(error is FrameError) { context.close(promise: nil) }
    }

    // MARK: requests

    private func register(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_RegisterRequest) {
        let future = accounts.register(user: request.user, password: request.password, on: context.eventLoop).map {
            Simp_Envelope(requestID: id, .ok(Simp_Ok()))
        }
        respond(context, id, future)
    }

    private func login(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_LoginRequest) {
        let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
        let future = accounts.login(user: request.user, password: request.password, on: context.eventLoop).map { token -> Simp_Envelope in
            if case .anonymous = loop.value.state { loop.value.state = .authenticated(user: request.user) }
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
        guard let user = accounts.verify(token: request.token) else {
            reply(context, .error(.invalidToken, "token is invalid or expired; log in again", requestID: id))
            return
        }
        let channel = context.channel
        let router = self.router
        let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
        let future = router.loop.flatSubmit {
            router.openSession(user: user, control: channel, lastSeq: request.lastSeq)
        }.hop(to: context.eventLoop).map { response -> Simp_Envelope in
            loop.value.state = .connected(user: user, session: response.sessionID)
            return Simp_Envelope(requestID: id, .connected(response))
        }
        respond(context, id, future)
    }

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

    private func history(_ context: ChannelHandlerContext, _ id: UInt64, _ request: Simp_HistoryRequest) {
        guard let user = authenticatedUser else {
            reply(context, .error(.notAuthenticated, "log in first", requestID: id))
            return
        }
        let limit = Int(min(max(request.limit, 1), 1000))
        let future = router.store.history(between: user, and: request.peer, limit: limit, on: context.eventLoop).map { items in
            var response = Simp_HistoryResponse()
            response.peer = request.peer
            response.messages = items.compactMap { try? Simp_Message(serializedBytes: $0) }
            return Simp_Envelope(requestID: id, .historyResult(response))
        }
        respond(context, id, future)
    }

    private var authenticatedUser: String? {
        switch state {
        case .anonymous: return nil
        case .authenticated(let user), .connected(let user, _): return user
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ id: UInt64, _ future: EventLoopFuture<Simp_Envelope>) {
        let channel = context.channel
        future.whenComplete { result in
            switch result {
            case .success(let envelope):
                channel.writeAndFlush(envelope, promise: nil)
            case .failure(let error):
                let e = ServerError.wrap(error)
                channel.writeAndFlush(Simp_Envelope.error(e.code, e.reason, requestID: id), promise: nil)
            }
        }
    }

    private func reply(_ context: ChannelHandlerContext, _ envelope: Simp_Envelope) {
        context.writeAndFlush(wrapOutboundOut(envelope), promise: nil)
    }

    private static func name(_ body: Simp_Envelope.OneOf_Body?) -> String {
        guard let body else { return "nothing" }
        return String(describing: body).split(separator: "(").first.map(String.init) ?? "that"
    }
}
