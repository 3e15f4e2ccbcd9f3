import NIOCore

/// The group fan-out through an MQTT broker: one publisher and `members` subscribers of one
/// topic, QoS 1 both ways; the publisher keeps W PUBLISHes unacknowledged (a PUBACK frees a
/// slot). Each payload starts with the message's counter and its send time (8 bytes each, big
/// endian), so every subscriber measures its own latencies on whichever loop it lives.
public enum MQTTFanOut {
    public static func run(_ pattern: FanOutPattern, host: String, port: Int, group: any EventLoopGroup) async throws -> FanOutResult {
        try validate(pattern)
        let runID = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let topic = "simp-bench/\(runID)/fan-out"
        let subscribers = (0..<pattern.members).map {
            MQTTSubscriber(clientID: "bench-\(runID)-m\($0)", topic: topic, loop: group.next())
        }
        let publisher = MQTTPublisher(clientID: "bench-\(runID)-p", topic: topic, pattern: pattern, loop: group.next())
        let ends: [any MQTTFanOutEnd] = subscribers.map { $0 as any MQTTFanOutEnd } + [publisher]
        try await open(ends, host: host, port: port)
        let clock = LoadClock(pattern)
        var result: FanOutResult
        do {
            for subscriber in subscribers { try await subscriber.count.start(clock).get() }
            result = try await publisher.start(clock).get()
            let expected = result.sent
            for subscriber in subscribers { result.merge(try await subscriber.count.settled(expecting: expected, until: clock.drainUntil).get()) }
        } catch {
            await close(ends)
            throw error
        }
        await close(ends)
        result.measuredSeconds = pattern.duration
        return result
    }

    static func validate(_ pattern: FanOutPattern) throws(MQTTLoadError) {
        guard pattern.members > 0 else { throw .invalidPattern("members must be positive") }
        // Packet ids are 16 bits and each message in flight holds one.
        guard (1...65_535).contains(pattern.window) else { throw .invalidPattern("window must be 1...65535") }
        guard (16...1_000_000).contains(pattern.payloadBytes) else {
            throw .invalidPattern("payload must be 16 bytes (the message counter and its send time) to 1 MB")
        }
        guard pattern.duration > 0, pattern.warmup >= 0, pattern.drain >= 0 else {
            throw .invalidPattern("duration must be positive, warmup and drain not negative")
        }
    }

    /// Connects every end at once; if any fails, all are closed once every attempt has ended.
    private static func open(_ ends: [any MQTTFanOutEnd], host: String, port: Int) async throws {
        var firstError: (any Error)?
        for opening in ends.map({ $0.open(host: host, port: port) }) {
            do {
                try await opening.get()
            } catch {
                firstError = firstError ?? error
            }
        }
        guard let firstError else { return }
        await close(ends)
        throw firstError
    }

    private static func close(_ ends: [any MQTTFanOutEnd]) async {
        for closing in ends.map({ $0.close() }) { try? await closing.get() }
    }

    static let openTimeout = TimeAmount.seconds(10)

    /// DISCONNECT, then close; completes once the channel is closed.
    static func disconnect(_ channel: (any Channel)?, on loop: any EventLoop) -> EventLoopFuture<Void> {
        guard let channel else { return loop.makeSucceededVoidFuture() }
        channel.writeAndFlush(MQTTConnection.encoded(.disconnect, channel.allocator)).whenComplete { _ in channel.close(promise: nil) }
        return channel.closeFuture
    }

    /// `ready` fails with a time-out unless something completes it within `openTimeout`.
    static func bounded(_ ready: EventLoopPromise<Void>, on loop: any EventLoop, _ what: String) -> EventLoopFuture<Void> {
        let timeout = loop.scheduleTask(in: openTimeout) {
            ready.fail(MQTTError.timedOut("\(what) took over \(openTimeout)"))
        }
        return ready.futureResult.always { _ in timeout.cancel() }
    }
}

