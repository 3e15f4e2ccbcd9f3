#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MQTTLoad

/// One sender/receiver pair through a durable queue of its own. librabbitmq blocks, so the
/// publisher and the consumer each have a thread and a connection; what they share (the
/// messages in flight, the phase) is guarded by `condition`.
final class RabbitMQPair: @unchecked Sendable {
    private enum Phase {
        case opening
        case running
        case done
    }

    /// What the publisher does next.
    private enum Step {
        case send(counter: UInt64, sentAt: UInt64)
        case wait(seconds: Double)
        case stop
    }

    let queue: String
    /// Both sides connected and set up, or the first failure.
    let opened = OneShot<Result<Void, DurableLoadError>>()
    /// The pair's figures, once both threads have closed their connections.
    let finished = OneShot<MQTTLoadResult>()
    private let pattern: LoadPattern
    private let condition = NSCondition()
    private var phase = Phase.opening
    /// Set by start(_:). Mutated in place: a copy would copy its slots on every change.
    private var inFlight: InFlight?
    private var result = MQTTLoadResult()
    private var sidesOpen = 0
    private var sidesRunning = 2
    /// The consumer frees slots too: a byte down this pipe wakes a publisher that waits for one.
    private let wake: (read: Int32, write: Int32)

    init(queue: String, pattern: LoadPattern) {
        self.queue = queue
        self.pattern = pattern
        wake = Self.wakePipe()
    }

    deinit {
        close(wake.read)
        close(wake.write)
    }

