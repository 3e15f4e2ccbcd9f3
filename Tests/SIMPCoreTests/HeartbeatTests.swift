import NIOCore
import NIOEmbedded
import SIMPCore
import Testing

@Suite struct DeadlineWheelTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let ms = TimeAmount.milliseconds

    @Test func anEntryComesOutAtItsDeadlineAndNotBefore() {
        var wheel = DeadlineWheel<Int>(resolution: ms(100), now: t0)
        wheel.schedule(1, at: t0 + ms(250))
        #expect(wheel.advance(to: t0 + ms(100)) == [])
        #expect(wheel.advance(to: t0 + ms(299)) == [])
        #expect(wheel.advance(to: t0 + ms(300)) == [1])
        #expect(wheel.isEmpty)
    }

    @Test func aDeadlineOnASlotBoundaryIsNotLate() {
        var wheel = DeadlineWheel<Int>(resolution: ms(100), now: t0)
        wheel.schedule(1, at: t0 + ms(200))
        #expect(wheel.advance(to: t0 + ms(199)) == [])
        #expect(wheel.advance(to: t0 + ms(200)) == [1])
    }

    @Test func aDeadlineAlreadyPastComesOutOfTheNextAdvance() {
        var wheel = DeadlineWheel<Int>(resolution: ms(100), now: t0)
        #expect(wheel.advance(to: t0 + ms(500)) == [])
        wheel.schedule(7, at: t0)
        #expect(wheel.advance(to: t0 + ms(500)) == [])
        #expect(wheel.advance(to: t0 + ms(600)) == [7])
    }

    @Test func entriesComeOutInDeadlineOrderAfterALongStall() {
        var wheel = DeadlineWheel<Int>(resolution: ms(10), now: t0)
        for (id, at) in [(3, 900), (1, 20), (2, 400), (4, 5_000_000)] { wheel.schedule(id, at: t0 + ms(Int64(at))) }
        #expect(wheel.count == 4)
        #expect(wheel.advance(to: t0 + .seconds(3600)) == [1, 2, 3])
        #expect(wheel.count == 1)
        #expect(wheel.advance(to: t0 + .seconds(5_000)) == [4])
    }

    @Test func manyEntriesEachComeOutOnce() {
        var wheel = DeadlineWheel<Int>(resolution: ms(100), now: t0)
        for id in 0..<10_000 { wheel.schedule(id, at: t0 + ms(Int64(id % 3_000))) }
        var seen: [Int] = []
        var now = t0
        while now < t0 + .seconds(4) {
            now = now + ms(100)
            seen += wheel.advance(to: now)
        }
        #expect(seen.sorted() == Array(0..<10_000))
    }
}

@Suite struct HeartbeatRuleTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let rule = Heartbeat(interval: .seconds(60))

    @Test func aPeerIsGivenUpAfterOneAndAHalfIntervalsButNeverWithinASecondOfOne() {
        #expect(rule.silenceLimit == .seconds(90))
        #expect(Heartbeat(interval: .milliseconds(500)).silenceLimit == .milliseconds(1_500))
        #expect(Heartbeat(interval: .seconds(2)).silenceLimit == .seconds(3))
    }

    @Test func aConnectionThatWroteRecentlyWaitsForTheEarlierOfItsTwoDeadlines() {
        #expect(rule.check(lastRead: t0, lastWrite: t0, now: t0 + .seconds(10)) == .wait(until: t0 + .seconds(60)))
        #expect(rule.check(lastRead: t0, lastWrite: t0 + .seconds(80), now: t0 + .seconds(85)) == .wait(until: t0 + .seconds(90)))
    }

    @Test func aPingIsDueAfterAnIntervalWithoutWriting() {
        #expect(rule.check(lastRead: t0 + .seconds(20), lastWrite: t0, now: t0 + .seconds(60)) == .ping(next: t0 + .seconds(110)))
        #expect(rule.check(lastRead: t0, lastWrite: t0, now: t0 + .seconds(75)) == .ping(next: t0 + .seconds(90)))
    }

    @Test func silenceBeyondTheLimitClosesTheConnection() {
        #expect(rule.check(lastRead: t0, lastWrite: t0 + .seconds(89), now: t0 + .seconds(90)) == .close)
    }

    @Test func theWheelTicksAtASixteenthOfTheIntervalWithinBounds() {
        #expect(rule.resolution == .seconds(1))
        #expect(Heartbeat(interval: .milliseconds(800)).resolution == .milliseconds(50))
        #expect(Heartbeat(interval: .milliseconds(50)).resolution == .milliseconds(10))
    }
}

/// When the framing gets its wheel: at once (the server), or once connected (the client,
/// which learns the interval from the server).
enum HeartbeatStart: CaseIterable, Sendable {
    case atInit
    case afterConnect

    /// What the next handler writes.
    static func outbound(_ text: String) -> NIOAny { NIOAny(envelope(text)) }

    static func write(_ text: String, to channel: EmbeddedChannel) throws {
        try channel.writeOutbound(envelope(text))
    }

