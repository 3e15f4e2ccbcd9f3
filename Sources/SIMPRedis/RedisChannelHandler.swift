import NIOCore

/// One pipelined request: its commands in RESP, how many replies it expects, how many of
/// those to drop (script loads sent ahead of it), and who waits for the rest.
struct RedisRequest {
    var bytes: ByteBuffer
    var replies: Int
    var skip: Int
    var promise: EventLoopPromise<[RedisValue]>
}

/// Writes requests and matches replies to them in order (Redis answers a connection's
/// commands in the order it received them). A request unanswered after `timeout` closes the
/// connection; when it closes, every request still waiting fails as "may have run".
final class RedisChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = RedisRequest
    typealias OutboundOut = ByteBuffer

    private struct Waiting {
        var request: RedisRequest
        var replies: [RedisValue] = []
        let deadline: NIODeadline
    }

    private let reader = RedisReplyReader()
    private var waiting = CircularBuffer<Waiting>()
    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?
    private var closed = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        guard !closed else {
            // Never sent: it surely did not run.
            request.promise.fail(RedisError(.io, "connection to Redis already closed"))
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        // The loop's clock, so a test on an embedded loop moves it.
        waiting.append(Waiting(request: request, deadline: context.eventLoop.now + timeout))
        if waiting.count == 1 { armTimer(context) }
        context.write(wrapOutboundOut(request.bytes), promise: watched(promise, context))
    }

    /// A failed write breaks the connection, and NIO fails the writes still in its buffer
    /// before it reports the channel inactive: the later requests first. Failing every waiting
    /// request at the first failed write, oldest first, keeps the failures in the order the
    /// requests were made (the store pipeline sends unknown outcomes again in that order).
    private func watched(_ promise: EventLoopPromise<Void>?, _ context: ChannelHandlerContext) -> EventLoopPromise<Void> {
        let written = context.eventLoop.makePromise(of: Void.self)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        written.futureResult.whenComplete { result in
            if case .failure(let error) = result {
                let (handler, context) = bound.value
                handler.fail(context, RedisError(.io, "write to Redis failed: \(error)", mayHaveRun: true))
            }
            promise?.completeWith(result)
        }
        return written
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        do {
            try reader.feed(unwrapInboundIn(data))
            while let reply = try reader.next() { deliver(reply, context) }
        } catch {
            fail(context, error)
        }
    }

    private func deliver(_ reply: RedisValue, _ context: ChannelHandlerContext) {
        guard !waiting.isEmpty else {
            fail(context, RedisError(.protocolViolation, "Redis sent a reply nobody asked for", mayHaveRun: true))
            return
        }
        if waiting[waiting.startIndex].request.skip > 0 {
            waiting[waiting.startIndex].request.skip -= 1
        } else {
            waiting[waiting.startIndex].replies.append(reply)
        }
        let head = waiting[waiting.startIndex]
        guard head.replies.count == head.request.replies else { return }
        waiting.removeFirst()
        armTimer(context)
        head.request.promise.succeed(head.replies)
    }

    /// Watches the oldest request's deadline (the others were sent after it).
    private func armTimer(_ context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        guard let oldest = waiting.first else { return }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: oldest.deadline) {
            let (handler, context) = bound.value
            let millis = handler.timeout.nanoseconds / 1_000_000
            handler.fail(context, RedisError(.timeout, "no answer from Redis within \(millis) ms", mayHaveRun: true))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(RedisError(.io, "Redis closed the connection", mayHaveRun: true))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context, RedisError(.io, "\(error)", mayHaveRun: true))
    }

    private func fail(_ context: ChannelHandlerContext, _ error: any Error) {
        failAll(error as? RedisError ?? RedisError(.io, "\(error)", mayHaveRun: true))
        context.close(promise: nil)
    }

    /// What was written may have run: Redis could have executed it and lost only the answer.
    private func failAll(_ error: RedisError) {
        closed = true
        timer?.cancel()
        timer = nil
        while let entry = waiting.popFirst() { entry.request.promise.fail(error) }
    }
}
