import NIOCore
import SIMPCore
import Testing
@testable import SIMPServer

@Suite struct PushQueueTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func queue(giveUp: TimeAmount = .seconds(5)) -> PushQueue {
        PushQueue(policy: RetransmitPolicy(maxBackoff: .seconds(1), giveUpAfter: giveUp))
    }

    func push(_ seq: UInt64) -> Push {
        Push(bytes: [UInt8(seq)], from: "alice", id: "m\(seq)")
    }

    @Test func aSeqIsPushedOnceUntilConfirmed() {
        var q = queue()
        let first = q.push(1, push(1), now: t0)
        let again = q.push(1, push(1), now: t0)
        #expect(first && !again)
        _ = q.confirm(upTo: 1, now: t0)
        let afterConfirm = q.push(1, push(1), now: t0)
        #expect(afterConfirm)
    }

    @Test func aReceiptConfirmsEverythingUpToItsMarkInOrder() {
        var q = queue()
        for seq: UInt64 in [3, 1, 2, 5] { _ = q.push(seq, push(seq), now: t0) }
        let confirmed = q.confirm(upTo: 3, now: t0 + .milliseconds(5))
        #expect(confirmed == [1, 2, 3].map { ConfirmedPush(seq: $0, from: "alice", id: "m\($0)") })
        #expect(q.missing([5]).resend == [[5]])
        let repeated = q.confirm(upTo: 3, now: t0)
        #expect(repeated.isEmpty)
    }

    @Test func unconfirmedPushesAreResentThenParkedAndUnparkedInOrder() {
        var q = queue(giveUp: .seconds(2))
        _ = q.push(2, push(2), now: t0)
        _ = q.push(1, push(1), now: t0 + .milliseconds(1))
        let early = q.due(now: t0)
        #expect(early.resend.isEmpty)
        var now = t0
        var resent = 0
        var parked = 0
        while parked < 2 && now < t0 + .seconds(5) {
            now = now + .milliseconds(50)
            let due = q.due(now: now)
            resent += due.resend.count
            parked += due.parked
        }
        #expect(resent > 0)
        #expect(parked == 2)
        #expect(q.isEmpty && q.hasParked)
        do {
            let got = q.unpark()
            #expect(got.map(\.seq) == [1, 2])
        }
        #expect(!q.hasParked)
    }

    @Test func aReceiptConfirmsParkedPushesToo() {
        var q = queue(giveUp: .milliseconds(100))
        _ = q.push(1, push(1), now: t0)
        _ = q.due(now: t0 + .seconds(1))
        #expect(q.hasParked)
        do {
            let got = q.confirm(upTo: 1, now: t0 + .seconds(1))
            #expect(got.map(\.seq) == [1])
        }
        #expect(!q.hasParked)
    }

    @Test func missingSeqsThisSessionNeverPushedAreReportedUnknown() {
        var q = queue()
        _ = q.push(4, push(4), now: t0)
        let (resend, unknown) = q.missing([3, 4, 6])
        #expect(resend == [[4]])
        #expect(unknown == [3, 6])
    }
}
