import NIOCore
import NIOPosix

/// What an MQTT connection reports to its owner, always on the connection's event loop.
enum MQTTConnectionEvent {
    case packet(MQTTPacket)
    /// The end of a read burst: what its packets made the owner write can go out now.
    case readComplete
    /// The connection is gone or unusable; nothing follows.
    case failed(MQTTError)
}

enum MQTTConnection {
    /// TCP (no Nagle) to the broker and a clean-session CONNECT. The future is the channel once it is
    /// connected; `accepted` completes with the broker's CONNACK. Packets after it go to `onEvent`.
    static func connect(host: String, port: Int, clientID: String, on loop: any EventLoop,
                        accepted: EventLoopPromise<Void>,
                        onEvent: @escaping @Sendable (MQTTConnectionEvent) -> Void) -> EventLoopFuture<any Channel> {
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = MQTTHandler(clientID: clientID, accepted: accepted, onEvent: onEvent)
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: host, port: port)
            .flatMapErrorThrowing { error in
                let failure = MQTTError.connectionFailed("cannot connect to \(host):\(port): \(error)")
                accepted.fail(failure)
                throw failure
            }
    }

    static func encoded(_ packet: MQTTPacket, _ allocator: ByteBufferAllocator) -> ByteBuffer {
        var bytes = allocator.buffer(capacity: packet.encodedLength)
        packet.encode(into: &bytes)
        return bytes
    }
}

/// Bytes to packets. Sends CONNECT when the connection opens, and acknowledges every QoS 1
/// PUBLISH itself: the PUBACKs of one read burst leave in one write, at the end of the burst.
/// Writes from the owner are ByteBuffers, already encoded.
final class MQTTHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let clientID: String
    private var accepted: EventLoopPromise<Void>?
    private let onEvent: @Sendable (MQTTConnectionEvent) -> Void
    private var received = ReadBuffer()
    private var acks = ByteBuffer()
    private var failed = false

    init(clientID: String, accepted: EventLoopPromise<Void>, onEvent: @escaping @Sendable (MQTTConnectionEvent) -> Void) {
        self.clientID = clientID
        self.accepted = accepted
        self.onEvent = onEvent
    }

    func channelActive(context: ChannelHandlerContext) {
        // Keep-alive 60 s: both ends of a pair send a packet far more often than that while loaded.
        let connect = MQTTConnection.encoded(.connect(clientID: clientID, keepAlive: 60), context.channel.allocator)
        context.writeAndFlush(wrapOutboundOut(connect), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.append(&bytes)
        do {
            while !failed, let packet = try MQTTPacket.decode(from: &received.bytes) { handle(packet, context) }
        } catch {
            fail(error, context)
        }
        received.compact()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if acks.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(acks), promise: nil)
            // Reuses the storage once the socket has taken the bytes, which is the usual case.
            acks.clear()
        }
        if !failed { onEvent(.readComplete) }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(.connectionFailed("\(error)"), context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        report(.connectionFailed("the broker closed it"))
        context.fireChannelInactive()
    }

    private func handle(_ packet: MQTTPacket, _ context: ChannelHandlerContext) {
        if let promise = accepted {
            accepted = nil
            switch packet {
            case .connack(_, 0):
                promise.succeed(())
            case .connack(_, let code):
                promise.fail(MQTTError.connectionRefused(returnCode: code))
                failed = true
                context.close(promise: nil)
            default:
                promise.fail(MQTTError.unexpectedPacket("\(packet) before CONNACK"))
                failed = true
                context.close(promise: nil)
            }
            return
        }
        if case .publish(_, let id?, _) = packet { MQTTPacket.puback(packetID: id).encode(into: &acks) }
        onEvent(.packet(packet))
    }

    private func fail(_ error: MQTTError, _ context: ChannelHandlerContext) {
        report(error)
        context.close(promise: nil)
    }

    /// The first failure only: before CONNACK it fails the connect, after it goes to the owner.
    private func report(_ error: MQTTError) {
        if let promise = accepted {
            accepted = nil
            promise.fail(error)
        } else if !failed {
            onEvent(.failed(error))
        }
        failed = true
    }
}
