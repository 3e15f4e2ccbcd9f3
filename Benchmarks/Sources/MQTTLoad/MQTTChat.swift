import NIOCore

/// Chat traffic through an MQTT broker: one connection per user, subscribed at QoS 1 to the
/// user's own topic, publishing at QoS 1 to a random peer's topic at Poisson times. Each
/// payload starts with the message's number and its send time (8 bytes each, big endian), as
/// in the fan-out.
public enum MQTTChat {
    /// Connections opened at once: a burst of thousands overflows the broker's listen backlog,
    /// and the dropped SYNs come back a second or more later.
    static let openingAtOnce = 256

    public static func run(_ pattern: ChatPattern, host: String, port: Int, group: any EventLoopGroup) async throws -> ChatResult {
        let users = try await open(pattern, host: host, port: port, group: group)
        let result: ChatResult
        do {
            result = try await load(users)
        } catch {
            await close(users)
            throw error
        }
        await close(users)
        return result
    }

    /// Every user connected and subscribed; if any fails, all are closed and the first error thrown.
    public static func open(_ pattern: ChatPattern, host: String, port: Int, group: any EventLoopGroup) async throws -> Users {
        try validate(pattern)
        let runID = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let loops = (0..<pattern.sessions).map { _ in group.next() }
        let tallies = ChatTally.perLoop(loops)
        let all = loops.enumerated().map { user, loop in
            MQTTChatter(user: user, runID: runID, pattern: pattern, tally: tallies[ObjectIdentifier(loop)]!)
        }
        let users = Users(pattern: pattern, all: all, tallies: Array(tallies.values))
        do {
            try await connect(users.all, host: host, port: port)
        } catch {
            await close(users)
            throw error
        }
        return users
    }

    /// `openingAtOnce` at a time; the first error once every attempt of its batch has ended.
    private static func connect(_ users: [MQTTChatter], host: String, port: Int) async throws {
        for batch in stride(from: 0, to: users.count, by: openingAtOnce) {
            var firstError: (any Error)?
            for opening in users[batch..<min(batch + openingAtOnce, users.count)].map({ $0.open(host: host, port: port) }) {
                do {
                    try await opening.get()
                } catch {
                    firstError = firstError ?? error
                }
            }
            if let firstError { throw firstError }
        }
    }

    /// The connected users of one run.
    public struct Users: Sendable {
        let pattern: ChatPattern
        let all: [MQTTChatter]
        let tallies: [ChatTally]
    }

    /// The load from now: warm-up, window and drain. Every user's clock is set first, so nobody
    /// counts a message before its own run began; then the sends start.
    public static func load(_ users: Users) async throws -> ChatResult {
        let start = LoadClock.now()
        let clock = users.pattern.clock(start: start)
        try await ChatTally.waitForAll(users.all.map { $0.prepare(clock, start: start) })
        for user in users.all { user.start() }
        try await ChatTally.waitForAll(users.all.map { $0.settled() })
        try await waitForEveryMessage(users.tallies, until: clock.drainUntil)
        return try await ChatTally.total(users.tallies, seconds: users.pattern.duration)
    }

    public static func close(_ users: Users) async {
        for closing in users.all.map({ $0.close() }) { try? await closing.get() }
    }

    static func validate(_ pattern: ChatPattern) throws(MQTTLoadError) {
        guard pattern.sessions >= 2 else { throw .invalidPattern("a chat needs at least two users") }
        guard pattern.rate > 0 else { throw .invalidPattern("rate must be positive") }
        guard (16...1_000_000).contains(pattern.payloadBytes) else {
            throw .invalidPattern("payload must be 16 bytes (the message counter and its send time) to 1 MB")
        }
        guard pattern.duration > 0, pattern.warmup >= 0, pattern.drain >= 0 else {
            throw .invalidPattern("duration must be positive, warmup and drain not negative")
        }
    }

