import NIOCore
import SIMPCore
import Testing

@Suite struct CongestionControllerTests {
    let t0 = NIODeadline.uptimeNanoseconds(10_000_000_000)
    let full = CongestionController.maxDatagram
    let rtt = TimeAmount.milliseconds(1)

    /// Sends full datagrams while allowed; returns how many went.
    func sendAll(_ c: inout CongestionController, now: NIODeadline, limit: Int = 1000) -> Int {
        var sent = 0
        while sent < limit, c.canSend(now: now, smoothedRTT: rtt) {
            c.sent(bytes: full, now: now)
            sent += 1
        }
        return sent
    }

    @Test func theInitialWindowIsTenDatagrams() {
        var c = CongestionController()
        #expect(sendAll(&c, now: t0) == 10)
        #expect(c.nextSend(now: t0, smoothedRTT: rtt) == nil)
    }

    @Test func slowStartGrowsTheWindowByWhatIsAcknowledged() {
        var c = CongestionController()
        _ = sendAll(&c, now: t0)
        for _ in 0..<10 { c.acked(bytes: full, sentAt: t0, now: t0 + rtt) }
        #expect(c.window == 2 * CongestionController.initialWindow)
        #expect(c.bytesInFlight == 0)
    }

    @Test func aLossHalvesTheWindowOncePerRecoveryPeriod() {
        var c = CongestionController()
        _ = sendAll(&c, now: t0)
        c.lost(bytes: full, sentAt: t0, now: t0 + rtt)
        c.lost(bytes: full, sentAt: t0, now: t0 + rtt * 2)
        #expect(c.window == CongestionController.initialWindow / 2)
        #expect(c.congestionEvents == 1 && c.lost == 2)
        // Sent after the reduction: a new event.
        c.sent(bytes: full, now: t0 + rtt * 3)
        c.lost(bytes: full, sentAt: t0 + rtt * 3, now: t0 + rtt * 4)
        #expect(c.window == CongestionController.initialWindow / 4)
        #expect(c.congestionEvents == 2)
    }

    @Test func theWindowNeverGoesBelowTwoDatagrams() {
        var c = CongestionController()
        var now = t0
        for _ in 0..<10 {
            c.sent(bytes: full, now: now)
            now = now + rtt
            c.lost(bytes: full, sentAt: now - rtt, now: now)
        }
        #expect(c.window == CongestionController.minimumWindow)
    }

    @Test func acknowledgementsOfWhatWasSentBeforeTheLossDoNotGrowTheWindow() {
        var c = CongestionController()
        _ = sendAll(&c, now: t0)
        c.lost(bytes: full, sentAt: t0, now: t0 + rtt)
        let window = c.window
        c.acked(bytes: full, sentAt: t0, now: t0 + rtt * 2)
        #expect(c.window == window)
        // Congestion avoidance after: a datagram per window.
        c.sent(bytes: full, now: t0 + rtt * 3)
        c.acked(bytes: window, sentAt: t0 + rtt * 3, now: t0 + rtt * 4)
        #expect(c.window == window + full)
    }

    /// What a policer of 100 datagrams a second does to a sender on a 1 ms path: after the
    /// first loss the pacing follows the rate the receiver acknowledged, not the window.
    @Test func aLossCapsThePacingAtTheDeliveredRate() {
        var c = CongestionController()
        var now = t0
        // 100 datagrams a second acknowledged for a second.
        for _ in 0..<100 {
            let allowed = c.canSend(now: now, smoothedRTT: rtt)
            #expect(allowed)
            c.sent(bytes: full, now: now)
            c.acked(bytes: full, sentAt: now, now: now + rtt)
            now = now + .milliseconds(10)
        }
        // Then the sender overshoots: of what it sent in the last 100 ms, 10 are dropped.
        for _ in 0..<10 { c.sent(bytes: full, now: now) }
        for _ in 0..<10 { c.lost(bytes: full, sentAt: now, now: now + rtt) }
        #expect(c.congestionEvents == 1)
        now = now + rtt
        let ceiling = try! #require(c.ceiling)
        #expect(abs(ceiling - Double(100 * full)) < Double(10 * full))
        #expect(c.pacingRate(rtt) == ceiling)
        // Over the next second the pacing lets about a second's worth go, not a window per ms.
        var sent = 0
        for _ in 0..<1000 {
            now = now + .milliseconds(1)
            while c.canSend(now: now, smoothedRTT: rtt) {
                c.sent(bytes: full, now: now)
                c.acked(bytes: full, sentAt: now, now: now)
                sent += 1
            }
        }
        #expect(sent > 90 && sent < 200, "\(sent)")
    }

    /// Ten datagrams sent and all ten lost: a bottleneck, by any measure.
    func overshoot(_ c: inout CongestionController, at now: NIODeadline) {
        for _ in 0..<10 { c.sent(bytes: full, now: now) }
        for _ in 0..<10 { c.lost(bytes: full, sentAt: now, now: now + rtt) }
    }

    @Test func aCeilingThatHoldsTheSenderBackRisesAndIsLiftedInTheEnd() {
        var c = CongestionController()
        overshoot(&c, at: t0)
        #expect(c.ceiling == CongestionController.minimumCeiling)
        var now = t0 + rtt
        var rises = 0
        var last = c.ceiling
        while c.ceiling != nil, now < t0 + .seconds(120) {
            now = now + .milliseconds(1)
            while c.canSend(now: now, smoothedRTT: rtt) {
                c.sent(bytes: full, now: now)
                c.acked(bytes: full, sentAt: now, now: now)
            }
            if c.ceiling != last {
                rises += 1
                last = c.ceiling
            }
        }
        #expect(c.ceiling == nil)
        #expect(rises > 10)
    }

