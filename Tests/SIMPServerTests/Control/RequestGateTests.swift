import NIOCore
import SIMPCore
import Testing
@testable import SIMPServer

@Suite struct RequestGateTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func gate(rate: Int = 100, burst: Int = 4, outstanding: Int = 2) -> RequestGate {
        RequestGate(.init(rate: rate, burst: burst, maxOutstanding: outstanding), now: t0)
    }

    @Test func aBurstRunsThenTheRateHoldsTheNext() {
        var gate = gate(outstanding: 100)
        let burst = (1...4).map { _ in gate.admit(cost: 1, now: t0) }
        #expect(burst == [true, true, true, true])
        let fifth = gate.admit(cost: 1, now: t0)
        #expect(!fifth)
        #expect(gate.rateWait(cost: 1, now: t0) == .milliseconds(10))
        let early = gate.admit(cost: 1, now: t0 + .milliseconds(5))
        #expect(!early)
        let due = gate.admit(cost: 1, now: t0 + .milliseconds(10))
        #expect(due)
    }

    @Test func answersStillBeingWorkedOutHoldTheNextRequest() {
        var gate = gate()
        for _ in 1...2 {
            let admitted = gate.admit(cost: 1, now: t0)
            #expect(admitted)
            gate.started()
        }
        let third = gate.admit(cost: 1, now: t0)
        #expect(!third)
        // Held by the answers, not by the rate: the next answer releases it, not a timer.
        #expect(gate.rateWait(cost: 1, now: t0) == nil)
        gate.finished()
        let released = gate.admit(cost: 1, now: t0)
        #expect(released)
    }

    @Test func aPeerThatDoesNotReadGetsNothingMoreRun() {
        var gate = gate(outstanding: 100)
        gate.writable = false
        let held = gate.admit(cost: 1, now: t0)
        #expect(!held)
        #expect(gate.rateWait(cost: 1, now: t0) == nil)
        gate.writable = true
        let released = gate.admit(cost: 1, now: t0)
        #expect(released)
    }

    @Test func aRefusalTakesNoToken() {
        var gate = gate(burst: 1, outstanding: 1)
        gate.started()
        for _ in 0..<10 {
            let refused = gate.admit(cost: 1, now: t0)
            #expect(!refused)
        }
        gate.finished()
        let admitted = gate.admit(cost: 1, now: t0)
        #expect(admitted, "the one token of the burst was kept while the answer was pending")
    }

    @Test func aCostlyRequestTakesItsCostAndWaitsForAllOfIt() {
        var gate = gate(rate: 100, burst: 20, outstanding: 100)
        let first = gate.admit(cost: 17, now: t0)
        #expect(first)
        let second = gate.admit(cost: 17, now: t0)
        #expect(!second, "3 units left")
        #expect(gate.rateWait(cost: 17, now: t0) == .milliseconds(140))
        let cheap = gate.admit(cost: 1, now: t0)
        #expect(cheap, "a ping still fits")
        // A cost over the burst is charged the burst: it can run, once the bucket is full.
        let huge = gate.admit(cost: 500, now: t0 + .seconds(1))
        #expect(huge)
    }

    @Test func requestsCostWhatTheyMakeTheNodeDo() {
        var receipt = Simp_Receipt()
        receipt.missing = Array(1...200)
        #expect(RequestCost.of(Simp_Envelope(.receipt(receipt))) == 17, "64 missing seqs at most, 4 a unit")
        #expect(RequestCost.of(Simp_Envelope(.receipt(Simp_Receipt()))) == 1)
        var history = Simp_HistoryRequest()
        history.limit = 1000
        #expect(RequestCost.of(Simp_Envelope(.history(history))) == 11)
        #expect(RequestCost.of(Simp_Envelope(.ping(Simp_Ping()))) == 1)
        #expect(RequestCost.of(Simp_Envelope(.login(Simp_LoginRequest()))) == RequestCost.passwordHash)
        #expect(RequestCost.of(Simp_Envelope(.groupRequest(.with { $0.action = .members }))) == RequestCost.redisRead)
        #expect(RequestCost.of(Simp_Envelope(.groupRequest(.with { $0.action = .add }))) == RequestCost.groupChange)
    }

    @Test func finishedNeverGoesBelowZero() {
        var gate = gate()
        gate.finished()
        #expect(gate.outstanding == 0)
    }
}
