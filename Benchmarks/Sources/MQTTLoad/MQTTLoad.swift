import Histogram
import NIOCore
import NIOPosix

public struct MQTTLoadResult: Sendable {
    public var sent = 0
    /// Distinct messages received, over the whole run.
    public var received = 0
    public var duplicates = 0
    /// Sent and not received by the end of the drain.
    public var lost = 0
    /// At most five; a connection lost mid-run ends its pair early.
    public var errors: [String] = []
    public var measuredSeconds = 0.0
    /// Microseconds, of the messages published in the measured window.
    public var sendToReceive = MQTTLoadResult.histogram()
    public var sendToAck = MQTTLoadResult.histogram()

    public init() {}

    /// 1 µs to 100 s at three significant digits.
    public static func histogram() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: 100_000_000, numberOfSignificantValueDigits: .three)
    }

    public mutating func note(_ error: String) {
        if errors.count < 5 { errors.append(error) }
    }

    public mutating func merge(_ part: MQTTLoadResult) {
        sent += part.sent
        received += part.received
        duplicates += part.duplicates
        lost += part.lost
        for error in part.errors { note(error) }
        sendToReceive.add(part.sendToReceive)
        sendToAck.add(part.sendToAck)
    }
}

public enum MQTTLoadError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidPattern(String)
    case mosquittoNotFound
    case mosquittoDidNotStart(String)

    public var description: String {
        switch self {
        case .invalidPattern(let why): return "invalid load pattern: \(why)"
        case .mosquittoNotFound: return "mosquitto not found; install it with apt-get install mosquitto"
        case .mosquittoDidNotStart(let why): return "mosquitto did not start: \(why)"
        }
    }
}

/// The bench's pattern through an MQTT broker: per pair a publisher and a subscriber on one
/// topic, QoS 1 both ways, W messages in flight; a slot is freed once the publisher has its
/// PUBACK and the subscriber has the message.
public enum MQTTLoad {
    public static func run(_ pattern: LoadPattern, host: String, port: Int, group: any EventLoopGroup) async throws -> MQTTLoadResult {
        try validate(pattern)
        let runID = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let pairs = (0..<pattern.pairs).map { MQTTPair(index: $0, runID: runID, pattern: pattern, loop: group.next()) }
        try await LoadPairs.open(pairs, host: host, port: port)
        let clock = LoadClock(pattern)
        for pair in pairs { pair.start(clock) }
        var result = MQTTLoadResult()
        for pair in pairs { result.merge(try await pair.finished.futureResult.get()) }
        await LoadPairs.close(pairs)
        result.measuredSeconds = pattern.duration
        return result
    }

    static func validate(_ pattern: LoadPattern) throws(MQTTLoadError) {
        guard pattern.pairs > 0 else { throw .invalidPattern("pairs must be positive") }
        // Packet ids are 16 bits and each message in flight holds one.
        guard (1...65_535).contains(pattern.window) else { throw .invalidPattern("window must be 1...65535") }
        guard (8...1_000_000).contains(pattern.payloadBytes) else {
            throw .invalidPattern("payload must be 8 bytes (the message counter) to 1 MB")
        }
        guard pattern.duration > 0, pattern.warmup >= 0, pattern.drain >= 0 else {
            throw .invalidPattern("duration must be positive, warmup and drain not negative")
        }
    }
}

/// One publisher/subscriber pair. Both connections live on `loop`, and so does all of this
/// state: every method below runs there, which is why it may be captured by their closures.
final class MQTTPair: LoadPair, @unchecked Sendable {
    private struct Slot {
        let sentAt: UInt64
        var acked = false
        var received = false
    }

    static let openTimeout = TimeAmount.seconds(10)

    let loop: any EventLoop
    let finished: EventLoopPromise<MQTTLoadResult>
    private let index: Int
    private let runID: String
    private let topic: String
    private let pattern: LoadPattern
    /// The payload with a zero counter; each PUBLISH gets its counter written over the first 8 bytes.
    private let template: ByteBuffer

