import NIOCore

/// Thin NIO adapter over `FrameParser`: bytes in, envelopes out, and the reverse.
/// A framing violation gets an Error frame with the reason, then the connection is closed,
/// because after a bad length prefix the stream cannot be resynchronised.
public final class EnvelopeFrameHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = Simp_Envelope
    public typealias OutboundIn = Simp_Envelope
    public typealias OutboundOut = ByteBuffer

    private var parser: FrameParser
    private var failed = false

    public init(maxFrameLength: Int = Frame.defaultMaxLength) {
        parser = FrameParser(maxLength: maxFrameLength)
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        var bytes = unwrapInboundIn(data)
        parser.append(&bytes)
        do {
            while let envelope = try parser.next() {
                context.fireChannelRead(wrapInboundOut(envelope))
            }
        } catch {
            failed = true
            let frame = Frame.encode(.error(error.code, error.description), allocator: context.channel.allocator)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(frame)).whenComplete { _ in bound.value.close(promise: nil) }
            context.fireErrorCaught(error)
        }
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let envelope = unwrapOutboundIn(data)
        var buffer = context.channel.allocator.buffer(capacity: 64)
        Frame.encode(envelope, into: &buffer)
        context.write(wrapOutboundOut(buffer), promise: promise)
    }
}
