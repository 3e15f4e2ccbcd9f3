import NIOCore
import Testing
@testable import SIMPServer

@Suite struct RequestGateTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func gate(rate: Int = 100, burst: Int = 4, outstanding: Int = 2) -> RequestGate {
        RequestGate(.init(rate: rate, burst: burst, maxOutstanding: outstanding), now: t0)
    }

    @Test func aBurstRunsThenTheRateHoldsTheNext() {
        var gate = gate(outstanding: 100)
        let burst = (1...4).map { _ in gate.admit(now: t0) }
        #expect(burst == [true, true, true, true])
        let fifth = gate.admit(now: t0)
        #expect(!fifth)
        #expect(gate.rateWait == .milliseconds(10))
        let early = gate.admit(now: t0 + .milliseconds(5))
        #expect(!early)
        let due = gate.admit(now: t0 + .milliseconds(10))
        #expect(due)
    }

    @Test func answersStillBeingWorkedOutHoldTheNextRequest() {
        var gate = gate()
        for _ in 1...2 {
            let admitted = gate.admit(now: t0)
            #expect(admitted)
            gate.started()
        }
        let third = gate.admit(now: t0)
        #expect(!third)
        // Held by the answers, not by the rate: the next answer releases it, not a timer.
        #expect(gate.rateWait == nil)
        gate.finished()
        let released = gate.admit(now: t0)
        #expect(released)
    }

    @Test func aPeerThatDoesNotReadGetsNothingMoreRun() {
        var gate = gate(outstanding: 100)
        gate.writable = false
        let held = gate.admit(now: t0)
        #expect(!held)
        #expect(gate.rateWait == nil)
        gate.writable = true
        let released = gate.admit(now: t0)
        #expect(released)
    }

    @Test func aRefusalTakesNoToken() {
        var gate = gate(burst: 1, outstanding: 1)
        gate.started()
        for _ in 0..<10 {
            let refused = gate.admit(now: t0)
            #expect(!refused)
        }
        gate.finished()
        let admitted = gate.admit(now: t0)
        #expect(admitted, "the one token of the burst was kept while the answer was pending")
    }

    @Test func finishedNeverGoesBelowZero() {
        var gate = gate()
        gate.finished()
        #expect(gate.outstanding == 0)
    }
}