    private var publisher: (any Channel)?
    private var subscriber: (any Channel)?
    private var ready: EventLoopPromise<Void>?
    private var subscribed: EventLoopPromise<Void>?
    private var clock: LoadClock?
    private var counter: UInt64 = 0
    private var packetID: UInt16 = 0
    private var slots: [UInt64: Slot] = [:]
    private var counterOfPacket: [UInt16: UInt64] = [:]
    private var result = MQTTLoadResult()
    private var outgoing: ByteBuffer
    private var drainEnds: Scheduled<Void>?
    private var done = false

    init(index: Int, runID: String, pattern: LoadPattern, loop: any EventLoop) {
        self.index = index
        self.runID = runID
        self.topic = "simp-bench/\(runID)/\(index)"
        self.pattern = pattern
        self.loop = loop
        finished = loop.makePromise()
        var template = ByteBuffer()
        template.writeInteger(UInt64(0))
        template.writeRepeatingByte(UInt8(ascii: "x"), count: pattern.payloadBytes - 8)
        self.template = template
        let publishLength = MQTTPacket.publish(topic: topic, packetID: 1, payload: template).encodedLength
        outgoing = ByteBufferAllocator().buffer(capacity: publishLength * min(pattern.window, 64))
        slots.reserveCapacity(pattern.window)
        counterOfPacket.reserveCapacity(pattern.window)
    }

    // MARK: Opening and closing

