import Dispatch
import Histogram
import NIOCore
import NIOPosix

public struct MQTTLoadResult: Sendable {
    public var sent = 0
    public var received = 0
    public var duplicates = 0
    public var lost = 0
    public var errors: [String] = []
    public var measuredSeconds = 0.0
    /// Microseconds, of the messages published in the measured window.
    public var sendToReceive = MQTTLoadResult.histogram()
    public var sendToAck = MQTTLoadResult.histogram()

    static func histogram() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: 100_000_000, numberOfSignificantValueDigits: .three)
    }
}

/// The bench's pattern through an MQTT broker: per pair a publisher and a subscriber on one
/// topic, QoS 1 both ways, W messages in flight; a slot is freed once the publisher has its
/// PUBACK and the subscriber has the message.
public enum MQTTLoad {
    public static func run(_ pattern: LoadPattern, host: String, port: Int, group: any EventLoopGroup) async throws -> MQTTLoadResult {
        let run = UInt64.random(in: 0...UInt64.max) % 1_000_000
        var pairs: [MQTTPair] = []
        for index in 0..<pattern.pairs {
            let pair = MQTTPair(loop: group.next(), topic: "simp-bench/\(run)/\(index)", pattern: pattern)
            try await pair.open(host: host, port: port, clientID: "bench-\(run)-\(index)").get()
            pairs.append(pair)
        }
        let marks = LoadClock(pattern)
        var result = MQTTLoadResult()
        for pair in pairs { try await pair.loop.flatSubmit { pair.start(marks) }.get() }
        for pair in pairs {
            let part = try await pair.finished.futureResult.get()
            merge(part, into: &result)
            try? await pair.close().get()
        }
        result.measuredSeconds = pattern.duration
        return result
    }

    private static func merge(_ part: MQTTLoadResult, into total: inout MQTTLoadResult) {
        total.sent += part.sent
        total.received += part.received
        total.duplicates += part.duplicates
        total.lost += part.lost
        total.errors += part.errors.prefix(max(0, 5 - total.errors.count))
        total.sendToReceive.add(part.sendToReceive)
        total.sendToAck.add(part.sendToAck)
    }
}

/// One publisher/subscriber pair. Both connections live on `loop`, and so does all of this
/// state, which is why the closures that run there may capture it.
final class MQTTPair: @unchecked Sendable {
    struct Slot {
        var sentAt: UInt64
        var acked = false
        var received = false
    }

    let loop: any EventLoop
    let topic: String
    let pattern: LoadPattern
    let finished: EventLoopPromise<MQTTLoadResult>
    private var publisher: (any Channel)?
    private var subscriber: (any Channel)?
    private var subscribed: EventLoopPromise<Void>?
    private var marks: LoadClock?
    private var counter: UInt64 = 0
    private var lastPacketID: UInt16 = 0
    private var slots: [UInt64: Slot] = [:]
    private var packetCounters: [UInt16: UInt64] = [:]
    private var seen = Set<UInt64>()
    private var result = MQTTLoadResult()
    private var publisherFlushScheduled = false
    private var done = false

    init(loop: any EventLoop, topic: String, pattern: LoadPattern) {
        self.loop = loop
        self.topic = topic
        self.pattern = pattern
        finished = loop.makePromise()
    }

    /// Connects both ends and subscribes; completes once the broker confirmed the subscription.
    func open(host: String, port: Int, clientID: String) -> EventLoopFuture<Void> {
        let pub = MQTTConnection.open(host: host, port: port, clientID: clientID + "-p", on: loop) { [self] in fromBroker(publisher: $0) }
        let sub = MQTTConnection.open(host: host, port: port, clientID: clientID + "-s", on: loop) { [self] in fromBroker(subscriber: $0) }
        return pub.and(sub).flatMap { [self] channels in
            publisher = channels.0
            subscriber = channels.1
            let promise = loop.makePromise(of: Void.self)
            subscribed = promise
            channels.1.writeAndFlush(MQTTPacket.subscribe(packetID: 1, topic: topic, qos: 1), promise: nil)
            return promise.futureResult
        }
    }

    func start(_ marks: LoadClock) -> EventLoopFuture<Void> {
        self.marks = marks
        for _ in 0..<pattern.window { publishOne() }
        let wait = TimeAmount.nanoseconds(Int64(marks.drainUntil - min(marks.drainUntil, now())))
        loop.scheduleTask(in: wait) { [self] in finish() }
        return loop.makeSucceededVoidFuture()
    }

