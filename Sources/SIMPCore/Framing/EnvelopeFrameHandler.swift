import NIOCore

/// The framing of one control connection: bytes in, envelopes out, and the reverse, with a
/// deadline for a begun frame and, given a `HeartbeatWheel`, the connection's heartbeat.
/// Embedded in the handler that uses the envelopes (`EnvelopeFramed`), so a server
/// connection needs no handler (and pipeline context) of its own for it.
public struct EnvelopeFraming {
    var parser: FrameParser
    var failed = false
    var paused = false
    /// A begun frame must be complete this soon after its first byte (nil: no deadline).
    let frameDeadline: TimeAmount?
    var deadlineTimer: Scheduled<Void>?
    var heartbeat: HeartbeatMarks?
    /// The handler's context while it is in a pipeline.
    public internal(set) var context: ChannelHandlerContext?

    public init(maxFrameLength: Int = Frame.defaultMaxLength, frameDeadline: TimeAmount? = nil,
                heartbeat: HeartbeatWheel? = nil) {
        parser = FrameParser(maxLength: maxFrameLength)
        self.frameDeadline = frameDeadline
        self.heartbeat = heartbeat.map(HeartbeatMarks.init)
    }

    /// The limit for the frames still to come (a server allows larger ones after login).
    public var maxFrameLength: Int {
        get { parser.maxLength }
        set { parser.maxLength = newValue }
    }
}

/// A channel handler that frames its connection with `EnvelopeFraming`: its handler methods
/// call the `framing…` methods below, and whole envelopes arrive in `received`.
/// A framing violation gets an Error frame with the reason, then the connection is closed,
/// because after a bad length prefix the stream cannot be resynchronised.
public protocol EnvelopeFramed: HeartbeatWatched, SendableMetatype {
    var framing: EnvelopeFraming { get set }
    /// One whole envelope from the peer.
    func received(_ envelope: Simp_Envelope, context: ChannelHandlerContext)
    /// The peer broke the framing; the Error frame is written and the connection closes after it.
    func framingFailed(_ error: FrameError, context: ChannelHandlerContext)
}

extension EnvelopeFramed {
    public var lastRead: NIODeadline { framing.heartbeat?.lastRead ?? .distantPast }
    public var lastWrite: NIODeadline { framing.heartbeat?.lastWrite ?? .distantPast }

    /// From `handlerAdded`.
    public func framingAdded(_ context: ChannelHandlerContext) {
        framing.context = context
        if context.channel.isActive { framing.heartbeat?.start(self) }
    }

    /// Starts keeping the connection's heartbeat on `wheel` (a client learns the interval only
    /// once connected), in place of any it kept before.
    public func watchHeartbeat(on wheel: HeartbeatWheel) {
        framing.heartbeat?.stop()
        framing.heartbeat = HeartbeatMarks(wheel: wheel)
        if framing.context?.channel.isActive == true { framing.heartbeat?.start(self) }
    }

    /// From `handlerRemoved`.
    public func framingRemoved() {
        framingInactive()
        framing.context = nil
    }

    /// From `channelActive`.
    public func framingActive() {
        framing.heartbeat?.start(self)
    }

    /// From `channelInactive`.
    public func framingInactive() {
        framing.deadlineTimer?.cancel()
        framing.heartbeat?.stop()
    }

    /// From `channelRead`: the bytes the socket read.
    public func framingRead(_ context: ChannelHandlerContext, _ bytes: ByteBuffer) {
        framing.heartbeat?.read()
        guard !framing.failed else { return }
        var bytes = bytes
        framing.parser.append(&bytes)
        decodeFrames(context)
    }

    /// Writes one envelope as a frame.
    public func send(_ context: ChannelHandlerContext, _ envelope: Simp_Envelope, flush: Bool = true,
                     promise: EventLoopPromise<Void>? = nil) {
        framing.heartbeat?.wrote()
        var buffer = context.channel.allocator.buffer(capacity: 64)
        Frame.encode(envelope, into: &buffer)
        if flush {
            context.writeAndFlush(NIOAny(buffer), promise: promise)
        } else {
            context.write(NIOAny(buffer), promise: promise)
        }
    }

