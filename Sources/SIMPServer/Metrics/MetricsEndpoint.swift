import NIOCore
import NIOHTTP1

/// The operator's HTTP port: GET /metrics (Prometheus text), /health (the process answers),
/// /ready (listeners bound and Redis answers PING) and /sessions (each session's congestion
/// window, RTT and losses: one line each, so not a Prometheus series per session); anything
/// else gets 404 or 405.
final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: ServerMetrics
    private let readiness: Readiness
    private let sessions: @Sendable () -> EventLoopFuture<String>
    private var request: HTTPRequestHead?

    init(metrics: ServerMetrics, readiness: Readiness, sessions: @escaping @Sendable () -> EventLoopFuture<String>) {
        self.metrics = metrics
        self.readiness = readiness
        self.sessions = sessions
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break
        case .end:
            guard let head = request else { return }
            request = nil
            answer(context, to: head)
        }
    }

    private func answer(_ context: ChannelHandlerContext, to head: HTTPRequestHead) {
        let path = head.uri.split(separator: "?", omittingEmptySubsequences: false).first ?? ""
        guard ["/metrics", "/health", "/ready", "/sessions"].contains(path) else {
            return respond(context, to: head, .notFound, "only /metrics, /health, /ready and /sessions are served here\n")
        }
        guard head.method == .GET else { return respond(context, to: head, .methodNotAllowed, "use GET\n") }
        switch path {
        case "/metrics": respond(context, to: head, .ok, metrics.render(), contentType: "text/plain; version=0.0.4")
        case "/health": respond(context, to: head, .ok, "ok\n")
        case "/sessions": answerSessions(context, to: head)
        default: answerReady(context, to: head)
        }
    }

    private func answerSessions(_ context: ChannelHandlerContext, to head: HTTPRequestHead) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        sessions().hop(to: context.eventLoop).whenComplete { result in
            let (handler, context) = bound.value
            switch result {
            case .success(let text): handler.respond(context, to: head, .ok, text)
            case .failure(let error): handler.respond(context, to: head, .serviceUnavailable, "\(error)\n")
            }
        }
    }

    /// The Redis check completes later on this channel's loop; the HTTP pipeline handler
    /// holds back a pipelined next request until this answer is written.
    private func answerReady(_ context: ChannelHandlerContext, to head: HTTPRequestHead) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        readiness.problem(on: context.eventLoop).whenSuccess { problem in
            let (handler, context) = bound.value
            if let problem {
                handler.respond(context, to: head, .serviceUnavailable, problem + "\n")
            } else {
                let notes = handler.readiness.degraded().map { $0 + "\n" }.joined()
                handler.respond(context, to: head, .ok, "ready\n" + notes)
            }
        }
    }

    private func respond(_ context: ChannelHandlerContext, to head: HTTPRequestHead, _ status: HTTPResponseStatus,
                         _ body: String, contentType: String = "text/plain") {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: "\(body.utf8.count)")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}
