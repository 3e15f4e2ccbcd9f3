import SIMPCore
import Testing
@testable import SIMPClient

/// `confirmWhenShown`: receipts confirm what the application showed, and report the rest as
/// received (`ShownLedger`, and the engine's receipts with it).
@Suite struct ShownLedgerTests {
    typealias T = ClientEngineTests

    @Test func theMarkStopsBelowTheLowestMessageNotShown() {
        var ledger = ShownLedger()
        #expect(ledger.confirmable(received: 9) == 9, "nothing waits")
        ledger.handedOver(3)
        ledger.handedOver(5)
        ledger.handedOver(0)
        #expect(ledger.confirmable(received: 9) == 2)
        let rose = ledger.shown([5])
        #expect(!rose, "3 still holds the mark")
        #expect(ledger.confirmable(received: 9) == 2)
        let rises = ledger.shown([3])
        #expect(rises)
        #expect(ledger.confirmable(received: 9) == 9 && ledger.isEmpty)
    }

    @Test func aMessageShownBeforeItWasHandedOverIsNotWaitedFor() {
        var ledger = ShownLedger()
        ledger.shown([4])
        ledger.handedOver(4)
        #expect(ledger.isEmpty)
        ledger.handedOver(6)
        ledger.handedOver(2)
        ledger.handedOver(6)
        #expect(ledger.confirmable(received: 6) == 1, "out of order and twice: kept once, in order")
        ledger.shown([2])
        #expect(ledger.confirmable(received: 6) == 5)
    }

    @Test func aRestartedStoreWaitsForWhatItsHistoryCountsUnread() {
        let ledger = ShownLedger(waiting: [8, 4, 4])
        #expect(ledger.confirmable(received: 10) == 3)
    }

    static func receipt(_ actions: [ClientEngine.Action]) -> Simp_Receipt? {
        for body in T.controls(actions) { if case .receipt(let receipt) = body { return receipt } }
        return nil
    }

    @Test func aMessageNotShownIsReceivedButNotConfirmedUntilTheApplicationShowsIt() {
        var engine = T.connected(confirmWhenShown: true)
        _ = engine.handle(T.datagram(.data, T.message(seq: 1, id: "m1"), packet: 1), at: T.at(1))
        _ = engine.handle(T.datagram(.data, T.message(seq: 2, id: "m2"), packet: 2), at: T.at(2))
        guard let held = Self.receipt(engine.handle(.turnEnded(.receipt), at: T.at(3))) else {
            Issue.record("no receipt")
            return
        }
        #expect(held.upToSeq == 0 && held.receivedUpToSeq == 2, "both arrived, neither shown: \(held)")
        #expect(Self.receipt(engine.handle(.shown([2], marks: []), at: T.at(4))) == nil, "1 is still not shown: nothing more to confirm")
        guard let both = Self.receipt(engine.handle(.shown([1], marks: []), at: T.at(5))) else {
            Issue.record("no receipt after the lowest was shown")
            return
        }
        #expect(both.upToSeq == 2 && both.receivedUpToSeq == 0)
        #expect(Self.receipt(engine.handle(.shown([1], marks: []), at: T.at(6))) == nil, "shown again: nothing new to confirm")
    }

    @Test func aReadMarkWaitsUntilEveryMessageBeforeItWasShown() {
        var engine = T.connected(confirmWhenShown: true)
        _ = engine.handle(T.datagram(.data, T.message(seq: 1, id: "m1"), packet: 1), at: T.at(1))
        _ = engine.handle(T.datagram(.data, T.message(seq: 2, id: "m2"), packet: 2), at: T.at(2))
        _ = engine.handle(.turnEnded(.receipt), at: T.at(3))
        func mark(_ seq: UInt64) -> Simp_ReadMark { .with { $0.fromUser = "bob"; $0.messageID = "m\(seq)"; $0.seq = seq } }
        let early = T.controls(engine.handle(.shown([2], marks: [mark(2)]), at: T.at(4)))
        #expect(early.isEmpty, "m1 is not shown: m2 is not confirmed, so its mark would be left out: \(early)")
        let later = T.controls(engine.handle(.shown([1], marks: [mark(1)]), at: T.at(5)))
        guard case .receipt(let receipt)? = later.first, case .markRead(let request)? = later.dropFirst().first else {
            Issue.record("not a receipt then the marks: \(later)")
            return
        }
        #expect(receipt.upToSeq == 2)
        #expect(request.reads.map(\.seq) == [2, 1])
    }

    @Test func noticesAndTheUsersOwnCopiesAreConfirmedAtOnce() {
        var engine = T.connected(confirmWhenShown: true)
        var read = Simp_Message()
        read.seq = 1
        read.fromUser = "bob"
        read.toUser = "alice"
        read.messageID = "r1"
        read.type = .read
        read.content = "x1"
        _ = engine.handle(T.datagram(.data, try! read.serializedBytes(), packet: 1), at: T.at(1))
        _ = engine.handle(T.datagram(.data, T.message(seq: 2, from: "alice", id: "own"), packet: 2), at: T.at(2))
        let receipt = Self.receipt(engine.handle(.turnEnded(.receipt), at: T.at(3)))
        #expect(receipt?.upToSeq == 2 && receipt?.receivedUpToSeq == 0, "\(String(describing: receipt))")
    }

    @Test func aReconnectTellsTheServerWhatTheClientHoldsAndTakesNothingEarly() {
        var engine = T.connected(confirmWhenShown: true)
        _ = engine.handle(T.datagram(.data, T.message(seq: 1, id: "m1"), packet: 1), at: T.at(1))
        _ = engine.handle(.controlClosed, at: T.at(2))
        _ = engine.handle(.reconnectDue(index: 0), at: T.at(3000))
        let asked = engine.handle(.sessionWanted(udpPort: 5000), at: T.at(3001))
        let connect = asked.lazy.compactMap { action -> Simp_ConnectRequest? in
            if case .request(.connect(let request), _) = action { request } else { nil }
        }.first
        #expect(connect?.lastSeq == 0 && connect?.receivedSeq == 1 && connect?.early == false, "\(String(describing: connect))")
    }

    @Test func withoutTheOptionEverythingHandedOverIsConfirmed() {
        var engine = T.connected()
        _ = engine.handle(T.datagram(.data, T.message(seq: 1, id: "m1"), packet: 1), at: T.at(1))
        let receipt = Self.receipt(engine.handle(.turnEnded(.receipt), at: T.at(2)))
        #expect(receipt?.upToSeq == 1 && receipt?.receivedUpToSeq == 0)
        #expect(Self.receipt(engine.handle(.shown([1], marks: []), at: T.at(3))) == nil)
    }
}
