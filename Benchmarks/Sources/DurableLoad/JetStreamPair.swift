import MQTTLoad
import NIOCore
import NIOPosix

/// Subjects and names of one pair, unique per run.
struct JetStreamNames {
    let stream: String
    let subject: String
    let deliverSubject: String
    /// The publisher's replies: `inbox.N` is the PubAck of counter N, `inbox.api` an API reply.
    let inbox: String
    let consumer = "receiver"

    init(runID: String, index: Int) {
        stream = "SIMP_BENCH_\(runID)_\(index)"
        subject = "simp-bench.\(runID).\(index)"
        deliverSubject = "simp-bench-deliver.\(runID).\(index)"
        inbox = "_INBOX.simp-bench.\(runID).\(index)"
    }

    var apiInbox: String { inbox + ".api" }

    /// The counter a PubAck's subject names; nil for other subjects.
    func counter(ofAck subject: String) -> UInt64? {
        guard subject.hasPrefix(inbox + ".") else { return nil }
        return UInt64(subject.dropFirst(inbox.count + 1))
    }
}

/// One publisher/subscriber pair through a JetStream stream of its own. Both connections live
/// on `loop`, and so does all of this state: every method below runs there, which is why it
/// may be captured by their closures.
final class JetStreamPair: LoadPair, @unchecked Sendable {
    static let openTimeout = TimeAmount.seconds(10)

    let loop: any EventLoop
    let finished: EventLoopPromise<MQTTLoadResult>
    private let names: JetStreamNames
    private let pattern: LoadPattern
    /// The body with zero counter and time; each publish stamps a copy.
    private let template: [UInt8]

    private var publisher: (any Channel)?
    private var subscriber: (any Channel)?
    private var ready: EventLoopPromise<Void>?
    private var apiReply: EventLoopPromise<Void>?
    private var inFlight: InFlight?
    private var publishes: ByteBuffer
    private var acks = ByteBuffer()
    private var drainEnds: Scheduled<Void>?
    private var done = false

    init(names: JetStreamNames, pattern: LoadPattern, loop: any EventLoop) {
        self.names = names
        self.pattern = pattern
        self.loop = loop
        finished = loop.makePromise()
        template = LoadMessage.template(size: pattern.payloadBytes)
        publishes = ByteBufferAllocator().buffer(capacity: (pattern.payloadBytes + 100) * min(pattern.window, 64))
    }

    // MARK: Opening and closing

