import Foundation
import NIOCore
import SIMPCore
import Testing
@testable import SIMPClient

/// The client's choice of path (UDP, or datagrams inside the control connection) with injected
/// time: `PathChoice` alone, then the engine that follows it.
@Suite struct PathChoiceTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func ms(_ value: Int64) -> NIODeadline { t0 + .milliseconds(value) }

    @Test func theStreamIsTriedOnceWhenUDPHasNotAnsweredWithinItsHeadStart() {
        var paths = PathChoice(allowed: true)
        paths.sessionOpened(now: t0)
        #expect(paths.nextDeadline == ms(250))
        let tooSoon = paths.streamBindDue(now: ms(249))
        #expect(!tooSoon)
        let atHeadStart = paths.streamBindDue(now: ms(250))
        #expect(atHeadStart)
        let again = paths.streamBindDue(now: ms(500))
        #expect(!again, "once: the stream loses nothing")
        #expect(paths.path == nil)
    }

    @Test func aUDPAnswerWithinTheHeadStartLeavesTheStreamUntried() {
        var paths = PathChoice(allowed: true)
        paths.sessionOpened(now: t0)
        let took = paths.bound(address: "10.0.0.1:7701", now: ms(3))
        #expect(took == .udp)
        let streamLater = paths.streamBindDue(now: ms(1000))
        #expect(!streamLater)
        let probed = paths.udpProbeDue(now: ms(60_000))
        #expect(!probed)
        #expect(paths.nextDeadline == nil)
    }

    @Test func neverTriesTheStream() {
        var paths = PathChoice(allowed: false)
        paths.sessionOpened(now: t0)
        #expect(paths.nextDeadline == nil)
        let streamEver = paths.streamBindDue(now: ms(10_000))
        #expect(!streamEver)
    }

    @Test func onTheStreamUDPIsProbedOnADoublingBackOffUntilItAnswers() {
        var paths = PathChoice(allowed: true)
        paths.sessionOpened(now: t0)
        _ = paths.streamBindDue(now: ms(250))
        let tookStream = paths.bound(address: "", now: ms(260))
        #expect(tookStream == .stream)
        #expect(paths.onStream)
        let unchanged = paths.bound(address: "", now: ms(270))
        #expect(unchanged == nil, "no change")
        var probes: [Int64] = []
        var now: Int64 = 260
        while now < 70_000 {
            now += 10
            if paths.udpProbeDue(now: ms(now)) { probes.append(now) }
        }
        let gaps = zip(probes.dropFirst(), probes).map { $0 - $1 }
        #expect(probes.first == 760, "the first probe half a second after the stream was taken")
        #expect(gaps.prefix(5) == [1000, 2000, 4000, 8000, 16_000])
        #expect(gaps.allSatisfy { $0 <= 30_000 }, "capped at 30 s: \(gaps)")
        let tookUDP = paths.bound(address: "10.0.0.1:7701", now: ms(now))
        #expect(tookUDP == .udp)
        let probedAfter = paths.udpProbeDue(now: ms(now + 60_000))
        #expect(!paths.onStream && !probedAfter)
    }

    @Test func aNewSessionStartsOverWithNothingKnown() {
        var paths = PathChoice(allowed: true)
        paths.sessionOpened(now: t0)
        _ = paths.bound(address: "", now: ms(300))
        paths.sessionEnded()
        #expect(paths.path == nil && paths.nextDeadline == nil)
        paths.sessionOpened(now: ms(1000))
        let streamAgain = paths.streamBindDue(now: ms(1250))
        #expect(streamAgain)
    }
}

@Suite struct ClientStreamPathTests {
    typealias T = ClientEngineTests

    /// The datagrams the actions carry inside the control connection, opened.
    static func streamed(_ actions: [ClientEngine.Action]) -> [(DatagramHeader, [UInt8])] {
        actions.compactMap {
            guard case .sendControl(let envelope) = $0, case .datagram(let bytes) = envelope.body else { return nil }
            var buffer = ByteBuffer(bytes: bytes)
            guard let header = try? Datagram.decodeHeader(&buffer),
                  let payload = try? DatagramSeal.open(header, sealed: buffer, key: T.key, direction: .toServer) else { return nil }
            return (header, payload)
        }
    }

