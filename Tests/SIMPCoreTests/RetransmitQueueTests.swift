import NIOCore
import SIMPCore
import Testing

@Suite struct RetransmitQueueTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func queue(giveUp: TimeAmount = .seconds(10), cap: TimeAmount = .seconds(2)) -> RetransmitQueue<Int, String> {
        RetransmitQueue(policy: RetransmitPolicy(maxBackoff: cap, giveUpAfter: giveUp),
                        estimator: RTTEstimator(initialRTO: .milliseconds(500), minRTO: .milliseconds(100), maxRTO: .seconds(8)))
    }

    @Test func nothingIsDueBeforeTheTimeout() {
        var q = queue()
        q.track(1, payload: "a", now: t0)
        #expect(q.due(now: t0 + .milliseconds(499)).resend.isEmpty)
        #expect(q.due(now: t0 + .milliseconds(500)).resend.map(\.key) == [1])
    }

    @Test func backoffDoublesUpToTheCap() {
        var q = queue(giveUp: .seconds(100), cap: .seconds(2))
        q.track(1, payload: "a", now: t0)
        var now = t0
        var gaps: [Int64] = []
        var last = t0
        while gaps.count < 5 {
            now = now + .milliseconds(10)
            if !q.due(now: now).resend.isEmpty {
                gaps.append((now - last).nanoseconds / 1_000_000)
                last = now
            }
        }
        #expect(gaps == [500, 1000, 2000, 2000, 2000])
    }

    @Test func entryGivesUpAfterTheLimitAndIsRemoved() {
        var q = queue(giveUp: .seconds(3))
        q.track(1, payload: "a", now: t0)
        var expired: [Int] = []
        var now = t0
        while expired.isEmpty && now < t0 + .seconds(10) {
            now = now + .milliseconds(50)
            expired = q.due(now: now).expired.map(\.key)
        }
        #expect(expired == [1])
        #expect(now >= t0 + .seconds(3))
        #expect(q.isEmpty)
    }

    @Test func anEntryTrackedAgainAfterGivingUpKeepsItsPlace() {
        var q = queue(giveUp: .seconds(3))
        q.track(1, payload: "a", now: t0)
        q.track(2, payload: "b", now: t0 + .seconds(2))
        let given = q.due(now: t0 + .seconds(3)).expired
        #expect(given.map(\.key) == [1])
        let later = t0 + .seconds(4)
        for expired in given { q.retrack(expired, now: later) }
        q.expediteAll(now: later)
        #expect(q.due(now: later).resend.map(\.key) == [1, 2])
        // Its times start again: 2 s on, only "b" (tracked at t0 + 2 s) is out of time.
        #expect(q.due(now: later + .seconds(2)).expired.map(\.key) == [2])
    }

    @Test func acknowledgementRemovesAndSamplesRTT() {
        var q = queue()
        q.track(1, payload: "a", now: t0)
        #expect(q.acknowledge(1, now: t0 + .milliseconds(40)) == "a")
        #expect(q.estimator.smoothedRTT == .milliseconds(40))
        #expect(q.acknowledge(1, now: t0 + .milliseconds(50)) == nil)
        #expect(q.isEmpty)
    }

    @Test func retransmittedEntryGivesNoSample() {
        var q = queue()
        q.track(1, payload: "a", now: t0)
        _ = q.due(now: t0 + .milliseconds(600))
        q.acknowledge(1, now: t0 + .milliseconds(700))
        #expect(q.estimator.smoothedRTT == nil)
    }

    @Test func trackingTwiceKeepsTheFirstSend() {
        var q = queue()
        q.track(1, payload: "a", now: t0)
        q.track(1, payload: "b", now: t0 + .milliseconds(400))
        #expect(q.due(now: t0 + .milliseconds(500)).resend.map(\.payload) == ["a"])
    }

    @Test func expediteMakesEverythingDueNow() {
        var q = queue()
        q.track(1, payload: "a", now: t0)
        q.track(2, payload: "b", now: t0)
        q.expediteAll(now: t0 + .milliseconds(1))
        #expect(Set(q.due(now: t0 + .milliseconds(1)).resend.map(\.key)) == [1, 2])
    }

    @Test func nextDeadlineIsTheEarliest() {
        var q = queue()
        #expect(q.nextDeadline == nil)
        q.track(1, payload: "a", now: t0 + .milliseconds(100))
        q.track(2, payload: "b", now: t0)
        #expect(q.nextDeadline == t0 + .milliseconds(500))
    }
}

