import NIOCore
import SIMPCore

/// Passes control frames to the client; pings on write-idle, closes on read-idle.
final class ClientControlHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = Simp_Envelope
    private let client: SIMPClient

    init(client: SIMPClient) { self.client = client }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        client.controlReceived(unwrapInboundIn(data))
    }

    func channelInactive(context: ChannelHandlerContext) {
        client.controlClosed(context.channel)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event as? IdleStateHandler.IdleStateEvent {
        case .write?: client.sendPing()
        case .read?: context.close(promise: nil)
        default: context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        client.controlFailed(context.channel, error)
        context.close(promise: nil)
    }
}

final class ClientDatagramHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let client: SIMPClient

    init(client: SIMPClient) { self.client = client }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        client.datagramReceived(unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // ICMP port unreachable while the server restarts: not a reason to close the socket.
    }
}

/// For a single request on a connection of its own (registration).
final class OneShotHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = Simp_Envelope
    private var promise: EventLoopPromise<Simp_Envelope>?

    /// Fails after `timeout` without an answer (a server that takes the bytes and says
    /// nothing, such as a TLS server sent plain bytes, would otherwise hold the caller forever).
    func send(_ envelope: Simp_Envelope, on channel: any Channel, timeout: TimeAmount) -> EventLoopFuture<Simp_Envelope> {
        // A TLS handshake can fail (or the server close) before there is a request to fail.
        if let early { return channel.eventLoop.makeFailedFuture(early) }
        let promise = channel.eventLoop.makePromise(of: Simp_Envelope.self)
        self.promise = promise
        requestID = envelope.requestID
        channel.writeAndFlush(envelope, promise: nil)
        let handler = NIOLoopBound(self, eventLoop: channel.eventLoop)
        let timer = channel.eventLoop.scheduleTask(in: timeout) {
            handler.value.promise?.fail(ClientError("no answer within \(timeout.nanoseconds / 1_000_000) ms"))
            handler.value.promise = nil
            channel.close(promise: nil)
        }
        promise.futureResult.whenComplete { _ in timer.cancel() }
        return promise.futureResult
    }

    private var requestID: UInt64 = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Only the answer counts: a heartbeat ping can arrive first while the server works.
        let envelope = unwrapInboundIn(data)
        guard envelope.requestID == requestID else { return }
        promise?.succeed(envelope)
        promise = nil
    }

    /// Why the connection ended before `send` was called, to answer that call with.
    private var early: ClientError?

    func channelInactive(context: ChannelHandlerContext) {
        fail(ClientError("server closed the connection"))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(ClientError("connection failed: \(SIMPClient.reason(error))"))
        context.close(promise: nil)
    }

    /// The first failure wins: a TLS error is followed by the close it causes.
    private func fail(_ error: ClientError) {
        if let promise {
            promise.fail(error)
            self.promise = nil
        } else if early == nil {
            early = error
        }
    }
}