    /// Both connections accepted and the subscription confirmed, or the first failure; at most `openTimeout`.
    func open(host: String, port: Int) -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            let ready = loop.makePromise(of: Void.self)
            let subscribed = loop.makePromise(of: Void.self)
            self.ready = ready
            self.subscribed = subscribed
            let publishing = connect(.publisher, host, port)
            let subscribing = connect(.subscriber, host, port).map { [self] in subscribe($0) }
            publishing.and(subscribing).flatMap { _ in subscribed.futureResult }.whenComplete { [self] in opened($0) }
            let timeout = loop.scheduleTask(in: Self.openTimeout) { [self] in
                opened(.failure(MQTTError.timedOut("connecting and subscribing to \(topic) took over \(Self.openTimeout)")))
            }
            return ready.futureResult.always { _ in timeout.cancel() }
        }
    }

    private enum Role { case publisher, subscriber }

    /// Stores the channel as soon as TCP connects (so that close() reaches it), then waits for its CONNACK.
    private func connect(_ role: Role, _ host: String, _ port: Int) -> EventLoopFuture<any Channel> {
        let accepted = loop.makePromise(of: Void.self)
        let clientID = "bench-\(runID)-\(role == .publisher ? "p" : "s")\(index)"
        return MQTTConnection.connect(host: host, port: port, clientID: clientID, on: loop, accepted: accepted) { [self] event in
            switch role {
            case .publisher: fromPublisher(event)
            case .subscriber: fromSubscriber(event)
            }
        }.flatMap { [self] channel in
            switch role {
            case .publisher: publisher = channel
            case .subscriber: subscriber = channel
            }
            return accepted.futureResult.map { channel }
        }
    }

    private func subscribe(_ channel: any Channel) {
        channel.writeAndFlush(MQTTConnection.encoded(.subscribe(packetID: 1, topic: topic, qos: 1), channel.allocator), promise: nil)
    }

    private func opened(_ outcome: Result<Void, any Error>) {
        if case .failure(let error) = outcome { subscribed?.fail(error) }
        subscribed = nil
        ready?.completeWith(outcome)
        ready = nil
    }

    /// DISCONNECT and close both; a pair that never ran finishes here, empty.
    func close() -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            finish()
            let closing = [publisher, subscriber].compactMap { $0 }.map { channel in
                channel.writeAndFlush(MQTTConnection.encoded(.disconnect, channel.allocator)).whenComplete { _ in
                    channel.close(promise: nil)
                }
                return channel.closeFuture
            }
            return .andAllComplete(closing, on: loop)
        }
    }

    // MARK: The load

    func start(_ clock: LoadClock) {
        loop.execute { [self] in
            guard !done else { return }
            self.clock = clock
            for _ in 0..<pattern.window { publishOne() }
            flush()
            let untilDrainEnds = clock.drainUntil - min(clock.drainUntil, LoadClock.now())
            drainEnds = loop.scheduleTask(in: .nanoseconds(Int64(untilDrainEnds))) { [self] in finish() }
        }
    }

    /// Encodes the next message into `outgoing`, which flush() sends at the end of the read burst
    /// that freed the slot: one write per burst, yet out before the loop serves the other
    /// connections. (Flushing once per loop iteration instead ran bench and broker in lockstep,
    /// each idle half the time, at half the throughput in some runs.)
    private func publishOne() {
        guard !done else { return }
        counter += 1
        packetID = packetID == .max ? 1 : packetID + 1
        MQTTPacket.publish(topic: topic, packetID: packetID, payload: template).encode(into: &outgoing)
        outgoing.setInteger(counter, at: outgoing.writerIndex - template.readableBytes)
        slots[counter] = Slot(sentAt: LoadClock.now())
        counterOfPacket[packetID] = counter
        result.sent += 1
    }

    private func flush() {
        guard let publisher, outgoing.readableBytes > 0 else { return }
        publisher.writeAndFlush(outgoing, promise: nil)
        // Reuses the storage once the socket has taken the bytes, which is the usual case.
        outgoing.clear()
    }

    private func fromPublisher(_ event: MQTTConnectionEvent) {
        switch event {
        case .packet(.puback(let id)):
            acknowledged(id)
        case .readComplete:
            flush()
        case .packet(let packet):
            fail(.unexpectedPacket("\(packet) to the publisher"), "publisher")
        case .failed(let error):
            fail(error, "publisher")
        }
    }

    private func fromSubscriber(_ event: MQTTConnectionEvent) {
        switch event {
        case .packet(.suback(_, let codes)):
            // The pattern needs QoS 1 deliveries: a grant of 0 is as much a refusal as 0x80.
            if codes == [1] {
                subscribed?.succeed(())
            } else {
                subscribed?.fail(MQTTError.subscriptionRefused(topic: topic, returnCode: codes.first ?? 0x80))
            }
            subscribed = nil
        case .packet(.publish(_, _, let payload)):
            delivered(payload)
        case .readComplete:
            flush()
        case .packet(let packet):
            fail(.unexpectedPacket("\(packet) to the subscriber"), "subscriber")
        case .failed(let error):
            fail(error, "subscriber")
        }
    }

    private func acknowledged(_ id: UInt16) {
        guard let counter = counterOfPacket.removeValue(forKey: id), var slot = slots[counter] else {
            return result.note("publisher: PUBACK for packet id \(id), which is not in flight")
        }
        if let clock, clock.measured(slot.sentAt) { _ = result.sendToAck.record((LoadClock.now() - slot.sentAt) / 1000) }
        slot.acked = true
        settle(counter, slot)
    }

    private func delivered(_ payload: ByteBuffer) {
        guard let counter = payload.getInteger(at: payload.readerIndex, as: UInt64.self) else {
            return result.note("subscriber: a PUBLISH of \(payload.readableBytes) bytes, too short for a counter")
        }
        guard var slot = slots[counter], !slot.received else {
            // Settled or already received: the broker sent it twice.
            if counter >= 1 && counter <= self.counter { result.duplicates += 1 } else { result.note("subscriber: unknown counter \(counter)") }
            return
        }
        if let clock, clock.measured(slot.sentAt) { _ = result.sendToReceive.record((LoadClock.now() - slot.sentAt) / 1000) }
        result.received += 1
        slot.received = true
        settle(counter, slot)
    }

    /// Frees the slot once both the PUBACK and the message are in, and refills it while the window lasts.
    private func settle(_ counter: UInt64, _ slot: Slot) {
        guard slot.acked && slot.received else {
            slots[counter] = slot
            return
        }
        slots[counter] = nil
        guard let clock else { return }
        if LoadClock.now() < clock.measureUntil {
            publishOne()
        } else if slots.isEmpty {
            finish()
        }
    }

    /// A connection failed: what is in flight will not settle, so the pair ends now.
    private func fail(_ error: MQTTError, _ connection: String) {
        if ready != nil { return opened(.failure(error)) }
        guard !done else { return }
        result.note("\(connection): \(error)")
        finish()
    }

    private func finish() {
        guard !done else { return }
        done = true
        drainEnds?.cancel()
        result.lost = slots.values.count { !$0.received }
        finished.succeed(result)
    }
}
