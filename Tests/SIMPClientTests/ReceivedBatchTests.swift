import SIMPCore
import Testing
@testable import SIMPClient

@Suite struct ReceivedBatchTests {
    func payload(_ seq: UInt64, from: String = "alice", id: String? = nil, fromDevice: String = "") throws -> [UInt8] {
        var message = Simp_Message()
        message.seq = seq
        message.fromUser = from
        message.toUser = "bob"
        message.messageID = id ?? "m\(seq)"
        message.fromDevice = fromDevice
        return try message.serializedBytes()
    }

    @Test func messagesAreHandedOverInOrderOnceAndAGapIsReported() throws {
        /// Received messages put in seq order: what may be handed over, what is missing.
    var sequencer = InboundSequencer<IncomingMessage>()
        var early = EarlyLedger()
        var batch = ReceivedBatch.take([try payload(2)], sequencer: &sequencer, early: &early, user: "bob", device: "phone")
        #expect(batch.gap && !batch.advanced && batch.ready.isEmpty)
        batch = ReceivedBatch.take([try payload(1), try payload(3)], sequencer: &sequencer, early: &early, user: "bob", device: "phone")
        #expect(batch.ready.map(\.seq) == [1, 2, 3] && batch.before == 0 && batch.advanced && !batch.gap)
        batch = ReceivedBatch.take([try payload(2)], sequencer: &sequencer, early: &early, user: "bob", device: "phone")
        #expect(batch.repeated && !batch.advanced && batch.ready.isEmpty)
    }

    @Test func thisDevicesOwnCopyIsConfirmedButNotShown() throws {
        /// Received messages put in seq order: what may be handed over, what is missing.
    var sequencer = InboundSequencer<IncomingMessage>()
        var early = EarlyLedger()
        let batch = ReceivedBatch.take([try payload(1, from: "bob", fromDevice: "phone"), try payload(2, from: "bob", fromDevice: "laptop")],
                                       sequencer: &sequencer, early: &early, user: "bob", device: "phone")
        // The laptop's message shows here; the phone's own does not, yet the mark passes both.
        #expect(batch.ready.map(\.seq) == [2] && batch.advanced && sequencer.deliveredUpTo == 2)
        let ownOnly = ReceivedBatch.take([try payload(3, from: "bob", fromDevice: "phone")], sequencer: &sequencer, early: &early,
                                         user: "bob", device: "phone")
        #expect(ownOnly.ready.isEmpty && ownOnly.advanced)
    }

    @Test func theNumberedCopyOfAnEarlyMessageIsNotHandedOverAgain() throws {
        /// Received messages put in seq order: what may be handed over, what is missing.
    var sequencer = InboundSequencer<IncomingMessage>()
        var early = EarlyLedger()
        let admitted = early.admit(.init(from: "alice", id: "e1"), afterSeq: 0, deliveredUpTo: 0, holding: false, now: .uptimeNanoseconds(1))
        #expect(admitted)
        let batch = ReceivedBatch.take([try payload(1, id: "e1"), try payload(2)], sequencer: &sequencer, early: &early, user: "bob", device: "phone")
        #expect(batch.ready.map(\.id) == ["m2"] && batch.advanced && early.count == 0)
    }
}
