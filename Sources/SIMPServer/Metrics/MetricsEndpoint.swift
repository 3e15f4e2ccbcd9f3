import NIOCore
import NIOHTTP1

/// Answers GET /metrics with the Prometheus text format; anything else gets 404 or 405.
final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: ServerMetrics
    private var request: HTTPRequestHead?

    init(metrics: ServerMetrics) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break
        case .end:
            guard let head = request else { return }
            request = nil
            respond(context, to: head)
        }
    }

    private func respond(_ context: ChannelHandlerContext, to head: HTTPRequestHead) {
        let (status, body): (HTTPResponseStatus, String)
        if head.uri.split(separator: "?").first != "/metrics" {
            (status, body) = (.notFound, "only /metrics is served here\n")
        } else if head.method != .GET {
            (status, body) = (.methodNotAllowed, "use GET\n")
        } else {
            (status, body) = (.ok, metrics.render())
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: status == .ok ? "text/plain; version=0.0.4" : "text/plain")
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
