import NIOCore
import SIMPCore
import Testing

@Suite struct EarlyPayloadTests {
    @Test func encodesTheSeqBigEndianBeforeTheMessage() throws {
        let payload = EarlyPayload(afterSeq: 0x0102_0304_0506_0708, message: [0xAA, 0xBB])
        let bytes = try #require(payload.encoded())
        #expect(bytes == [1, 2, 3, 4, 5, 6, 7, 8, 0xAA, 0xBB])
        #expect(try EarlyPayload(decoding: bytes) == payload)
    }

    @Test func aPayloadWithNoMessageIsRefused() {
        #expect(throws: EarlyPayloadError.tooShort(8)) { try EarlyPayload(decoding: [UInt8](repeating: 0, count: 8)) }
        #expect(throws: EarlyPayloadError.tooShort(0)) { try EarlyPayload(decoding: []) }
        #expect(EarlyPayload(afterSeq: 1, message: []).encoded() == nil)
    }

    /// A message that fits a DATA datagram but not with the 8 bytes in front goes numbered only.
    @Test func aMessageTooLargeForTheDatagramIsNotEncoded() {
        let fits = [UInt8](repeating: 1, count: DatagramHeader.maxPayload - EarlyPayload.headerSize)
        #expect(EarlyPayload(afterSeq: 1, message: fits).encoded()?.count == DatagramHeader.maxPayload)
        #expect(EarlyPayload(afterSeq: 1, message: fits + [1]).encoded() == nil)
    }
}

@Suite struct EarlyLedgerTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let alice1 = EarlyLedger.Key(from: "alice", id: "1")

    @Test func anEarlyMessageIsHandedOverOnceAndItsNumberedCopyIsNot() {
        var ledger = EarlyLedger()
        let r1 = ledger.admit(alice1, afterSeq: 4, deliveredUpTo: 4, holding: false, now: t0)
        #expect(r1)
        let r2 = ledger.admit(alice1, afterSeq: 4, deliveredUpTo: 4, holding: false, now: t0)
        #expect(!r2, "a repeated datagram")
        let r3 = ledger.numbered(alice1)
        #expect(r3, "the numbered copy is confirmed, not handed over")
        let r4 = ledger.numbered(alice1)
        #expect(!r4, "a resend of the numbered copy is an ordinary duplicate")
        #expect(ledger.count == 0)
    }

    /// The server's view (`afterSeq`) must match what was handed over: behind it, numbered
    /// messages are still on their way; past it, the early copy may be older than its numbered one.
    @Test func anEarlyMessageThatCouldOvertakeOrRepeatIsDropped() {
        var ledger = EarlyLedger()
        let r5 = ledger.admit(alice1, afterSeq: 5, deliveredUpTo: 4, holding: false, now: t0)
        #expect(!r5)
        let r6 = ledger.admit(alice1, afterSeq: 4, deliveredUpTo: 5, holding: false, now: t0)
        #expect(!r6)
        let r7 = ledger.admit(alice1, afterSeq: 4, deliveredUpTo: 4, holding: true, now: t0)
        #expect(!r7, "a gap is open")
        #expect(ledger.count == 0)
        let r8 = ledger.numbered(alice1)
        #expect(!r8, "dropped early, so the numbered copy is handed over")
    }

    @Test func aRetractionIsReportedOnlyForWhatWasHandedOver() {
        var ledger = EarlyLedger()
        let r9 = ledger.retracted(.init(from: "alice", id: "never-seen"))
        #expect(!r9)
        let r10 = ledger.admit(alice1, afterSeq: 0, deliveredUpTo: 0, holding: false, now: t0)
        #expect(r10)
        let r11 = ledger.retracted(alice1)
        #expect(r11)
        let r12 = ledger.numbered(alice1)
        #expect(!r12)
    }

    /// The retraction overtook its early datagram (UDP delayed, the store refused at once):
    /// the datagram that comes after it is not taken, so nothing retracted stays shown.
    @Test func anEarlyDatagramAfterItsRetractionIsDropped() {
        var ledger = EarlyLedger()
        let told = ledger.retracted(alice1)
        #expect(!told, "nothing to tell the application: it never saw the message")
        let taken = ledger.admit(alice1, afterSeq: 0, deliveredUpTo: 0, holding: false, now: t0)
        #expect(!taken)
        let other = ledger.admit(.init(from: "alice", id: "2"), afterSeq: 0, deliveredUpTo: 0, holding: false, now: t0)
        #expect(other)
    }

    /// Full, it takes nothing more early (those come numbered) and pushes nothing out, so no
    /// numbered copy is ever handed over a second time; entries whose fate was lost expire.
    @Test func fullItTakesNothingEarlyUntilEntriesExpire() {
        var ledger = EarlyLedger()
        for i in 0..<EarlyLedger.capacity {
            let r13 = ledger.admit(.init(from: "alice", id: "\(i)"), afterSeq: 0, deliveredUpTo: 0, holding: false, now: t0)
            #expect(r13)
        }
        let next = EarlyLedger.Key(from: "bob", id: "x")
        let r14 = ledger.admit(next, afterSeq: 0, deliveredUpTo: 0, holding: false, now: t0 + .hours(1))
        #expect(!r14)
        let r15 = ledger.numbered(.init(from: "alice", id: "0"))
        #expect(r15)
        let r16 = ledger.admit(next, afterSeq: 0, deliveredUpTo: 0, holding: false, now: t0 + .hours(1))
        #expect(r16)
        let later = t0 + EarlyLedger.lifetime + .seconds(1)
        let r17 = ledger.admit(.init(from: "carol", id: "y"), afterSeq: 0, deliveredUpTo: 0, holding: false, now: later)
        #expect(r17)
        #expect(ledger.count == 2, "the day-old entries are gone; bob's and carol's stay")
    }
}