    /// Both connections accepted, the stream and its consumer created, or the first failure; at most `openTimeout`.
    func open(host: String, port: Int) -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            let ready = loop.makePromise(of: Void.self)
            self.ready = ready
            connect(.publisher, host, port).and(connect(.subscriber, host, port))
                .flatMap { [self] _ in request(JetStreamAPI.createStream(names.stream, subject: names.subject)) }
                .flatMap { [self] in
                    request(JetStreamAPI.createConsumer(names.stream, durable: names.consumer, deliverSubject: names.deliverSubject,
                                                        maxAckPending: pattern.window * 2))
                }
                .whenComplete { [self] in opened($0) }
            let timeout = loop.scheduleTask(in: Self.openTimeout) { [self] in
                opened(.failure(DurableLoadError.timedOut("opening \(names.stream) took over \(Self.openTimeout)")))
            }
            return ready.futureResult.always { _ in timeout.cancel() }
        }
    }

    private enum Role { case publisher, subscriber }

    /// Stores the channel as soon as TCP connects (so that close() reaches it), then waits for its PONG.
    private func connect(_ role: Role, _ host: String, _ port: Int) -> EventLoopFuture<Void> {
        let accepted = loop.makePromise(of: Void.self)
        let subscription = role == .publisher ? names.inbox + ".*" : names.deliverSubject
        return NATSConnection.connect(host: host, port: port, name: "\(names.stream)-\(role)", subscriptions: [subscription],
                                      on: loop, accepted: accepted) { [self] event in
            switch role {
            case .publisher: fromPublisher(event)
            case .subscriber: fromSubscriber(event)
            }
        }.flatMap { [self] channel in
            switch role {
            case .publisher: publisher = channel
            case .subscriber: subscriber = channel
            }
            return accepted.futureResult
        }
    }

    /// One API request at a time, through the publisher; its reply completes the future.
    private func request(_ call: (subject: String, body: ByteBuffer)) -> EventLoopFuture<Void> {
        guard let publisher else { return loop.makeFailedFuture(DurableLoadError.connectionFailed("no publisher connection")) }
        let reply = loop.makePromise(of: Void.self)
        apiReply = reply
        var bytes = publisher.allocator.buffer(capacity: call.body.readableBytes + 100)
        NATSCommand.publish(call.subject, replyTo: names.apiInbox, payload: call.body, into: &bytes)
        publisher.writeAndFlush(bytes, promise: nil)
        return reply.futureResult
    }

    private func opened(_ outcome: Result<Void, any Error>) {
        if case .failure(let error) = outcome { apiReply?.fail(error) }
        apiReply = nil
        ready?.completeWith(outcome)
        ready = nil
    }

    /// Deletes the stream and closes both connections; a pair that never ran finishes here, empty.
    func close() -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            finish()
            return deleteStream().flatMap { [self] in
                let channels = [publisher, subscriber].compactMap { $0 }
                for channel in channels { channel.close(promise: nil) }
                return .andAllComplete(channels.map(\.closeFuture), on: loop)
            }
        }
    }

    /// Best effort, for at most a second: a run leaves nothing behind on a server it did not start.
    private func deleteStream() -> EventLoopFuture<Void> {
        guard publisher?.isActive == true, ready == nil, apiReply == nil else { return loop.makeSucceededVoidFuture() }
        let deleted = request(JetStreamAPI.deleteStream(names.stream))
        let timeout = loop.scheduleTask(in: .seconds(1)) { [self] in
            apiReply?.fail(DurableLoadError.timedOut("deleting stream \(names.stream)"))
            apiReply = nil
        }
        return deleted.always { _ in timeout.cancel() }.recover { _ in }
    }

    // MARK: The load

    func start(_ clock: LoadClock) {
        loop.execute { [self] in
            guard !done else { return }
            inFlight = InFlight(clock: clock, window: pattern.window)
            for _ in 0..<pattern.window { publishOne() }
            flush()
            let untilDrainEnds = clock.drainUntil - min(clock.drainUntil, LoadClock.now())
            drainEnds = loop.scheduleTask(in: .nanoseconds(Int64(untilDrainEnds))) { [self] in finish() }
        }
    }

    /// Encodes the next message into `publishes`, which flush() sends at the end of the read
    /// burst that freed the slot (as MQTTPair does, for the same reason).
    private func publishOne() {
        let now = LoadClock.now()
        guard !done, inFlight?.canSend(at: now) == true, let counter = inFlight?.send(at: now) else { return }
        var body = ByteBuffer(bytes: template)
        body.withUnsafeMutableReadableBytes { LoadMessage.stamp($0, counter: counter, sentAt: now) }
        NATSCommand.publish(names.subject, replyTo: "\(names.inbox).\(counter)", payload: body, into: &publishes)
    }

    private func flush() {
        if let subscriber, acks.readableBytes > 0 {
            subscriber.writeAndFlush(acks, promise: nil)
            acks.clear()
        }
        if let publisher, publishes.readableBytes > 0 {
            publisher.writeAndFlush(publishes, promise: nil)
            // Reuses the storage once the socket has taken the bytes, which is the usual case.
            publishes.clear()
        }
    }

    private func fromPublisher(_ event: NATSConnectionEvent) {
        switch event {
        case .message(let message) where message.subject == names.apiInbox:
            apiReplied(message)
        case .message(let message):
            pubAcked(message)
        case .readComplete:
            flush()
        case .failed(let error):
            fail(error, "publisher")
        }
    }

    private func apiReplied(_ message: NATSMessage) {
        let reply = apiReply
        apiReply = nil
        do {
            try checkStatus(message)
            _ = try JetStreamAPI.reply(message.payload)
            reply?.succeed(())
        } catch {
            reply?.fail(error)
        }
    }

    private func pubAcked(_ message: NATSMessage) {
        guard let counter = names.counter(ofAck: message.subject) else {
            inFlight?.note("publisher: a message on \(message.subject)")
            return
        }
        do {
            try checkStatus(message)
            _ = try JetStreamAPI.pubAck(message.payload)
        } catch {
            return fail(error, "publisher, message \(counter)")
        }
        switch inFlight?.acked(counter, at: LoadClock.now()) {
        case .freedSlot: freedSlot()
        case .unknown: inFlight?.note("publisher: a PubAck for \(counter), which was never published")
        default: break
        }
    }

    /// A status instead of a reply: 503 means no one answered (JetStream not enabled, no such stream).
    private func checkStatus(_ message: NATSMessage) throws(DurableLoadError) {
        guard let status = message.status else { return }
        throw .protocolError(status == 503 ? "no responders on \(names.subject): is JetStream enabled?" : "NATS status \(status)")
    }

    private func fromSubscriber(_ event: NATSConnectionEvent) {
        switch event {
        case .message(let message) where message.status != nil:
            // Flow control and idle heartbeats, which this consumer does not ask for.
            break
        case .message(let message):
            delivered(message)
        case .readComplete:
            flush()
        case .failed(let error):
            fail(error, "subscriber")
        }
    }

    /// Acks it (an empty message to its reply subject) and frees its slot if the PubAck is in.
    private func delivered(_ message: NATSMessage) {
        if let reply = message.replyTo { NATSCommand.publish(reply, replyTo: nil, payload: ByteBuffer(), into: &acks) }
        guard let (counter, sentAt) = message.payload.withUnsafeReadableBytes({ LoadMessage.read($0) }) else {
            inFlight?.note("subscriber: a message of \(message.payload.readableBytes) bytes, too short")
            return
        }
        switch inFlight?.received(counter, sentAt: sentAt, at: LoadClock.now()) {
        case .freedSlot: freedSlot()
        case .unknown: inFlight?.note("subscriber: unknown counter \(counter)")
        default: break
        }
    }

    /// Refills the slot while the window lasts; ends the pair once everything has settled after it.
    private func freedSlot() {
        guard let inFlight else { return }
        if inFlight.isFinished(at: LoadClock.now()) { return finish() }
        publishOne()
    }

    /// A connection failed: what is in flight will not settle, so the pair ends now.
    private func fail(_ error: any Error, _ connection: String) {
        if ready != nil { return opened(.failure(error)) }
        guard !done else { return }
        inFlight?.note("\(connection): \(error)")
        finish()
    }

    private func finish() {
        guard !done else { return }
        done = true
        drainEnds?.cancel()
        finished.succeed(inFlight?.finished() ?? MQTTLoadResult())
    }
}