/// RFC 9002's probe timeout, with injected time: a starved CPU slows SIMP down, it does not
/// make it resend everything it has not heard about.
@Suite struct RetransmitProbeTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// RTO 500 ms until a sample, floor 100 ms.
    func queue(ackDelay: TimeAmount = .zero, cap: TimeAmount = .seconds(8)) -> RetransmitQueue<Int, String> {
        RetransmitQueue(policy: RetransmitPolicy(maxBackoff: cap, giveUpAfter: .seconds(60), maxAckDelay: ackDelay),
                        estimator: RTTEstimator(initialRTO: .milliseconds(500), minRTO: .milliseconds(100), maxRTO: .seconds(8)))
    }

    func tracked(_ keys: ClosedRange<Int>, ackDelay: TimeAmount = .zero) -> RetransmitQueue<Int, String> {
        var q = queue(ackDelay: ackDelay)
        for key in keys { q.track(key, payload: "m\(key)", now: t0) }
        return q
    }

    @Test func theTimeoutAllowsForThePeersAckDelay() {
        var q = tracked(1...1, ackDelay: .milliseconds(25))
        #expect(q.due(now: t0 + .milliseconds(524)).resend.isEmpty)
        #expect(q.due(now: t0 + .milliseconds(525)).resend.map(\.key) == [1])
    }

    @Test func aWholeFlightUnansweredGetsAProbeOfTheOldestTwo() {
        var q = tracked(1...10)
        #expect(q.due(now: t0 + .milliseconds(500)).resend.map(\.key) == [1, 2])
        #expect(q.probeCount == 1)
        // Nothing more until the probe's timeout, doubled: 1 s after the probe.
        var resent = 0
        var now = t0 + .milliseconds(500)
        while now < t0 + .milliseconds(1490) {
            now = now + .milliseconds(10)
            resent += q.due(now: now).resend.count
        }
        #expect(resent == 0)
        #expect(q.nextDeadline == t0 + .milliseconds(1500))
        // Then the oldest again, and the probe's timeout doubles again.
        #expect(q.due(now: t0 + .milliseconds(1500)).resend.map(\.key) == [1, 2])
        #expect(q.probeCount == 2)
        #expect(q.due(now: t0 + .milliseconds(3490)).resend.isEmpty)
        #expect(q.due(now: t0 + .milliseconds(3500)).resend.map(\.key) == [1, 2])
    }

    @Test func theProbesTimeoutIsCapped() {
        var q = RetransmitQueue<Int, String>(policy: RetransmitPolicy(maxBackoff: .seconds(2), giveUpAfter: .seconds(60)),
                                             estimator: RTTEstimator(initialRTO: .milliseconds(500)))
        for key in 1...5 { q.track(key, payload: "", now: t0) }
        var probes: [Int64] = []
        var now = t0
        while probes.count < 5 {
            now = now + .milliseconds(10)
            if !q.due(now: now).resend.isEmpty { probes.append((now - t0).nanoseconds / 1_000_000) }
        }
        #expect(probes == [500, 1500, 3500, 5500, 7500])
    }

    @Test func anAcknowledgementEndsTheProbingAndTheRestFollowOnTheirTimers() {
        var q = tracked(1...5)
        #expect(q.due(now: t0 + .milliseconds(500)).resend.map(\.key) == [1, 2])
        // The peer answers the probe (a resent entry: no RTT sample).
        q.acknowledge(1, now: t0 + .milliseconds(550))
        q.acknowledge(2, now: t0 + .milliseconds(550))
        #expect(q.probeCount == 0)
        // What was sent before it and is still unanswered an RTO after the answer is lost:
        // all of it goes, not a probe.
        #expect(q.due(now: t0 + .milliseconds(1049)).resend.isEmpty)
        #expect(q.due(now: t0 + .milliseconds(1050)).resend.map(\.key) == [3, 4, 5])
    }

    @Test func aPeerStillAnsweringIsNotSentAnythingAgain() {
        var q = tracked(1...10)
        // It answers one every 400 ms (less than the RTO apart): the rest wait for it.
        var resent = 0
        var now = t0
        for key in 1...10 {
            for _ in 0..<40 {
                now = now + .milliseconds(10)
                resent += q.due(now: now).resend.count
            }
            q.acknowledge(key, now: now)
        }
        #expect(resent == 0)
        #expect(q.isEmpty)
    }

    /// A timeout doubles the timeouts of what went again, not of what is sent later: kept for
    /// new entries until an RTT sample, it held every message of a lossy path to the cap.
    @Test func aNewEntryStartsAtTheRTOAfterATimeout() {
        var q = tracked(1...1)
        _ = q.due(now: t0 + .milliseconds(500))
        q.acknowledge(1, now: t0 + .milliseconds(600))
        #expect(q.timeout == .milliseconds(500))
        let later = t0 + .seconds(2)
        q.track(2, payload: "m2", now: later)
        #expect(q.due(now: later + .milliseconds(499)).resend.isEmpty)
        #expect(q.due(now: later + .milliseconds(500)).resend.map(\.key) == [2])
    }

    /// A peer that takes entries in order holds what came after a lost one until its resend
    /// arrives: those acknowledgements measure the loss, and give no RTT sample.
    @Test func anAcknowledgementThatWaitedBehindAResendGivesNoSample() {
        var q = tracked(1...3)
        #expect(q.due(now: t0 + .milliseconds(500)).resend.map(\.key) == [1, 2])
        q.acknowledge(1, now: t0 + .milliseconds(550))
        q.acknowledge(2, now: t0 + .milliseconds(550))
        q.acknowledge(3, now: t0 + .milliseconds(550))
        #expect(q.estimator.smoothedRTT == nil)
        // Resent by the caller (a loss the peer reported): 5 and 6 waited for it, 4 did not.
        q.track(4, payload: "m4", now: t0 + .seconds(1))
        q.track(5, payload: "m5", now: t0 + .seconds(1))
        q.track(6, payload: "m6", now: t0 + .seconds(1))
        q.resentOutOfBand([5])
        q.acknowledge(5, now: t0 + .milliseconds(1300))
        q.acknowledge(6, now: t0 + .milliseconds(1300))
        #expect(q.estimator.smoothedRTT == nil)
        q.acknowledge(4, now: t0 + .milliseconds(1200))
        #expect(q.estimator.smoothedRTT == .milliseconds(200))
    }

    @Test func probesBackOffPastTheResendCapUpToTheirOwn() {
        var q = RetransmitQueue<Int, String>(policy: RetransmitPolicy(maxBackoff: .seconds(1), giveUpAfter: .seconds(600),
                                                                      maxProbeBackoff: .seconds(4)),
                                             estimator: RTTEstimator(initialRTO: .milliseconds(500)))
        q.track(1, payload: "", now: t0)
        var probes: [Int64] = []
        var now = t0
        while probes.count < 5 {
            now = now + .milliseconds(10)
            if !q.due(now: now).resend.isEmpty { probes.append((now - t0).nanoseconds / 1_000_000) }
        }
        #expect(probes == [500, 1500, 3500, 7500, 11500])
        // A new entry starts at the RTO: only the probes back off.
        #expect(q.timeout == .milliseconds(500))
    }

    @Test func timeThisSideWasNotRunningDoesNotCountAgainstThePeer() {
        var q = RetransmitQueue<Int, String>(policy: RetransmitPolicy(giveUpAfter: .seconds(60), stallAllowance: .milliseconds(30)),
                                             estimator: RTTEstimator(initialRTO: .milliseconds(500)))
        q.track(1, payload: "", now: t0)
        // Looked at every 10 ms for 200 ms, then not for 700 ms: 670 ms of that was a stall.
        var now = t0
        var resent = 0
        while now < t0 + .milliseconds(200) {
            now = now + .milliseconds(10)
            resent += q.due(now: now).resend.count
        }
        now = now + .milliseconds(700)
        while now < t0 + .milliseconds(1160) {
            resent += q.due(now: now).resend.count
            now = now + .milliseconds(10)
        }
        #expect(resent == 0)
        #expect(q.due(now: t0 + .milliseconds(1170)).resend.map(\.key) == [1])
    }

    @Test func everyGapCountsWithoutAStallAllowance() {
        var q = tracked(1...1)
        #expect(q.due(now: t0 + .milliseconds(10)).resend.isEmpty)
        #expect(q.due(now: t0 + .milliseconds(900)).resend.map(\.key) == [1])
    }

    /// `nothingDueBefore` is never later than what falls due, whatever happened since the last
    /// look: a caller that sleeps until it misses nothing, and a look before it scans nothing.
    @Test func nothingFallsDueBeforeTheBoundItGives() {
        var q = tracked(1...3)
        #expect(q.nothingDueBefore <= t0 + .milliseconds(500))
        _ = q.due(now: t0 + .milliseconds(100))
        #expect(q.nothingDueBefore == t0 + .milliseconds(500), "after a look: exactly the next deadline")
        // A later entry does not move it; an answer ends any probe and may bring one closer.
        q.track(4, payload: "", now: t0 + .milliseconds(200))
        #expect(q.nothingDueBefore == t0 + .milliseconds(500))
        #expect(q.due(now: t0 + .milliseconds(499)).resend.isEmpty)
        #expect(q.due(now: t0 + .milliseconds(500)).resend.map(\.key) == [1, 2], "a probe of the two oldest")
        let probeEnds = q.nothingDueBefore
        #expect(probeEnds == t0 + .milliseconds(1500))
        q.acknowledge(1, now: t0 + .milliseconds(600))
        #expect(q.nothingDueBefore <= t0 + .milliseconds(600) + q.timeout)
        var resent: [Int] = []
        var now = t0 + .milliseconds(600)
        while resent.isEmpty, now < probeEnds {
            now = now + .milliseconds(10)
            resent = q.due(now: now).resend.map(\.key)
        }
        #expect(!resent.isEmpty && now < probeEnds, "after the answer, what waits goes before the probe would have")
        #expect(q.nothingDueBefore > now)
    }

    /// A stall the caller found (a timer that fired late) moves every timer by as much.
    @Test func aStallTheCallerFoundIsTakenOffTheTimers() {
        var q = tracked(1...1)
        q.stalled(.milliseconds(300))
        #expect(q.due(now: t0 + .milliseconds(700)).resend.isEmpty)
        #expect(q.due(now: t0 + .milliseconds(800)).resend.map(\.key) == [1])
        var empty = RetransmitQueue<Int, String>()
        empty.stalled(.seconds(1))
        empty.track(1, payload: "", now: t0)
        #expect(empty.nothingDueBefore == t0 + empty.timeout, "a stall with nothing pending holds nothing back")
    }

    @Test func expeditingResendsEverythingWithoutAProbe() {
        var q = tracked(1...5)
        _ = q.due(now: t0 + .milliseconds(500))
        q.expediteAll(now: t0 + .milliseconds(600))
        #expect(q.due(now: t0 + .milliseconds(600)).resend.map(\.key) == [1, 2, 3, 4, 5])
    }
}