    @Test func anIdleSenderDoesNotRaiseItsCeiling() {
        var c = CongestionController()
        overshoot(&c, at: t0)
        let ceiling = c.ceiling
        // Nothing to send for five seconds (nothing asked), then something.
        _ = c.canSend(now: t0 + .seconds(5), smoothedRTT: rtt)
        #expect(c.ceiling == ceiling)
    }

    @Test func theNextSendIsWhenThePacingHasCreditAgain() {
        var c = CongestionController()
        overshoot(&c, at: t0 - rtt)
        _ = c.canSend(now: t0, smoothedRTT: rtt)
        c.sent(bytes: full, now: t0)
        let next = try! #require(c.nextSend(now: t0, smoothedRTT: rtt))
        let expected = Double(full) / CongestionController.minimumCeiling
        #expect(abs(Double((next - t0).nanoseconds) / 1e9 - expected) < 0.001)
        let early = c.canSend(now: next - .milliseconds(1), smoothedRTT: rtt)
        let onTime = c.canSend(now: next, smoothedRTT: rtt)
        #expect(!early && onTime)
    }

    @Test func discardingTakesBytesOutOfFlightWithoutAnEvent() {
        var c = CongestionController()
        c.sent(bytes: full, now: t0)
        c.discarded(bytes: full)
        #expect(c.bytesInFlight == 0 && c.congestionEvents == 0 && c.lost == 0)
    }

    /// Losses that look like chance (a tenth, as on a lossy radio link) halve the window but
    /// set no ceiling: the rate would be cut at every event.
    @Test func aFewLossesAmongManyAcknowledgementsSetNoCeiling() {
        var c = CongestionController()
        var now = t0
        for step in 0..<200 {
            c.sent(bytes: full, now: now)
            if step % 10 == 9 {
                c.lost(bytes: full, sentAt: now, now: now + rtt)
            } else {
                c.acked(bytes: full, sentAt: now, now: now + rtt)
            }
            now = now + .milliseconds(1)
        }
        #expect(c.congestionEvents > 10)
        #expect(c.ceiling == nil)
    }

    /// A ceiling after which the losses go on as before (a tenth of what is sent, at any
    /// rate) was no bottleneck's: 200 ms later it is lifted.
    @Test func aCeilingThatDoesNotStopTheLossesIsLifted() {
        var c = CongestionController()
        var now = t0
        // 200 datagrams a second acknowledged for a second, then an overshoot.
        for _ in 0..<200 {
            _ = c.canSend(now: now, smoothedRTT: rtt)
            c.sent(bytes: full, now: now)
            c.acked(bytes: full, sentAt: now, now: now + rtt)
            now = now + .milliseconds(5)
        }
        overshoot(&c, at: now)
        #expect(c.ceiling != nil)
        for step in 0..<400 {
            now = now + .milliseconds(1)
            guard c.canSend(now: now, smoothedRTT: rtt) else { continue }
            c.sent(bytes: full, now: now)
            if step % 10 == 0 {
                c.lost(bytes: full, sentAt: now, now: now)
            } else {
                c.acked(bytes: full, sentAt: now, now: now)
            }
        }
        #expect(c.ceiling == nil)
    }
}

/// Issue 45, item 4: a policer of 20 datagrams a second (bursts of 20) on a 1 ms path is found
/// as a bottleneck, at about its rate: far below what a working path carries.
@Suite struct PolicerFoundTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let rtt = TimeAmount.milliseconds(1)
    let full = CongestionController.maxDatagram

    @Test func aPolicerOfTwentyDatagramsASecondIsFoundAsABottleneckAtItsRate() {
        var c = CongestionController()
        var tokens = 20.0
        var last = t0
        var now = t0
        var found: NIODeadline?
        while now < t0 + .seconds(3), found == nil {
            now = now + .milliseconds(1)
            tokens = min(20, tokens + 20 * Double((now - last).nanoseconds) / 1e9)
            last = now
            while c.canSend(now: now, smoothedRTT: rtt) {
                c.sent(bytes: full, now: now)
                if tokens >= 1 {
                    tokens -= 1
                    c.acked(bytes: full, sentAt: now, now: now + rtt)
                } else {
                    // The receiver shows the gap with what arrives next.
                    c.lost(bytes: full, sentAt: now, now: now + rtt)
                }
            }
            if c.bottleneckRate != nil { found = now }
        }
        let rate = try! #require(c.bottleneckRate, "no bottleneck found in 3 s")
        // Its burst and the first window are in the last second's deliveries: at most a few
        // times the policer's 24,720 bytes a second, far below a working path.
        #expect(rate < 131_072, "\(rate) bytes a second")
        #expect(found.map { $0 - t0 < .seconds(2) } == true)
    }

    @Test func aWorkingPathHasNoBottleneck() {
        var c = CongestionController()
        var now = t0
        for _ in 0..<2000 {
            now = now + .milliseconds(1)
            while c.canSend(now: now, smoothedRTT: rtt) {
                c.sent(bytes: full, now: now)
                c.acked(bytes: full, sentAt: now, now: now + rtt)
            }
        }
        #expect(c.bottleneckRate == nil)
    }
}