protocol MQTTFanOutEnd: Sendable {
    func open(host: String, port: Int) -> EventLoopFuture<Void>
    func close() -> EventLoopFuture<Void>
}

/// The fan-out's publisher. Its connection and all of this state live on `loop`: every method
/// below runs there, which is why it may be captured by their closures.
final class MQTTPublisher: MQTTFanOutEnd, @unchecked Sendable {
    let loop: any EventLoop
    private let clientID: String
    private let topic: String
    private let pattern: FanOutPattern
    /// The payload with a zero counter and time; each PUBLISH gets both written over its first 16 bytes.
    private let template: ByteBuffer
    private let finished: EventLoopPromise<FanOutResult>

    private var channel: (any Channel)?
    private var clock: LoadClock?
    private var counter: UInt64 = 0
    private var packetID: UInt16 = 0
    /// Send times of the PUBLISHes not yet acknowledged, by packet id.
    private var inFlight: [UInt16: UInt64] = [:]
    private var result = FanOutResult()
    private var outgoing: ByteBuffer
    private var drainEnds: Scheduled<Void>?
    private var done = false

    init(clientID: String, topic: String, pattern: FanOutPattern, loop: any EventLoop) {
        self.clientID = clientID
        self.topic = topic
        self.pattern = pattern
        self.loop = loop
        finished = loop.makePromise()
        var template = ByteBuffer()
        template.writeInteger(UInt64(0))
        template.writeInteger(UInt64(0))
        template.writeRepeatingByte(UInt8(ascii: "x"), count: pattern.payloadBytes - 16)
        self.template = template
        let publishLength = MQTTPacket.publish(topic: topic, packetID: 1, payload: template).encodedLength
        outgoing = ByteBufferAllocator().buffer(capacity: publishLength * min(pattern.window, 64))
        inFlight.reserveCapacity(pattern.window)
    }

    func open(host: String, port: Int) -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            let accepted = loop.makePromise(of: Void.self)
            MQTTConnection.connect(host: host, port: port, clientID: clientID, on: loop, accepted: accepted) { [self] event in
                handle(event)
            }.whenSuccess { [self] channel in self.channel = channel }
            return MQTTFanOut.bounded(accepted, on: loop, "connecting the publisher")
        }
    }

    func close() -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            finish()
            return MQTTFanOut.disconnect(channel, on: loop)
        }
    }

    /// Publishes until the measured window ends; the result once every PUBLISH is acknowledged,
    /// or the drain ended, or the connection failed.
    func start(_ clock: LoadClock) -> EventLoopFuture<FanOutResult> {
        loop.execute { [self] in
            guard !done else { return }
            self.clock = clock
            for _ in 0..<pattern.window { publishOne() }
            flush()
            let untilDrainEnds = clock.drainUntil - min(clock.drainUntil, LoadClock.now())
            drainEnds = loop.scheduleTask(in: .nanoseconds(Int64(untilDrainEnds))) { [self] in finish() }
        }
        return finished.futureResult
    }

    /// Encodes the next message into `outgoing`, which flush() sends at the end of the read
    /// burst that freed the slot (as MQTTPair does).
    private func publishOne() {
        guard !done else { return }
        counter += 1
        packetID = packetID == .max ? 1 : packetID + 1
        let now = LoadClock.now()
        MQTTPacket.publish(topic: topic, packetID: packetID, payload: template).encode(into: &outgoing)
        let payloadAt = outgoing.writerIndex - template.readableBytes
        outgoing.setInteger(counter, at: payloadAt)
        outgoing.setInteger(now, at: payloadAt + 8)
        inFlight[packetID] = now
        result.sent += 1
    }

    private func flush() {
        guard let channel, outgoing.readableBytes > 0 else { return }
        channel.writeAndFlush(outgoing, promise: nil)
        outgoing.clear()
    }

    private func handle(_ event: MQTTConnectionEvent) {
        switch event {
        case .packet(.puback(let id)):
            acknowledged(id)
        case .readComplete:
            flush()
        case .packet(let packet):
            fail("publisher: \(MQTTError.unexpectedPacket("\(packet) to the publisher"))")
        case .failed(let error):
            fail("publisher: \(error)")
        }
    }

    private func acknowledged(_ id: UInt16) {
        guard let clock, !done else { return }
        guard let sentAt = inFlight.removeValue(forKey: id) else {
            return result.note(failure: "publisher: PUBACK for packet id \(id), which is not in flight")
        }
        let now = LoadClock.now()
        result.accepted += 1
        if clock.measured(now) { result.acceptedInWindow += 1 }
        if clock.measured(sentAt) { _ = result.sendToAccepted.record(FanOutResult.micros(from: sentAt, to: now)) }
        if now < clock.measureUntil {
            publishOne()
        } else if inFlight.isEmpty {
            finish()
        }
    }

    /// The connection failed: what is in flight will not be acknowledged, so the run ends now.
    private func fail(_ reason: String) {
        guard !done else { return }
        result.note(failure: reason)
        finish()
    }

    private func finish() {
        guard !done else { return }
        done = true
        drainEnds?.cancel()
        finished.succeed(result)
    }
}