    /// What the peer sends, and what reaches the socket for `outbound(text)`: a whole frame.
    static func frame(_ text: String) -> ByteBuffer {
        Frame.encode(envelope(text))
    }

    private static func envelope(_ text: String) -> Simp_Envelope {
        var ping = Simp_Ping()
        ping.nonce = UInt64(text.utf8.count)
        return Simp_Envelope(requestID: 1, .ping(ping))
    }
}

/// Records the idle events a heartbeat raises and answers `.write` with a ping, as the control
/// handlers do, and closes on `.read`.
private final class IdleRecorder: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    var events: [IdleStateHandler.IdleStateEvent] = []

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let idle = event as? IdleStateHandler.IdleStateEvent else { return }
        events.append(idle)
        switch idle {
        case .write: context.writeAndFlush(HeartbeatStart.outbound("ping"), promise: nil)
        case .read: context.close(promise: nil)
        case .all: break
        }
    }
}

@Suite struct FramingHeartbeatTests {
    let heartbeat = Heartbeat(interval: .seconds(1))

    private func connection(_ start: HeartbeatStart, on loop: EmbeddedEventLoop,
                            wheel: HeartbeatWheel) throws -> (EmbeddedChannel, IdleRecorder) {
        let recorder = IdleRecorder()
        let channel = EmbeddedChannel(loop: loop)
        let framing = EnvelopeFrameHandler(heartbeat: start == .atInit ? wheel : nil)
        try channel.pipeline.syncOperations.addHandlers([framing, recorder])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        if start == .afterConnect { framing.watchHeartbeat(on: wheel) }
        return (channel, recorder)
    }

    @Test(arguments: HeartbeatStart.allCases)
    func aSilentPeerIsPingedAfterAnIntervalThenDroppedAfterOneAndAHalf(_ start: HeartbeatStart) throws {
        let loop = EmbeddedEventLoop()
        let wheel = HeartbeatWheel(loop: loop, heartbeat: Heartbeat(interval: .seconds(2)))
        let (channel, recorder) = try connection(start, on: loop, wheel: wheel)
        loop.advanceTime(by: .milliseconds(1_990))
        #expect(recorder.events == [])
        loop.advanceTime(by: .milliseconds(150))
        #expect(recorder.events == [.write])
        #expect(try channel.readOutbound(as: ByteBuffer.self) == HeartbeatStart.frame("ping"))
        loop.advanceTime(by: .milliseconds(800))
        #expect(recorder.events == [.write])
        loop.advanceTime(by: .milliseconds(200))
        #expect(recorder.events == [.write, .read])
        #expect(!channel.isActive)
        #expect(wheel.watchedCount == 0)
    }

    @Test(arguments: HeartbeatStart.allCases)
    func aPeerThatKeepsTalkingIsKeptAndAWriterIsNotPinged(_ start: HeartbeatStart) throws {
        let loop = EmbeddedEventLoop()
        let wheel = HeartbeatWheel(loop: loop, heartbeat: heartbeat)
        let (channel, recorder) = try connection(start, on: loop, wheel: wheel)
        for _ in 0..<50 {
            loop.advanceTime(by: .milliseconds(400))
            try channel.writeInbound(HeartbeatStart.frame("frame"))
            try HeartbeatStart.write("reply", to: channel)
        }
        #expect(recorder.events == [])
        #expect(wheel.watchedCount == 1)
        try channel.close().wait()
        #expect(wheel.watchedCount == 0)
    }

    @Test(arguments: HeartbeatStart.allCases)
    func connectionsOnOneWheelAreWatchedOnlyWhileOpen(_ start: HeartbeatStart) throws {
        let loop = EmbeddedEventLoop()
        let wheel = HeartbeatWheel(loop: loop, heartbeat: heartbeat)
        var channels: [(EmbeddedChannel, IdleRecorder)] = []
        for _ in 0..<100 { channels.append(try connection(start, on: loop, wheel: wheel)) }
        #expect(wheel.watchedCount == 100)
        for (channel, _) in channels.prefix(60) { try channel.close().wait() }
        #expect(wheel.watchedCount == 40)
        loop.advanceTime(by: .milliseconds(1_100))
        #expect(channels.prefix(60).allSatisfy { $0.1.events.isEmpty })
        #expect(channels.suffix(40).map { $0.1.events } == Array(repeating: [.write], count: 40))
        for (channel, _) in channels.suffix(40) { try channel.close().wait() }
        #expect(wheel.watchedCount == 0)
    }

    @Test func framingWithoutAWheelKeepsNoHeartbeat() throws {
        let loop = EmbeddedEventLoop()
        let recorder = IdleRecorder()
        let channel = EmbeddedChannel(loop: loop)
        try channel.pipeline.syncOperations.addHandlers([EnvelopeFrameHandler(), recorder])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        loop.advanceTime(by: .seconds(600))
        #expect(recorder.events == [])
    }
}
