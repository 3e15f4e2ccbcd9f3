import NIOCore

/// Thin NIO adapter over `FrameParser`: bytes in, envelopes out, and the reverse.
/// A framing violation gets an Error frame with the reason, then the connection is closed,
/// because after a bad length prefix the stream cannot be resynchronised.
/// Given a `HeartbeatWheel`, it also keeps the connection's heartbeat (what `HeartbeatHandler`
/// does), saving a server connection one handler and its pipeline context.
public final class EnvelopeFrameHandler: ChannelDuplexHandler, HeartbeatWatched {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = Simp_Envelope
    public typealias OutboundIn = Simp_Envelope
    public typealias OutboundOut = ByteBuffer

    private var parser: FrameParser
    private var failed = false
    /// A begun frame must be complete this soon after its first byte (nil: no deadline).
    private let frameDeadline: TimeAmount?
    private var deadlineTimer: Scheduled<Void>?
    private var paused = false
    private var context: ChannelHandlerContext?
    private var heartbeat: HeartbeatMarks?

    public init(maxFrameLength: Int = Frame.defaultMaxLength, frameDeadline: TimeAmount? = nil,
                heartbeat: HeartbeatWheel? = nil) {
        parser = FrameParser(maxLength: maxFrameLength)
        self.frameDeadline = frameDeadline
        self.heartbeat = heartbeat.map(HeartbeatMarks.init)
    }

    var lastRead: NIODeadline { heartbeat?.lastRead ?? .distantPast }
    var lastWrite: NIODeadline { heartbeat?.lastWrite ?? .distantPast }

    func heartbeatDue(_ event: IdleStateHandler.IdleStateEvent) {
        context?.fireUserInboundEventTriggered(event)
    }

    /// The limit for the frames still to come (a server allows larger ones after login).
    public var maxFrameLength: Int {
        get { parser.maxLength }
        set { parser.maxLength = newValue }
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        heartbeat?.read()
        guard !failed else { return }
        var bytes = unwrapInboundIn(data)
        parser.append(&bytes)
        decode(context)
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { heartbeat?.start(self) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        heartbeat?.start(self)
        context.fireChannelActive()
    }

    /// Stops handing out envelopes (the next handler cannot take more now); what arrives
    /// meanwhile stays in bytes, and the deadline does not run, since the wait is ours.
    public func pause() {
        paused = true
        deadlineTimer?.cancel()
        deadlineTimer = nil
    }

    /// Hands out the envelopes that arrived while paused, until paused again.
    public func resume() {
        guard paused, let context else { return }
        paused = false
        decode(context)
    }

    private func decode(_ context: ChannelHandlerContext) {
        do {
            while !paused, !failed, let envelope = try parser.next() {
                deadlineTimer?.cancel()
                deadlineTimer = nil
                context.fireChannelRead(wrapInboundOut(envelope))
            }
            if !paused { armDeadline(context) }
        } catch {
            fail(context, error)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        deadlineTimer?.cancel()
        heartbeat?.stop()
        self.context = nil
    }

    public func channelInactive(context: ChannelHandlerContext) {
        deadlineTimer?.cancel()
        heartbeat?.stop()
        context.fireChannelInactive()
    }

    private func armDeadline(_ context: ChannelHandlerContext) {
        guard let frameDeadline, parser.bufferedBytes > 0, deadlineTimer == nil else { return }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadlineTimer = context.eventLoop.scheduleTask(in: frameDeadline) {
            let (handler, context) = bound.value
            handler.fail(context, .incomplete(received: handler.parser.bufferedBytes, within: frameDeadline))
        }
    }

    private func fail(_ context: ChannelHandlerContext, _ error: FrameError) {
        guard !failed else { return }
        failed = true
        deadlineTimer?.cancel()
        let frame = Frame.encode(.error(error.code, error.description), allocator: context.channel.allocator)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(frame)).whenComplete { _ in bound.value.close(promise: nil) }
        context.fireErrorCaught(error)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        heartbeat?.wrote()
        let envelope = unwrapOutboundIn(data)
        var buffer = context.channel.allocator.buffer(capacity: 64)
        Frame.encode(envelope, into: &buffer)
        context.write(wrapOutboundOut(buffer), promise: promise)
    }
}