    /// Non-blocking at both ends: a full pipe already wakes the publisher, and it empties the pipe without waiting.
    private static func wakePipe() -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return (-1, -1) }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        return (ends[0], ends[1])
    }

    private func wakePublisher() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    /// Starts both threads; each connects and sets up, then waits for start(_:).
    func launch(host: String, port: Int) {
        let publisher = Thread { [self] in publisherThread(host, port) }
        publisher.name = "rabbitmq-publisher \(queue)"
        publisher.start()
        let consumer = Thread { [self] in consumerThread(host, port) }
        consumer.name = "rabbitmq-consumer \(queue)"
        consumer.start()
    }

    func start(_ clock: LoadClock) {
        condition.withLock {
            guard phase == .opening else { return }
            inFlight = InFlight(clock: clock, window: pattern.window)
            phase = .running
            condition.broadcast()
        }
    }

    /// Ends a pair that will not run (another failed to open); finished still follows.
    func abort() {
        condition.withLock { end() }
    }

    // MARK: The publisher

    private func publisherThread(_ host: String, _ port: Int) {
        defer { sideExited() }
        let connection: AMQPConnection
        do {
            connection = try AMQPConnection(host: host, port: port)
            try connection.selectConfirms()
        } catch {
            return openFailed("publisher", error)
        }
        defer { connection.close() }
        guard sideOpened() else { return }
        do {
            try publish(connection)
        } catch {
            fail("publisher: \(error)")
        }
    }

    private func publish(_ connection: AMQPConnection) throws(DurableLoadError) {
        let body = UnsafeMutableRawBufferPointer.allocate(byteCount: pattern.payloadBytes, alignment: 8)
        defer { body.deallocate() }
        body.copyBytes(from: LoadMessage.template(size: pattern.payloadBytes))
        while true {
            switch nextStep() {
            case .send(let counter, let sentAt):
                LoadMessage.stamp(body, counter: counter, sentAt: sentAt)
                try connection.publish(queue, UnsafeRawBufferPointer(body))
            case .wait(let seconds):
                try awaitConfirms(connection, seconds)
            case .stop:
                return
            }
        }
    }

    private func nextStep() -> Step {
        condition.withLock {
            guard phase == .running, let clock = inFlight?.clock else { return .stop }
            let now = LoadClock.now()
            if inFlight?.isFinished(at: now) ?? true {
                end()
                return .stop
            }
            guard inFlight?.canSend(at: now) == true, let counter = inFlight?.send(at: now) else {
                return .wait(seconds: min(0.1, Double(clock.drainUntil - now) / 1e9))
            }
            return .send(counter: counter, sentAt: now)
        }
    }

    /// Handles what the broker has sent; if nothing, sleeps until it sends more, the consumer
    /// frees a slot, or `seconds` pass.
    private func awaitConfirms(_ connection: AMQPConnection, _ seconds: Double) throws(DurableLoadError) {
        if try handleEvents(connection) > 0 { return }
        var sources = [pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        _ = poll(&sources, 2, Int32(max(1, seconds * 1000)))
        if sources[1].revents != 0 {
            var bytes = [UInt8](repeating: 0, count: 64)
            while read(wake.read, &bytes, bytes.count) > 0 {}
        }
        _ = try handleEvents(connection)
    }

    /// How many frames were waiting.
    private func handleEvents(_ connection: AMQPConnection) throws(DurableLoadError) -> Int {
        var handled = 0
        while let event = try connection.nextEvent(timeout: 0) {
            handled += 1
            switch event {
            case .ack(let tag, let multiple):
                confirmed(tag, multiple: multiple)
            case .nack(let tag, _):
                throw .protocolError("the broker refused (basic.nack) message \(tag)")
            case .other:
                continue
            }
        }
        return handled
    }

    /// Confirms carry the publish's sequence number on the channel, which starts at 1 after
    /// confirm.select, as the counter does: tag and counter are the same.
    private func confirmed(_ tag: UInt64, multiple: Bool) {
        condition.withLock {
            guard phase == .running else { return }
            let now = LoadClock.now()
            if multiple {
                _ = inFlight?.acked(through: tag, at: now)
            } else if inFlight?.acked(tag, at: now) == .unknown {
                inFlight?.note("publisher: a confirm for \(tag), which was never published")
            }
        }
    }

    // MARK: The consumer

    private func consumerThread(_ host: String, _ port: Int) {
        defer { sideExited() }
        let connection: AMQPConnection
        do {
            connection = try AMQPConnection(host: host, port: port)
            try connection.declareQueue(queue)
            try connection.setPrefetch(pattern.window * 2)
            try connection.consume(queue)
        } catch {
            return openFailed("consumer", error)
        }
        defer { connection.close() }
        if sideOpened() {
            do {
                try consume(connection)
            } catch {
                fail("consumer: \(error)")
            }
        }
        // A run leaves nothing behind on a broker it did not start.
        try? connection.deleteQueue(queue)
    }

    private func consume(_ connection: AMQPConnection) throws(DurableLoadError) {
        while isRunning() {
            guard let delivery = try connection.nextDelivery(timeout: 0.1) else { continue }
            received(delivery)
            try connection.ack(delivery.tag)
        }
    }

    private func received(_ delivery: AMQPConnection.Delivery) {
        let freed: Bool = condition.withLock {
            guard phase == .running else { return false }
            let receipt = inFlight?.received(delivery.counter, sentAt: delivery.sentAt, at: LoadClock.now())
            if receipt == .unknown { inFlight?.note("consumer: unknown counter \(delivery.counter)") }
            return receipt == .freedSlot
        }
        if freed { wakePublisher() }
    }

    // MARK: Phases

    /// False when the pair ended while this side was opening (the other failed, or abort()).
    private func sideOpened() -> Bool {
        condition.withLock {
            sidesOpen += 1
            if sidesOpen == 2 { opened.set(.success(())) }
            while phase == .opening { condition.wait() }
            return phase == .running
        }
    }

    private func openFailed(_ side: String, _ error: DurableLoadError) {
        condition.withLock {
            opened.set(.failure(error.context("\(side) of \(queue)")))
            end()
        }
    }

    private func isRunning() -> Bool {
        condition.withLock { phase == .running }
    }

    /// A connection failed: what is in flight will not settle, so the pair ends now.
    private func fail(_ error: String) {
        condition.withLock {
            guard phase == .running else { return }
            inFlight?.note(error)
            end()
        }
    }

    /// Holding `condition`: keeps the figures and wakes whoever waits.
    private func end() {
        if phase == .running, let inFlight { result = inFlight.finished() }
        phase = .done
        condition.broadcast()
        wakePublisher()
    }

    private func sideExited() {
        let last: Bool = condition.withLock {
            sidesRunning -= 1
            return sidesRunning == 0
        }
        if last { finished.set(condition.withLock { result }) }
    }
}
