import NIOCore
import Testing
@testable import SIMPServer

@Suite struct ReceiptLedgerTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    typealias Mark = ReceiptLedger.Mark

    @Test func oneTicksReceiptsBecomeOneMarkPerRecipient() {
        var ledger = ReceiptLedger()
        ledger.record(Mark(user: "bob", upTo: 3, needsEntries: false))
        ledger.record(Mark(user: "bob", upTo: 7, needsEntries: false))
        ledger.record(Mark(user: "bob", upTo: 5, needsEntries: true))
        ledger.record(Mark(user: "carol", upTo: 1, needsEntries: false))
        let marks = ledger.take(now: t0).sorted { $0.user < $1.user }
        #expect(marks == [Mark(user: "bob", upTo: 7, needsEntries: true), Mark(user: "carol", upTo: 1, needsEntries: false)])
        let second = ledger.take(now: t0)
        #expect(second.isEmpty)
    }

    @Test func aFailedMarkIsWrittenAgainAfterTheRetryDelayMergedWithNewerOnes() {
        var ledger = ReceiptLedger(retryAfter: .seconds(1))
        ledger.writeFailed(Mark(user: "bob", upTo: 4, needsEntries: true), now: t0)
        let early = ledger.take(now: t0 + .milliseconds(999))
        #expect(early.isEmpty)
        ledger.record(Mark(user: "bob", upTo: 6, needsEntries: false))
        do {
            let got = ledger.take(now: t0 + .milliseconds(999))
            #expect(got == [Mark(user: "bob", upTo: 6, needsEntries: false)])
        }
        #expect(ledger.failedCount == 1)
        ledger.writeFailed(Mark(user: "bob", upTo: 6, needsEntries: false), now: t0 + .milliseconds(999))
        do {
            let got = ledger.take(now: t0 + .seconds(1))
            #expect(got == [Mark(user: "bob", upTo: 6, needsEntries: true)])
        }
        #expect(ledger.failedCount == 0)
    }

    @Test func aNewerWrittenMarkSettlesAnOlderFailedOne() {
        var ledger = ReceiptLedger()
        ledger.writeFailed(Mark(user: "bob", upTo: 4, needsEntries: false), now: t0)
        ledger.written(Mark(user: "bob", upTo: 3, needsEntries: false))
        #expect(ledger.failedCount == 1)
        ledger.written(Mark(user: "bob", upTo: 9, needsEntries: false))
        #expect(ledger.failedCount == 0)
        let later = ledger.take(now: t0 + .seconds(5))
        #expect(later.isEmpty)
    }

    @Test func eachDeviceOfAUserKeepsItsOwnMark() {
        var ledger = ReceiptLedger()
        ledger.record(Mark(user: "bob", device: "phone", upTo: 9, needsEntries: false))
        ledger.record(Mark(user: "bob", device: "laptop", upTo: 4, needsEntries: false))
        ledger.record(Mark(user: "bob", device: "laptop", upTo: 5, needsEntries: false))
        let marks = ledger.take(now: t0).sorted { $0.device < $1.device }
        #expect(marks == [Mark(user: "bob", device: "laptop", upTo: 5, needsEntries: false),
                          Mark(user: "bob", device: "phone", upTo: 9, needsEntries: false)])
    }
}
