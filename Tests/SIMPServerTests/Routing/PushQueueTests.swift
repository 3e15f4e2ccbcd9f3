import NIOCore
import SIMPCore
import Testing
@testable import SIMPServer

extension PushQueue.Release {
    var payloads: [[UInt8]] { datagrams.flatMap { $0 } }
}

@Suite struct PushQueueTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func queue(giveUp: TimeAmount = .seconds(5)) -> PushQueue {
        PushQueue(policy: RetransmitPolicy(maxBackoff: .seconds(1), giveUpAfter: giveUp))
    }

    func push(_ seq: UInt64, size: Int = 1) -> Push {
        Push(bytes: [UInt8](repeating: UInt8(seq), count: size), from: "alice", id: "m\(seq)")
    }

    func budget() -> TokenBucket {
        TokenBucket(rate: 65536, burst: 65536, now: t0)
    }

    /// Queues and sends at once (the window is open).
    func pushed(_ q: inout PushQueue, _ seqs: [UInt64], now: NIODeadline) -> [[UInt8]] {
        for seq in seqs { _ = q.push(seq, push(seq)) }
        return q.release(now: now).payloads
    }

    @Test func aSeqIsPushedOnceUntilConfirmed() {
        var q = queue()
        let first = q.push(1, push(1))
        let again = q.push(1, push(1))
        #expect(first && !again)
        _ = q.release(now: t0)
        let whileSent = q.push(1, push(1))
        #expect(!whileSent)
        _ = q.confirm(upTo: 1, now: t0)
        let afterConfirm = q.push(1, push(1))
        #expect(afterConfirm)
    }

    @Test func aReceiptConfirmsEverythingUpToItsMarkInOrder() {
        var q = queue()
        #expect(pushed(&q, [3, 1, 2, 5, 6], now: t0) == [[3], [1], [2], [5], [6]])
        let confirmed = q.confirm(upTo: 3, now: t0 + .milliseconds(5))
        #expect(confirmed == [1, 2, 3].map { ConfirmedPush(seq: $0, from: "alice", id: "m\($0)") })
        var b = budget()
        #expect(q.missing([5], budget: &b, now: t0 + .milliseconds(20)).queued == 1)
        #expect(q.release(now: t0 + .milliseconds(21)).payloads == [[5]])
        let repeated = q.confirm(upTo: 3, now: t0)
        #expect(repeated.isEmpty)
    }

    @Test func unconfirmedPushesAreResentThenParkedAndUnparkedInOrder() {
        var q = queue(giveUp: .seconds(2))
        _ = pushed(&q, [2], now: t0)
        _ = pushed(&q, [1], now: t0 + .milliseconds(1))
        #expect(q.due(now: t0) == 0 && !q.hasQueued)
        var now = t0
        var resent = 0
        var parked = 0
        while parked < 2 && now < t0 + .seconds(5) {
            now = now + .milliseconds(50)
            parked += q.due(now: now)
            resent += q.release(now: now).resent
        }
        #expect(resent > 0)
        #expect(parked == 2)
        #expect(q.isEmpty && q.hasParked)
        #expect(q.unpark().map(\.seq) == [1, 2])
        #expect(!q.hasParked)
    }

    @Test func aReceiptConfirmsParkedAndUnsentPushesToo() {
        var q = queue(giveUp: .milliseconds(100))
        _ = pushed(&q, [1], now: t0)
        _ = q.due(now: t0 + .seconds(1))
        #expect(q.hasParked)
        _ = q.push(2, push(2))
        #expect(q.confirm(upTo: 2, now: t0 + .seconds(1)).map(\.seq) == [1, 2])
        #expect(!q.hasParked && q.isEmpty && !q.hasQueued)
    }

    @Test func missingSeqsThisSessionNeverPushedAreReportedUnknown() {
        var q = queue()
        _ = pushed(&q, [4, 7], now: t0)
        _ = q.push(5, push(5))
        var b = budget()
        let found = q.missing([3, 4, 5, 6], budget: &b, now: t0 + .milliseconds(5))
        #expect(found.queued == 1 && !found.overBudget)
        #expect(found.unknown == [3, 6])
    }

    @Test func aMissingResendCostsItsBytesOfTheBudget() {
        var q = queue()
        for seq: UInt64 in 1...3 { _ = q.push(seq, push(seq, size: 1000)) }
        _ = q.release(now: t0)
        var b = TokenBucket(rate: 1500, burst: 1500, now: t0)
        let found = q.missing([1, 2, 3], budget: &b, now: t0 + .milliseconds(5))
        #expect(found.queued == 1 && found.overBudget)
    }

    /// The window holds back what does not fit; an acknowledgement lets more go.
    @Test func theWindowHoldsBackWhatDoesNotFit() {
        var q = queue()
        for seq: UInt64 in 1...40 { _ = q.push(seq, push(seq, size: DatagramHeader.maxPayload)) }
        let first = q.release(now: t0).payloads.count
        #expect(first == CongestionController.initialWindow / CongestionController.maxDatagram)
        #expect(q.hasQueued)
        #expect(q.release(now: t0 + .milliseconds(1)).payloads.isEmpty)
        #expect(q.nextRelease(now: t0 + .milliseconds(1)) == nil)
        _ = q.confirm(upTo: 4, now: t0 + .milliseconds(2))
        #expect(!q.release(now: t0 + .milliseconds(3)).payloads.isEmpty)
    }

    /// A lost push goes again before pushes never sent, and is out of flight meanwhile.
    @Test func lostPushesGoFirst() {
        var q = queue()
        _ = pushed(&q, [1, 2], now: t0)
        let inFlight = q.congestion.bytesInFlight
        _ = q.push(3, push(3))
        var b = budget()
        _ = q.missing([1], budget: &b, now: t0 + .milliseconds(1))
        #expect(q.congestion.bytesInFlight < inFlight)
        #expect(q.congestion.congestionEvents == 1)
        let release = q.release(now: t0 + .seconds(1))
        #expect(release.payloads == [[1], [3]] && release.resent == 1)
        // Confirmed after it was found lost and sent again: counted out of flight once.
        _ = q.confirm(upTo: 3, now: t0 + .seconds(1))
        #expect(q.congestion.bytesInFlight == 0)
    }

    /// A new path: what waited goes again in push order, with a fresh window and no loss.
    @Test func aNewPathSendsEverythingAgainWithoutACongestionEvent() {
        var q = queue()
        _ = pushed(&q, [1, 2, 3], now: t0)
        #expect(q.expediteAll(now: t0 + .milliseconds(5)) == 0)
        let release = q.release(now: t0 + .milliseconds(5))
        #expect(release.payloads == [[1], [2], [3]])
        #expect(q.congestion.congestionEvents == 0 && q.congestion.lost == 0)
    }

    /// With bundles: a few are spread over four datagrams; many fill each datagram's payload.
    @Test func bundlesSpreadAFewAndFillDatagramsWithMany() {
        var few = queue()
        for seq: UInt64 in 1...5 { _ = few.push(seq, push(seq, size: 100)) }
        #expect(few.release(now: t0, bundles: true).datagrams.map(\.count) == [1, 1, 1, 1, 1])
        var many = queue()
        for seq: UInt64 in 1...40 { _ = many.push(seq, push(seq, size: 270)) }
        let groups = many.release(now: t0, bundles: true).datagrams
        #expect(groups.first?.count == 4)
        #expect(groups.allSatisfy { $0.reduce(0) { $0 + 2 + $1.count } <= DatagramHeader.maxPayload })
    }

    /// A retransmit timeout resends and takes the push out of flight, but only a receiver's
    /// report of a gap halves the window: a late receipt on a busy host is no congestion.
    @Test func aTimeoutIsALossButNoCongestionEvent() {
        var q = queue()
        _ = pushed(&q, [1], now: t0)
        _ = q.due(now: t0 + .seconds(1))
        #expect(q.congestion.lost == 1 && q.congestion.congestionEvents == 0)
        #expect(q.congestion.window == CongestionController.initialWindow && q.congestion.bytesInFlight == 0)
        #expect(q.release(now: t0 + .seconds(1)).resent == 1)
    }

    /// A recipient that confirms nothing (a starved CPU) gets the two oldest pushes again, not
    /// all of them, and nothing more until the probe's doubled timeout; its receipt ends that.
    @Test func anUnconfirmedFlightIsProbedWithTheOldestTwo() {
        var q = queue()
        _ = pushed(&q, Array(1...10), now: t0)
        var resent = 0
        var now = t0
        while now < t0 + .milliseconds(1400) {
            now = now + .milliseconds(10)
            _ = q.due(now: now)
            resent += q.release(now: now).resent
        }
        #expect(resent == 2)
        #expect(q.congestion.lost == 2)
        // The receipt that comes at last confirms all of them: nothing more goes.
        #expect(q.confirm(upTo: 10, now: now).count == 10)
        _ = q.due(now: now + .seconds(5))
        #expect(q.release(now: now + .seconds(5)).resent == 0)
    }

    /// The RTT comes from the push that made a receipt, never from one held behind a lost one.
    @Test func rttSamplesSkipReceiptsThatCoverALoss() {
        var q = queue()
        _ = pushed(&q, [1, 2], now: t0)
        var b = budget()
        _ = q.missing([1], budget: &b, now: t0 + .milliseconds(1))
        _ = q.release(now: t0 + .milliseconds(1))
        _ = q.confirm(upTo: 2, now: t0 + .milliseconds(900))
        #expect(q.smoothedRTT == nil)
        _ = pushed(&q, [3], now: t0 + .seconds(1))
        _ = q.confirm(upTo: 3, now: t0 + .seconds(1) + .milliseconds(2))
        #expect(q.smoothedRTT == .milliseconds(2))
    }

    /// Pushed after a full window of later seqs (stored on another node, say): the receiver
    /// holds those and cannot confirm them until this one comes, so when it reports it
    /// missing it goes first, past the full window.
    @Test func aMissingSeqStillQueuedGoesFirstPastAFullWindow() {
        var q = queue()
        for seq: UInt64 in 2...40 { _ = q.push(seq, push(seq, size: DatagramHeader.maxPayload)) }
        _ = q.release(now: t0)
        _ = q.push(1, push(1))
        #expect(q.release(now: t0 + .milliseconds(1)).payloads.isEmpty, "the window is full")
        var b = budget()
        #expect(q.missing([1], budget: &b, now: t0 + .milliseconds(2)).unknown.isEmpty)
        #expect(q.release(now: t0 + .seconds(1)).payloads.first == [1])
    }
}
