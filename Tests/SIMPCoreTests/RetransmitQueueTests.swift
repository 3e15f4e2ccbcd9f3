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