    func close() -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            let closing = [publisher, subscriber].compactMap { channel -> EventLoopFuture<Void>? in
                guard let channel else { return nil }
                channel.write(MQTTPacket.disconnect, promise: nil)
                return channel.writeAndFlush(MQTTPacket.disconnect).flatMap { channel.close() }
            }
            return .andAllComplete(closing, on: loop)
        }
    }

    private func publishOne() {
        guard let publisher else { return }
        counter += 1
        lastPacketID = lastPacketID == UInt16.max ? 1 : lastPacketID + 1
        var payload = publisher.allocator.buffer(capacity: pattern.payloadBytes)
        payload.writeInteger(counter)
        payload.writeRepeatingByte(UInt8(ascii: "x"), count: max(0, pattern.payloadBytes - 8))
        slots[counter] = Slot(sentAt: now())
        packetCounters[lastPacketID] = counter
        result.sent += 1
        publisher.write(MQTTPacket.publish(topic: topic, packetID: lastPacketID, payload: payload), promise: nil)
        guard !publisherFlushScheduled else { return }
        publisherFlushScheduled = true
        loop.execute { [self] in
            publisherFlushScheduled = false
            self.publisher?.flush()
        }
    }

    private func fromBroker(publisher packet: MQTTPacket) {
        guard case .puback(let id) = packet, let counter = packetCounters.removeValue(forKey: id),
              var slot = slots[counter] else { return }
        if let marks, marks.measured(slot.sentAt) { _ = result.sendToAck.record((now() - slot.sentAt) / 1000) }
        slot.acked = true
        settle(counter, slot)
    }

    private func fromBroker(subscriber packet: MQTTPacket) {
        switch packet {
        case .suback(_, let codes):
            guard codes.first.map({ $0 <= 2 }) == true else {
                subscribed?.fail(MQTTError.unexpected("SUBACK refused the subscription to \(topic)"))
                return
            }
            subscribed?.succeed(())
        case .publish(_, let id, let payload):
            if let id { subscriber?.writeAndFlush(MQTTPacket.puback(packetID: id), promise: nil) }
            guard let counter = payload.getInteger(at: payload.readerIndex, as: UInt64.self) else { return }
            guard seen.insert(counter).inserted else {
                result.duplicates += 1
                return
            }
            result.received += 1
            guard var slot = slots[counter] else { return }
            if let marks, marks.measured(slot.sentAt) { _ = result.sendToReceive.record((now() - slot.sentAt) / 1000) }
            slot.received = true
            settle(counter, slot)
        default:
            break
        }
    }

    /// Frees the slot once both the PUBACK and the message are in, and refills it.
    private func settle(_ counter: UInt64, _ slot: Slot) {
        guard slot.acked && slot.received else {
            slots[counter] = slot
            return
        }
        slots[counter] = nil
        guard let marks else { return }
        if now() < marks.measureUntil {
            publishOne()
        } else if slots.isEmpty {
            finish()
        }
    }

    private func finish() {
        guard !done else { return }
        done = true
        result.lost = result.sent - seen.count
        finished.succeed(result)
    }

    private func now() -> UInt64 { LoadClock.now() }
}

/// An MQTT connection: CONNECT, wait for CONNACK, then every packet to `onPacket` on `loop`.
enum MQTTConnection {
    static func open(host: String, port: Int, clientID: String, on loop: any EventLoop,
                     onPacket: @escaping @Sendable (MQTTPacket) -> Void) -> EventLoopFuture<any Channel> {
        let connected = loop.makePromise(of: Void.self)
        return ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(MQTTHandler(connected: connected, onPacket: onPacket))
                }
            }
            .connect(host: host, port: port)
            .flatMap { channel in
                channel.writeAndFlush(MQTTPacket.connect(clientID: clientID, keepAlive: 60), promise: nil)
                return connected.futureResult.map { channel }
            }
    }
}

/// Bytes to packets and packets to bytes; the first packet must be a CONNACK that accepts.
final class MQTTHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = MQTTPacket
    typealias OutboundOut = ByteBuffer

    private var buffer = ByteBuffer()
    private var connected: EventLoopPromise<Void>?
    private let onPacket: @Sendable (MQTTPacket) -> Void

    init(connected: EventLoopPromise<Void>, onPacket: @escaping @Sendable (MQTTPacket) -> Void) {
        self.connected = connected
        self.onPacket = onPacket
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        buffer.writeBuffer(&bytes)
        do {
            while let packet = try MQTTPacket.decode(from: &buffer) { handle(packet) }
            buffer.discardReadBytes()
        } catch {
            connected?.fail(error)
            connected = nil
            context.close(promise: nil)
        }
    }

    private func handle(_ packet: MQTTPacket) {
        guard let promise = connected else { return onPacket(packet) }
        connected = nil
        guard case .connack(_, let code) = packet else { return promise.fail(MQTTError.unexpected("\(packet) before CONNACK")) }
        if code == 0 { promise.succeed(()) } else { promise.fail(MQTTError.refused(returnCode: code)) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var bytes = context.channel.allocator.buffer(capacity: 32)
        unwrapOutboundIn(data).encode(into: &bytes)
        context.write(wrapOutboundOut(bytes), promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connected?.fail(MQTTError.unexpected("broker closed the connection"))
        connected = nil
        context.fireChannelInactive()
    }
}