/// One subscriber of the fan-out's topic, counting what it gets on its connection's loop.
final class MQTTSubscriber: MQTTFanOutEnd, @unchecked Sendable {
    let count: FanOutCount
    private let clientID: String
    private let topic: String
    private var loop: any EventLoop { count.loop }
    private var channel: (any Channel)?
    private var subscribed: EventLoopPromise<Void>?

    init(clientID: String, topic: String, loop: any EventLoop) {
        self.clientID = clientID
        self.topic = topic
        count = FanOutCount(loop: loop)
    }

    /// Connected, and the subscription granted at QoS 1.
    func open(host: String, port: Int) -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            let accepted = loop.makePromise(of: Void.self)
            let subscribed = loop.makePromise(of: Void.self)
            self.subscribed = subscribed
            MQTTConnection.connect(host: host, port: port, clientID: clientID, on: loop, accepted: accepted) { [self] event in
                handle(event)
            }.whenSuccess { [self] channel in self.channel = channel }
            accepted.futureResult.whenComplete { [self] outcome in
                switch outcome {
                case .success:
                    guard let channel else { return }
                    channel.writeAndFlush(MQTTConnection.encoded(.subscribe(packetID: 1, topic: topic, qos: 1), channel.allocator),
                                          promise: nil)
                case .failure(let error):
                    subscribed.fail(error)
                }
            }
            return MQTTFanOut.bounded(subscribed, on: loop, "connecting and subscribing \(clientID) to \(topic)")
        }
    }

    func close() -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in MQTTFanOut.disconnect(channel, on: loop) }
    }

    private func handle(_ event: MQTTConnectionEvent) {
        switch event {
        case .packet(.suback(_, let codes)):
            // The fan-out needs QoS 1 deliveries: a grant of 0 is as much a refusal as 0x80.
            if codes == [1] {
                subscribed?.succeed(())
            } else {
                subscribed?.fail(MQTTError.subscriptionRefused(topic: topic, returnCode: codes.first ?? 0x80))
            }
            subscribed = nil
        case .packet(.publish(_, _, let payload)):
            guard let counter = payload.getInteger(at: payload.readerIndex, as: UInt64.self),
                  let sentAt = payload.getInteger(at: payload.readerIndex + 8, as: UInt64.self) else {
                return count.fail("subscriber: a PUBLISH of \(payload.readableBytes) bytes, too short for a counter and a time")
            }
            count.receive(counter: counter, sentAt: sentAt)
        case .readComplete:
            return
        case .packet(let packet):
            failed(.unexpectedPacket("\(packet) to a subscriber"))
        case .failed(let error):
            failed(error)
        }
    }

    private func failed(_ error: MQTTError) {
        if let subscribed {
            self.subscribed = nil
            return subscribed.fail(error)
        }
        count.fail("subscriber: \(error)")
    }
}