@Suite struct RTTEstimatorTests {
    @Test func firstSampleFollowsRFC6298() {
        var e = RTTEstimator(initialRTO: .seconds(1), minRTO: .milliseconds(1), maxRTO: .seconds(60))
        e.sample(.milliseconds(100))
        #expect(e.smoothedRTT == .milliseconds(100))
        #expect(e.rttVariance == .milliseconds(50))
        #expect(e.rto == .milliseconds(300))
    }

    @Test func laterSamplesSmooth() {
        var e = RTTEstimator(initialRTO: .seconds(1), minRTO: .milliseconds(1), maxRTO: .seconds(60))
        e.sample(.milliseconds(100))
        e.sample(.milliseconds(200))
        // RTTVAR = 3/4*50 + 1/4*100 = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5
        #expect(e.rttVariance == .microseconds(62_500))
        #expect(e.smoothedRTT == .microseconds(112_500))
        #expect(e.rto == .microseconds(362_500))
    }

    @Test func rtoIsClamped() {
        var e = RTTEstimator(initialRTO: .seconds(1), minRTO: .milliseconds(100), maxRTO: .seconds(2))
        e.sample(.microseconds(10))
        #expect(e.rto == .milliseconds(100))
        e = RTTEstimator(initialRTO: .seconds(1), minRTO: .milliseconds(100), maxRTO: .seconds(2))
        e.sample(.seconds(5))
        #expect(e.rto == .seconds(2))
    }
}

@Suite struct RetransmitOrderTests {
    @Test func dueEntriesComeInTrackingOrder() {
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var q = RetransmitQueue<Int, Int>()
        let keys = (0..<200).map { ($0 * 7919) % 1000 }
        for k in keys { q.track(k, payload: k, now: t0) }
        q.expediteAll(now: t0)
        #expect(q.due(now: t0).resend.map(\.key) == keys)
    }
}