    static func topic(_ runID: String, user: Int) -> String { "simp-bench/\(runID)/chat/\(user)" }

    /// A PUBACK says the broker has the message, not that its subscriber does: until the drain
    /// ends, wait for the receivers' count to reach what was published.
    private static func waitForEveryMessage(_ tallies: [ChatTally], until deadline: UInt64) async throws {
        while LoadClock.now() < deadline {
            let total = try await ChatTally.total(tallies, seconds: 0)
            if total.received >= total.sent { return }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// One user of the MQTT chat. Its connection and all of this state live on `loop`: every method
/// below runs there (the public-facing ones hop to it), which is why closures may capture it.
final class MQTTChatter: @unchecked Sendable {
    private let tally: ChatTally
    private var loop: any EventLoop { tally.loop }
    private let user: Int
    private let runID: String
    private let pattern: ChatPattern
    /// The padding after the number and the send time.
    private let padding: ByteBuffer

    private var channel: (any Channel)?
    private var subscribed: EventLoopPromise<Void>?
    private var clock = LoadClock(warmup: 0, duration: 0, drain: 0, start: 0)
    private var schedule: ChatSchedule<SystemRandomNumberGenerator>?
    private var timer: Scheduled<Void>?
    private var sequence: UInt64 = 0
    private var packetID: UInt16 = 0
    /// Send times of the PUBLISHes not yet acknowledged, by packet id.
    private var inFlight: [UInt16: UInt64] = [:]
    private var inbox = ChatInbox()
    /// The measured window is over: nothing more is published.
    private var windowOver = false
    /// Sending is over and every PUBLISH acknowledged, or the drain ended, or the connection failed.
    private let done: EventLoopPromise<Void>
    private var ended = false

    init(user: Int, runID: String, pattern: ChatPattern, tally: ChatTally) {
        self.user = user
        self.runID = runID
        self.pattern = pattern
        self.tally = tally
        done = tally.loop.makePromise()
        var padding = ByteBuffer()
        padding.writeRepeatingByte(UInt8(ascii: "x"), count: pattern.payloadBytes - 16)
        self.padding = padding
    }

    // MARK: Opening and closing

    /// Connected, and the user's own topic granted at QoS 1.
    func open(host: String, port: Int) -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            let accepted = loop.makePromise(of: Void.self)
            let subscribed = loop.makePromise(of: Void.self)
            self.subscribed = subscribed
            let clientID = "bench-\(runID)-c\(user)"
            MQTTConnection.connect(host: host, port: port, clientID: clientID, on: loop, accepted: accepted) { [self] event in
                handle(event)
            }.whenSuccess { [self] channel in self.channel = channel }
            accepted.futureResult.whenComplete { [self] outcome in subscribe(after: outcome) }
            return MQTTFanOut.bounded(subscribed, on: loop, "connecting \(clientID) and subscribing it")
        }
    }

    private func subscribe(after connecting: Result<Void, any Error>) {
        switch connecting {
        case .success:
            guard let channel else { return }
            let packet = MQTTPacket.subscribe(packetID: 1, topic: MQTTChat.topic(runID, user: user), qos: 1)
            channel.writeAndFlush(MQTTConnection.encoded(packet, channel.allocator), promise: nil)
        case .failure(let error):
            subscribed?.fail(error)
            subscribed = nil
        }
    }

    func close() -> EventLoopFuture<Void> {
        loop.flatSubmit { [self] in
            end()
            return MQTTFanOut.disconnect(channel, on: loop)
        }
    }

    // MARK: The load

    /// The run's clock, and a schedule from `start`; nothing is sent yet.
    func prepare(_ clock: LoadClock, start: UInt64) -> EventLoopFuture<Void> {
        loop.submit { [self] in
            self.clock = clock
            schedule = ChatSchedule(user: user, users: pattern.sessions, rate: pattern.rate, start: start,
                                    random: SystemRandomNumberGenerator(), contacts: pattern.contacts)
        }
    }

    func start() {
        loop.execute { [self] in
            guard !ended else { return }
            loop.scheduleTask(deadline: .uptimeNanoseconds(clock.drainUntil)) { [self] in end() }
            arm()
        }
    }

    /// Completes once sending is over and the broker has acknowledged everything (or the drain ended).
    func settled() -> EventLoopFuture<Void> { done.futureResult }

    private func arm() {
        guard let next = schedule?.next, next < clock.measureUntil, !ended else { return sendingOver() }
        timer = loop.scheduleTask(deadline: .uptimeNanoseconds(next)) { [self] in fire() }
    }

    private func fire() {
        guard let channel, !ended else { return }
        for (due, peer) in schedule?.take(dueBy: LoadClock.now(), before: clock.measureUntil) ?? [] { publish(to: peer, due: due, channel) }
        arm()
    }

    private func publish(to peer: Int, due: UInt64, _ channel: any Channel) {
        sequence += 1
        packetID = packetID == .max ? 1 : packetID + 1
        let now = LoadClock.now()
        var payload = channel.allocator.buffer(capacity: pattern.payloadBytes)
        payload.writeInteger(ChatPattern.counter(user: user, sequence: sequence))
        payload.writeInteger(now)
        payload.writeImmutableBuffer(padding)
        let packet = MQTTPacket.publish(topic: MQTTChat.topic(runID, user: peer), packetID: packetID, payload: payload)
        channel.writeAndFlush(MQTTConnection.encoded(packet, channel.allocator), promise: nil)
        inFlight[packetID] = now
        tally.result.recordSend(due: due, at: now, clock)
    }

    private func handle(_ event: MQTTConnectionEvent) {
        switch event {
        case .packet(.suback(_, let codes)):
            // QoS 1 deliveries are the pattern: a grant of 0 is as much a refusal as 0x80.
            if codes == [1] {
                subscribed?.succeed(())
            } else {
                subscribed?.fail(MQTTError.subscriptionRefused(topic: MQTTChat.topic(runID, user: user), returnCode: codes.first ?? 0x80))
            }
            subscribed = nil
        case .packet(.puback(let id)):
            acknowledged(id)
        case .packet(.publish(_, _, let payload)):
            received(payload)
        case .readComplete:
            return
        case .packet(let packet):
            failed(.unexpectedPacket("\(packet) to a chat user"))
        case .failed(let error):
            failed(error)
        }
    }

    private func acknowledged(_ id: UInt16) {
        guard let sentAt = inFlight.removeValue(forKey: id) else { return }
        if clock.measured(sentAt) { _ = tally.result.sendToAccepted.record(FanOutResult.micros(from: sentAt, to: LoadClock.now())) }
        if windowOver, inFlight.isEmpty { end() }
    }

    private func received(_ payload: ByteBuffer) {
        guard let counter = payload.getInteger(at: payload.readerIndex, as: UInt64.self),
              let sentAt = payload.getInteger(at: payload.readerIndex + 8, as: UInt64.self) else {
            return tally.result.note(error: "user \(user): a PUBLISH of \(payload.readableBytes) bytes, too short for a counter and a time")
        }
        inbox.receive(counter: counter, sentAt: sentAt, clock, into: &tally.result)
    }

    private func failed(_ error: MQTTError) {
        if let subscribed {
            self.subscribed = nil
            return subscribed.fail(error)
        }
        guard !ended else { return }
        tally.result.disconnects += 1
        tally.result.note(error: "user \(user): \(error)")
        end()
    }

    /// The window is over: done once the broker has acknowledged what is still in flight.
    private func sendingOver() {
        windowOver = true
        if inFlight.isEmpty { end() }
    }

    private func end() {
        guard !ended else { return }
        ended = true
        timer?.cancel()
        timer = nil
        done.succeed(())
    }
}
