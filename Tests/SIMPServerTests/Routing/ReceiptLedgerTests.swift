import NIOCore
import Testing
@testable import SIMPServer

@Suite struct ReceiptLedgerTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    typealias Receipt = ReceiptLedger.Receipt

    @Test func oneTicksReceiptsBecomeOneMarkPerRecipient() {
        var ledger = ReceiptLedger()
        ledger.record(Receipt(user: "bob", deviceMark: 3, needsEntries: false))
        ledger.record(Receipt(user: "bob", deviceMark: 7, needsEntries: false))
        ledger.record(Receipt(user: "bob", deviceMark: 5, needsEntries: true))
        ledger.record(Receipt(user: "carol", deviceMark: 1, needsEntries: false))
        let marks = ledger.take(now: t0).sorted { $0.user < $1.user }
        #expect(marks == [Receipt(user: "bob", deviceMark: 7, needsEntries: true), Receipt(user: "carol", deviceMark: 1, needsEntries: false)])
        let second = ledger.take(now: t0)
        #expect(second.isEmpty)
    }

    @Test func aFailedMarkIsWrittenAgainAfterTheRetryDelayMergedWithNewerOnes() {
        var ledger = ReceiptLedger(retryAfter: .seconds(1))
        ledger.writeFailed(Receipt(user: "bob", deviceMark: 4, needsEntries: true), now: t0)
        let early = ledger.take(now: t0 + .milliseconds(999))
        #expect(early.isEmpty)
        ledger.record(Receipt(user: "bob", deviceMark: 6, needsEntries: false))
        do {
            let got = ledger.take(now: t0 + .milliseconds(999))
            #expect(got == [Receipt(user: "bob", deviceMark: 6, needsEntries: false)])
        }
        #expect(ledger.failedCount == 1)
        ledger.writeFailed(Receipt(user: "bob", deviceMark: 6, needsEntries: false), now: t0 + .milliseconds(999))
        do {
            let got = ledger.take(now: t0 + .seconds(1))
            #expect(got == [Receipt(user: "bob", deviceMark: 6, needsEntries: true)])
        }
        #expect(ledger.failedCount == 0)
    }

    @Test func aNewerWrittenMarkSettlesAnOlderFailedOne() {
        var ledger = ReceiptLedger()
        ledger.writeFailed(Receipt(user: "bob", deviceMark: 4, needsEntries: false), now: t0)
        ledger.written(Receipt(user: "bob", deviceMark: 3, needsEntries: false))
        #expect(ledger.failedCount == 1)
        ledger.written(Receipt(user: "bob", deviceMark: 9, needsEntries: false))
        #expect(ledger.failedCount == 0)
        let later = ledger.take(now: t0 + .seconds(5))
        #expect(later.isEmpty)
    }

    @Test func eachDeviceOfAUserKeepsItsOwnMark() {
        var ledger = ReceiptLedger()
        ledger.record(Receipt(user: "bob", device: "phone", deviceMark: 9, needsEntries: false))
        ledger.record(Receipt(user: "bob", device: "laptop", deviceMark: 4, needsEntries: false))
        ledger.record(Receipt(user: "bob", device: "laptop", deviceMark: 5, needsEntries: false))
        let marks = ledger.take(now: t0).sorted { $0.device < $1.device }
        #expect(marks == [Receipt(user: "bob", device: "laptop", deviceMark: 5, needsEntries: false),
                          Receipt(user: "bob", device: "phone", deviceMark: 9, needsEntries: false)])
    }
}
