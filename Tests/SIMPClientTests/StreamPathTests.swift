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

    /// On UDP: three timeouts in a row and a second with no answer, and the stream is asked
    /// for, once until the server answers.
    @Test func udpGoneQuietAsksForTheStreamOnce() {
        var paths = PathChoice(allowed: true)
        paths.sessionOpened(now: t0)
        _ = paths.bound(address: "10.0.0.1:7701", now: ms(10))
        // Many timeouts within the first second: a blip, not a loss.
        var asked: [Int64] = []
        for now in stride(from: Int64(20), through: 1000, by: 20) where paths.udpTimedOut(now: ms(now)) { asked.append(now) }
        #expect(asked.isEmpty)
        // An answer starts the count again.
        paths.udpHeard(now: ms(1000))
        let twoMore = [1300, 1700].map { paths.udpTimedOut(now: ms($0)) }
        #expect(twoMore == [false, false])
        let third = paths.udpTimedOut(now: ms(2000))
        #expect(third, "three timeouts, a second after the last answer")
        let again = paths.udpTimedOut(now: ms(2500))
        #expect(!again, "asked once until the server answers")
        // The server heard from us over UDP and stays: the count starts over.
        #expect(paths.bound(address: "10.0.0.1:7701", now: ms(2600)) == nil)
        let afterRefusal = [2700, 2800, 3000].map { paths.udpTimedOut(now: ms($0)) }
        #expect(afterRefusal == [false, false, false])
        let later = paths.udpTimedOut(now: ms(3700))
        #expect(later)
    }

    @Test func neverAsksForTheStreamWhenItIsNotAllowed() {
        var paths = PathChoice(allowed: false)
        paths.sessionOpened(now: t0)
        _ = paths.bound(address: "10.0.0.1:7701", now: ms(10))
        let asked = (1...20).map { paths.udpTimedOut(now: ms(Int64($0) * 1000)) }
        #expect(!asked.contains(true))
    }

    /// After UDP was lost mid-session, UDP is probed after 2 s doubling to 10 min; a second
    /// fall in the session starts at 4 s: a path that breaks again is tried ever more rarely.
    @Test func afterAFallUDPIsProbedOnALongerBackOffThatGrowsWithEachFall() {
        var paths = PathChoice(allowed: true)
        paths.sessionOpened(now: t0)
        _ = paths.bound(address: "10.0.0.1:7701", now: ms(10))
        #expect(paths.bound(address: "", now: ms(5000)) == .stream)
        #expect(paths.falls == 1)
        func probes(from start: Int64, until end: Int64) -> [Int64] {
            var probes: [Int64] = []
            var now = start
            while now < end {
                now += 100
                if paths.udpProbeDue(now: ms(now)) { probes.append(now) }
            }
            return probes
        }
        let first = probes(from: 5000, until: 5000 + 2_000_000)
        #expect(first.first == 7000, "2 s after the fall")
        let gaps = zip(first.dropFirst(), first).map { $0 - $1 }
        #expect(gaps.prefix(4) == [4000, 8000, 16_000, 32_000])
        #expect(gaps.max() == 600_000, "capped at 10 min: \(gaps)")
        let end = first.last! + 100
        #expect(paths.bound(address: "10.0.0.1:7701", now: ms(end)) == .udp)
        #expect(paths.bound(address: "", now: ms(end + 1000)) == .stream)
        #expect(paths.falls == 2)
        let second = probes(from: end + 1000, until: end + 20_000)
        #expect(second.first == end + 1000 + 4000, "4 s after the second fall")
        // A new session forgets the falls: the race starts over.
        paths.sessionOpened(now: ms(end + 30_000))
        #expect(paths.falls == 0)
    }

    @Test func aThrottledUDPAsksForTheStreamOnce() {
        var paths = PathChoice(allowed: true)
        paths.sessionOpened(now: t0)
        _ = paths.bound(address: "10.0.0.1:7701", now: ms(10))
        let first = paths.udpThrottled()
        let again = paths.udpThrottled()
        #expect(first && !again)
        var never = PathChoice(allowed: false)
        never.sessionOpened(now: t0)
        _ = never.bound(address: "10.0.0.1:7701", now: ms(10))
        let asked = never.udpThrottled()
        #expect(!asked)
    }

    /// Issue 45, item 3: after a network change UDP is probed at once, and the back-off
    /// starts over (from the fall's 2 s, since this session fell), however long it had grown.
    @Test func aNetworkChangeOnTheStreamProbesUDPAtOnceAndStartsTheBackOffOver() {
        var paths = PathChoice(allowed: true)
        paths.sessionOpened(now: t0)
        _ = paths.bound(address: "10.0.0.1:7701", now: ms(10))
        _ = paths.bound(address: "", now: ms(1000))
        var probes: [Int64] = []
        for now in stride(from: Int64(1000), through: 200_000, by: 100) where paths.udpProbeDue(now: ms(now)) { probes.append(now) }
        #expect(probes == [3000, 7000, 15_000, 31_000, 63_000, 127_000], "the back-off grew to 128 s")
        paths.networkChanged(now: ms(200_000))
        #expect(paths.nextDeadline == ms(200_000))
        var after: [Int64] = []
        for now in stride(from: Int64(200_000), through: 220_000, by: 100) where paths.udpProbeDue(now: ms(now)) { after.append(now) }
        #expect(after == [200_000, 202_000, 206_000, 214_000], "at once, then 2 s doubling")
        // On UDP there is nothing to probe: the change is the keepalive's to show.
        _ = paths.bound(address: "10.0.0.2:7701", now: ms(220_000))
        paths.networkChanged(now: ms(230_000))
        #expect(paths.nextDeadline == nil)
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

    /// Bound over UDP, a first message answered; one sent at 100 ms gets no `accepted`: UDP is
    /// lost (silent from 60 ms on). Ticks every
    /// 10 ms (flushing as the engine asks) up to `until`; returns the engine and its actions.
    static func udpGoesQuiet(until ms: Int64) -> (ClientEngine, [ClientEngine.Action]) {
        var engine = T.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: T.start)
        _ = engine.handle(.sessionOpened(T.response()), at: T.start)
        _ = engine.handle(.control(Simp_Envelope(.bound(T.udpBound))), at: T.at(5))
        _ = engine.handle(.attemptEnded(index: 0, .connect, .success(())), at: T.at(6))
        // A first message answered in 10 ms: the retransmit timers know the round trip.
        _ = engine.handle(.send([T.outgoing("m0")]), at: T.at(50))
        _ = engine.handle(.turnEnded(.flush), at: T.at(50))
        let answer = Simp_Accepted.with {
            $0.messageID = "m0"
            $0.toUser = "bob"
            $0.seq = 1
        }
        _ = engine.handle(.control(Simp_Envelope(.accepted(answer))), at: T.at(60))
        _ = engine.handle(.send([T.outgoing("m1")]), at: T.at(100))
        var actions = engine.handle(.turnEnded(.flush), at: T.at(100))
        var now: Int64 = 100
        while now < ms {
            now += 10
            var tick = engine.handle(.tick, at: T.at(now))
            if T.turnEnds(tick).contains(.flush) { tick += engine.handle(.turnEnded(.flush), at: T.at(now)) }
            actions += tick
        }
        return (engine, actions)
    }

    @Test func udpGoneQuietAsksForTheStreamAndTheServersAnswerMovesWhatWaitsThere() {
        let (_, early) = Self.udpGoesQuiet(until: 1000)
        #expect(Self.streamed(early).isEmpty, "within a second: resends over UDP only")
        #expect(T.datagrams(early).filter { $0.0.kind == .data }.count >= 3, "resent over UDP")
        var (engine, actions) = Self.udpGoesQuiet(until: 2500)
        let asked = Self.streamed(actions)
        #expect(asked.map { $0.0.kind } == [.bind], "one BIND inside the connection asks for the stream")
        #expect(asked.first?.1 == [], "an empty one: not the race's")
        // The server moves the session: its bound names no address.
        var moved = engine.handle(.control(Simp_Envelope(.bound(Simp_Bound()))), at: T.at(2510))
        moved += engine.handle(.turnEnded(.flush), at: T.at(2510))
        #expect(T.events(moved).contains(.path(.stream)))
        let resent = Self.streamed(moved).map { $0.0.kind }
        #expect(resent == [.data], "what waited goes again inside the connection at once: \(resent)")
        // And from then on nothing is resent on a timer; UDP is probed 2 s after the fall.
        var later: [DatagramKind] = []
        var udp: [(Int64, DatagramKind)] = []
        var now: Int64 = 2510
        while now < 10_000 {
            now += 10
            var tick = engine.handle(.tick, at: T.at(now))
            if T.turnEnds(tick).contains(.flush) { tick += engine.handle(.turnEnded(.flush), at: T.at(now)) }
            later += Self.streamed(tick).map { $0.0.kind }
            udp += T.datagrams(tick).map { (now, $0.0.kind) }
        }
        #expect(!later.contains(.data) && !later.contains(.bundle), "\(later)")
        #expect(udp.first.map { $0.1 == .bind && $0.0 >= 4510 } == true, "the first UDP probe 2 s after the fall: \(udp)")
        #expect(!udp.contains { $0.1 == .data })
    }

    @Test func anAcceptedInTimeKeepsTheSessionOnUDP() {
        var engine = T.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: T.start)
        _ = engine.handle(.sessionOpened(T.response()), at: T.start)
        _ = engine.handle(.control(Simp_Envelope(.bound(T.udpBound))), at: T.at(5))
        _ = engine.handle(.attemptEnded(index: 0, .connect, .success(())), at: T.at(6))
        var streamed: [DatagramKind] = []
        // A message every 100 ms for 5 s; each is accepted 600 ms later (a slow server): the
        // resends time out, but answers keep coming.
        var sent: [(Int64, String)] = []
        var now: Int64 = 0
        while now < 5000 {
            now += 10
            var actions: [ClientEngine.Action] = []
            if now % 100 == 0 {
                let id = "m\(now)"
                actions += engine.handle(.send([T.outgoing(id)]), at: T.at(now))
                sent.append((now, id))
            }
            if let (at, id) = sent.first, now - at >= 600 {
                sent.removeFirst()
                let accepted = Simp_Accepted.with {
                    $0.messageID = id
                    $0.toUser = "bob"
                    $0.seq = UInt64(now)
                }
                actions += engine.handle(.control(Simp_Envelope(.accepted(accepted))), at: T.at(now))
            }
            actions += engine.handle(.tick, at: T.at(now))
            if T.turnEnds(actions).contains(.flush) { actions += engine.handle(.turnEnded(.flush), at: T.at(now)) }
            streamed += Self.streamed(actions).map { $0.0.kind }
        }
        #expect(streamed.isEmpty, "\(streamed)")
    }

    /// `rebindUDP` after a network change, on the stream: a BIND over the new socket at once,
    /// not at the back-off's next probe.
    @Test func aReplacedSocketOnTheStreamProbesUDPAtOnce() {
        var (engine, _) = Self.unanswered(until: 260)
        _ = engine.handle(.control(Simp_Envelope(.bound(Simp_Bound()))), at: T.at(270))
        _ = engine.handle(.attemptEnded(index: 0, .connect, .success(())), at: T.at(271))
        // The first probe (770 ms) went unanswered; the next is due at 1,770 ms.
        var now: Int64 = 271
        while now < 1000 {
            now += 10
            _ = engine.handle(.tick, at: T.at(now))
        }
        let replaced = engine.handle(.udpReplaced, at: T.at(1000))
        #expect(T.datagrams(replaced).map { $0.0.kind } == [.bind], "a probe over UDP at once")
        #expect(Self.streamed(replaced).isEmpty)
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

/// Issue 45, item 4, the client's direction: 1,500 messages through a policer of 20 datagrams
/// a second (bursts of 20) on a 1 ms path, the server acknowledging what arrives and naming
/// what it skipped: within 2 s the uplink says UDP is throttled, while most still wait.
@Suite struct UplinkThrottleTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func aBacklogBehindAPolicerIsFoundThrottled() {
        var uplink = Uplink(windowed: true)
        let payload = Array(repeating: UInt8(0x61), count: 60)
        for index in 0..<1500 { uplink.send("m\(index)", payload, now: t0, reason: .first) }
        var tokens = 20.0
        var arrived = 0
        var throttledAt: Int64?
        for ms in Int64(1)...3000 {
            let now = t0 + .milliseconds(ms)
            tokens = min(20, tokens + 0.02)
            let release = uplink.release(now: now, bundles: false)
            for id in release.ids {
                if tokens >= 1 {
                    tokens -= 1
                    arrived += 1
                    uplink.acknowledged(id, now: now + .milliseconds(1))
                } else {
                    // The server names it missing with what arrives next: sent again, a loss shown.
                    uplink.send(id, payload, now: now + .milliseconds(1), reason: .reported)
                }
            }
            if uplink.throttled {
                throttledAt = ms
                break
            }
        }
        #expect(throttledAt.map { $0 <= 2000 } == true, "found throttled at \(throttledAt.map { "\($0) ms" } ?? "never")")
        #expect(arrived < 1000, "\(arrived) arrived")
    }

    @Test func aBacklogOnAWorkingPathIsNotThrottled() {
        var uplink = Uplink(windowed: true)
        let payload = Array(repeating: UInt8(0x61), count: 60)
        for index in 0..<1500 { uplink.send("m\(index)", payload, now: t0, reason: .first) }
        for ms in Int64(1)...500 {
            let now = t0 + .milliseconds(ms)
            for id in uplink.release(now: now, bundles: false).ids { uplink.acknowledged(id, now: now + .milliseconds(1)) }
            #expect(!uplink.throttled)
        }
    }
}