    /// Writes envelopes as frames in one buffer, and flushes: one write for many frames costs
    /// one pass down the pipeline and one iovec instead of one each.
    public func sendAll(_ context: ChannelHandlerContext, _ envelopes: [Simp_Envelope]) {
        guard !envelopes.isEmpty else { return }
        framing.heartbeat?.wrote()
        var buffer = context.channel.allocator.buffer(capacity: 64 * envelopes.count)
        for envelope in envelopes { Frame.encode(envelope, into: &buffer) }
        context.writeAndFlush(NIOAny(buffer), promise: nil)
    }

    /// Stops handing out envelopes (the handler cannot take more now); what arrives meanwhile
    /// stays in bytes, and the deadline does not run, since the wait is ours.
    public func pauseFraming() {
        framing.paused = true
        framing.deadlineTimer?.cancel()
        framing.deadlineTimer = nil
    }

    /// Hands out the envelopes that arrived while paused, until paused again.
    public func resumeFraming() {
        guard framing.paused, let context = framing.context else { return }
        framing.paused = false
        decodeFrames(context)
    }

    private func decodeFrames(_ context: ChannelHandlerContext) {
        do {
            while let envelope = try nextEnvelope() {
                received(envelope, context: context)
            }
            if !framing.paused { armFrameDeadline(context) }
        } catch {
            failFraming(context, error)
        }
    }

    private func nextEnvelope() throws(FrameError) -> Simp_Envelope? {
        guard !framing.paused, !framing.failed, let envelope = try framing.parser.next() else { return nil }
        framing.deadlineTimer?.cancel()
        framing.deadlineTimer = nil
        return envelope
    }

    private func armFrameDeadline(_ context: ChannelHandlerContext) {
        guard let deadline = framing.frameDeadline, framing.parser.bufferedBytes > 0, framing.deadlineTimer == nil else { return }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        framing.deadlineTimer = context.eventLoop.scheduleTask(in: deadline) {
            let (handler, context) = bound.value
            handler.failFraming(context, .incomplete(received: handler.framing.parser.bufferedBytes, within: deadline))
        }
    }

    private func failFraming(_ context: ChannelHandlerContext, _ error: FrameError) {
        guard !framing.failed else { return }
        framing.failed = true
        framing.deadlineTimer?.cancel()
        let frame = Frame.encode(.error(error.code, error.description), allocator: context.channel.allocator)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(NIOAny(frame)).whenComplete { _ in bound.value.close(promise: nil) }
        framingFailed(error, context: context)
    }
}

/// The framing as a handler of its own, for pipelines (the client's) whose next handler
/// takes envelopes: bytes in, envelopes out, and the reverse.
public final class EnvelopeFrameHandler: ChannelDuplexHandler, EnvelopeFramed {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = Simp_Envelope
    public typealias OutboundIn = Simp_Envelope
    public typealias OutboundOut = ByteBuffer

    public var framing: EnvelopeFraming

    public init(maxFrameLength: Int = Frame.defaultMaxLength, frameDeadline: TimeAmount? = nil,
                heartbeat: HeartbeatWheel? = nil) {
        framing = EnvelopeFraming(maxFrameLength: maxFrameLength, frameDeadline: frameDeadline, heartbeat: heartbeat)
    }

    public var maxFrameLength: Int {
        get { framing.maxFrameLength }
        set { framing.maxFrameLength = newValue }
    }

    public func pause() { pauseFraming() }
    public func resume() { resumeFraming() }

    public func handlerAdded(context: ChannelHandlerContext) { framingAdded(context) }
    public func handlerRemoved(context: ChannelHandlerContext) { framingRemoved() }

    public func channelActive(context: ChannelHandlerContext) {
        framingActive()
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        framingInactive()
        context.fireChannelInactive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        framingRead(context, unwrapInboundIn(data))
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        send(context, unwrapOutboundIn(data), flush: false, promise: promise)
    }

    public func received(_ envelope: Simp_Envelope, context: ChannelHandlerContext) {
        context.fireChannelRead(wrapInboundOut(envelope))
    }

    public func framingFailed(_ error: FrameError, context: ChannelHandlerContext) {
        context.fireErrorCaught(error)
    }

    public func heartbeatDue(_ event: IdleStateHandler.IdleStateEvent) {
        framing.context?.fireUserInboundEventTriggered(event)
    }
}
