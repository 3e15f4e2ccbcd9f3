import NIOCore
import SIMPCore
import Testing
@testable import SIMPServer

/// A receipt that reports messages received but confirms less (`receivedUpToSeq` above
/// `upToSeq`: a client that confirms only what its application showed): what arrived is not
/// pushed again, and nobody hears `delivered` until it is confirmed.
@Suite struct HeldReceiptTests {
    let events = DeliveryEngineEventTests()

    func at(_ offset: TimeAmount) -> Moment { DeliveryEngineEventTests.at(offset) }

    @Test func aHeldMessageIsNotPushedAgainNorDeliveredUntilConfirmed() throws {
        var (node, alice, bob) = try events.aliceStoredAMessageForBob()
        node.on(.receipt(session: bob.id, .with { $0.upToSeq = 0; $0.receivedUpToSeq = 1 }), at: at(.milliseconds(5)))
        #expect(node.sent(to: alice).isEmpty, "held: its sender hears nothing")
        node.on(.due(.tick), at: at(.seconds(5)))
        #expect(node.datagrams(to: bob).isEmpty, "it arrived: not pushed again")
        let held = node.actions.compactMap { if case .writeReceipts(let marks) = $0 { marks } else { nil } }.flatMap { $0 }
        #expect(held.isEmpty, "no mark to write: nothing was confirmed")

        node.on(.receipt(session: bob.id, .with { $0.upToSeq = 1 }), at: at(.seconds(6)))
        #expect(node.sent(to: alice).isEmpty, "the push was forgotten when it arrived: the store names its sender")
        node.on(.due(.tick), at: at(.seconds(7)))
        let marks = node.actions.compactMap { if case .writeReceipts(let marks) = $0 { marks } else { nil } }.flatMap { $0 }
        #expect(marks == [ReceiptLedger.Receipt(user: "bob", device: "d1", deviceMark: 1, needsEntries: true)])
    }

    @Test func aReceiptWhoseReceivedMarkIsNotAboveItsConfirmedMarkIsAPlainReceipt() throws {
        var (node, alice, bob) = try events.aliceStoredAMessageForBob()
        node.on(.receipt(session: bob.id, .with { $0.upToSeq = 1; $0.receivedUpToSeq = 1 }), at: at(.milliseconds(5)))
        guard case .delivered(let delivered)? = node.sent(to: alice).first else { Issue.record("no delivered"); return }
        #expect(delivered.messageID == "m1")
    }
}