    /// A session opened whose UDP BIND is never answered; ticks every 10 ms up to `until`.
    static func unanswered(until ms: Int64) -> (ClientEngine, [ClientEngine.Action]) {
        var engine = T.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: T.start)
        var actions = engine.handle(.sessionOpened(T.response()), at: T.start)
        var now: Int64 = 0
        while now < ms {
            now += 10
            actions += engine.handle(.tick, at: T.at(now))
        }
        return (engine, actions)
    }

    @Test func theBindGoesOverTheStreamWhenUDPIsSilentAQuarterSecond() {
        let (_, early) = Self.unanswered(until: 240)
        #expect(Self.streamed(early).isEmpty)
        #expect(T.datagrams(early).allSatisfy { $0.0.kind == .bind } && !T.datagrams(early).isEmpty, "UDP BINDs meanwhile")
        let (_, actions) = Self.unanswered(until: 260)
        let streamed = Self.streamed(actions)
        #expect(streamed.map { $0.0.kind } == [.bind])
        #expect(streamed.first?.1 == [1, 2, 3], "the session's bind token")
        // One numbering for both paths: the streamed BIND's number follows the UDP ones'.
        let udpNumbers = T.datagrams(actions).map { $0.0.packetNumber }
        #expect(streamed.first.map { $0.0.packetNumber > udpNumbers.max() ?? 0 } == true)
    }

    @Test func onTheStreamMessagesGoInsideTheConnectionWithNoRetransmitTimer() {
        var (engine, _) = Self.unanswered(until: 260)
        _ = engine.handle(.control(Simp_Envelope(.bound(Simp_Bound()))), at: T.at(270))
        let connected = engine.handle(.attemptEnded(index: 0, .connect, .success(())), at: T.at(271))
        #expect(T.events(connected) == [.connected(user: "alice", path: .stream)])
        _ = engine.handle(.send([T.outgoing("m1")]), at: T.at(300))
        let flushed = engine.handle(.turnEnded(.flush), at: T.at(300))
        #expect(Self.streamed(flushed).map { $0.0.kind } == [.data])
        #expect(T.datagrams(flushed).isEmpty, "nothing over UDP")
        // No accepted comes for 20 s: the stream loses nothing, so nothing is sent again
        // (only UDP probes, BINDs, leave).
        var resent: [DatagramKind] = []
        var now: Int64 = 300
        while now < 20_000 {
            now += 10
            var actions = engine.handle(.tick, at: T.at(now))
            if T.turnEnds(actions).contains(.flush) { actions += engine.handle(.turnEnded(.flush), at: T.at(now)) }
            resent += Self.streamed(actions).map { $0.0.kind } + T.datagrams(actions).map { $0.0.kind }
        }
        #expect(!resent.contains(.data) && !resent.contains(.bundle), "\(resent)")
        #expect(resent.contains(.bind), "UDP probed")
        #expect(!resent.contains(.keepalive), "no keepalive: there is no NAT mapping to hold")
    }

    @Test func aUDPAnswerMovesTheSessionToUDPAndSaysSo() {
        var (engine, _) = Self.unanswered(until: 260)
        _ = engine.handle(.control(Simp_Envelope(.bound(Simp_Bound()))), at: T.at(270))
        _ = engine.handle(.attemptEnded(index: 0, .connect, .success(())), at: T.at(271))
        // The server challenged the probe's address; the client answers over the connection.
        let moved = engine.handle(.control(Simp_Envelope(.bound(T.udpBound))), at: T.at(900))
        #expect(T.events(moved) == [.path(.udp)])
        _ = engine.handle(.send([T.outgoing("m2")]), at: T.at(910))
        let flushed = engine.handle(.turnEnded(.flush), at: T.at(910))
        #expect(T.datagrams(flushed).map { $0.0.kind } == [.data])
        #expect(Self.streamed(flushed).isEmpty)
    }

    @Test func withNeverTheBindStaysOnUDP() {
        var configuration = T.configuration()
        configuration.datagramsOverStream = .never
        var engine = ClientEngine(configuration: configuration, random: { 1 << 63 })
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: T.start)
        var actions = engine.handle(.sessionOpened(T.response()), at: T.start)
        for now in stride(from: Int64(10), through: 5000, by: 10) { actions += engine.handle(.tick, at: T.at(now)) }
        #expect(Self.streamed(actions).isEmpty)
        #expect(T.datagrams(actions).count >= 15, "BIND over UDP every 250 ms")
    }
}
