import MQTTLoad
import NIOCore
import NIOPosix

/// What a NATS connection reports to its owner, always on the connection's event loop.
enum NATSConnectionEvent {
    case message(NATSMessage)
    /// The end of a read burst: what its messages made the owner write can go out now.
    case readComplete
    /// The connection is gone or unusable; nothing follows.
    case failed(DurableLoadError)
}

enum NATSConnection {
    /// TCP (no Nagle) to the server, CONNECT, the `subscriptions` (sids 1, 2, ...) and a PING.
    /// The future is the channel once it is connected; `accepted` completes with the PONG, by
    /// which the server has taken the subscriptions. Messages after it go to `onEvent`.
    static func connect(host: String, port: Int, name: String, subscriptions: [String], on loop: any EventLoop,
                        accepted: EventLoopPromise<Void>,
                        onEvent: @escaping @Sendable (NATSConnectionEvent) -> Void) -> EventLoopFuture<any Channel> {
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = NATSHandler(name: name, subscriptions: subscriptions, accepted: accepted, onEvent: onEvent)
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: host, port: port)
            .flatMapErrorThrowing { error in
                let failure = DurableLoadError.connectionFailed("cannot connect to \(host):\(port): \(error)")
                accepted.fail(failure)
                throw failure
            }
    }
}

/// Bytes to server operations. Answers INFO with CONNECT and PING with PONG itself; the PONGs
/// of one read burst leave in one write, at its end. Writes from the owner are ByteBuffers.
final class NATSHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let name: String
    private let subscriptions: [String]
    private var accepted: EventLoopPromise<Void>?
    private let onEvent: @Sendable (NATSConnectionEvent) -> Void
    private var received = ReadBuffer()
    private var replies = ByteBuffer()
    private var connectSent = false
    private var failed = false

    init(name: String, subscriptions: [String], accepted: EventLoopPromise<Void>,
         onEvent: @escaping @Sendable (NATSConnectionEvent) -> Void) {
        self.name = name
        self.subscriptions = subscriptions
        self.accepted = accepted
        self.onEvent = onEvent
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.append(&bytes)
        do {
            while !failed, let op = try NATSParser.next(from: &received.bytes) { handle(op, context) }
        } catch {
            fail(error, context)
        }
        received.compact()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if replies.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(replies), promise: nil)
            replies.clear()
        }
        if !failed { onEvent(.readComplete) }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(.connectionFailed("\(error)"), context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        report(.connectionFailed("the server closed it"))
        context.fireChannelInactive()
    }

    private func handle(_ op: NATSServerOp, _ context: ChannelHandlerContext) {
        switch op {
        case .info:
            guard !connectSent else { return }
            connectSent = true
            context.writeAndFlush(wrapOutboundOut(greeting(context.channel.allocator)), promise: nil)
        case .ping:
            NATSCommand.pong(into: &replies)
        case .pong:
            accepted?.succeed(())
            accepted = nil
        case .ok:
            break
        case .error(let text):
            fail(.protocolError("NATS -ERR '\(text)'"), context)
        case .message(let message):
            if accepted == nil { onEvent(.message(message)) }
        }
    }

    private func greeting(_ allocator: ByteBufferAllocator) -> ByteBuffer {
        var bytes = allocator.buffer(capacity: 256)
        NATSCommand.connect(name: name, into: &bytes)
        for (index, subject) in subscriptions.enumerated() { NATSCommand.subscribe(subject, sid: index + 1, into: &bytes) }
        NATSCommand.ping(into: &bytes)
        return bytes
    }

    private func fail(_ error: DurableLoadError, _ context: ChannelHandlerContext) {
        report(error)
        context.close(promise: nil)
    }

    /// The first failure only: before the PONG it fails the connect, after it goes to the owner.
    private func report(_ error: DurableLoadError) {
        if let promise = accepted {
            accepted = nil
            promise.fail(error)
        } else if !failed {
            onEvent(.failed(error))
        }
        failed = true
    }
}
