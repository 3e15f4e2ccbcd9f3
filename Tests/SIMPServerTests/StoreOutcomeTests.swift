import SIMPRedis
import Testing
@testable import SIMPServer

/// What a store's answer means for a message that went early, and for what its recipient was
/// pushed (docs/PROTOCOL.md, section 4, Early delivery).
@Suite struct StoreOutcomeTests {
    private let down = StoreOutcome.unavailable(RedisError(.connectionFailed, "connection refused"))
    private let refused: [StoreOutcome] = [.unknownRecipient, .inboxFull, .shareFull, .notStored]

    /// Retracted only when the numbered copy cannot come: a retraction that overtook it would
    /// take the early copy out of the recipient's ledger, and the numbered copy would be shown again.
    @Test func anEarlyMessageIsRetractedOnlyWhenItCannotComeNumbered() {
        #expect(StoreOutcome.stored(seq: 4, bytes: [1]).mayComeNumbered(ambiguous: false))
        // Stored by an earlier attempt whose answer was lost: its numbered copy is still to come.
        #expect(StoreOutcome.duplicate(seq: 4, delivered: false).mayComeNumbered(ambiguous: true))
        #expect(StoreOutcome.duplicate(seq: 4, delivered: false).mayComeNumbered(ambiguous: false))
        // Confirmed before this copy was pushed early: this copy was a second showing.
        #expect(!StoreOutcome.duplicate(seq: 4, delivered: true).mayComeNumbered(ambiguous: false))
        // Given up on after 30 s while the first attempt may have run in Redis.
        #expect(down.mayComeNumbered(ambiguous: true))
        #expect(!down.mayComeNumbered(ambiguous: false))
        for outcome in refused {
            #expect(!outcome.mayComeNumbered(ambiguous: true), "\(outcome)")
            #expect(!outcome.mayComeNumbered(ambiguous: false), "\(outcome)")
        }
    }

    /// A seq stored for the recipient that the answer does not bring is read back from the inbox.
    @Test func anAnswerThatLeavesAStoredSeqUnpushedIsNoticed() {
        #expect(StoreOutcome.duplicate(seq: 7, delivered: false).mayLeaveUnpushed(ambiguous: true, pushedUpTo: 6))
        #expect(!StoreOutcome.duplicate(seq: 7, delivered: false).mayLeaveUnpushed(ambiguous: true, pushedUpTo: 7),
                "pushed already")
        #expect(!StoreOutcome.duplicate(seq: 7, delivered: true).mayLeaveUnpushed(ambiguous: true, pushedUpTo: 6),
                "confirmed already")
        #expect(down.mayLeaveUnpushed(ambiguous: true, pushedUpTo: 6), "its seq is unknown: it may be above")
        #expect(!down.mayLeaveUnpushed(ambiguous: false, pushedUpTo: 6), "never ran")
        #expect(!StoreOutcome.stored(seq: 7, bytes: [1]).mayLeaveUnpushed(ambiguous: true, pushedUpTo: 6), "brings its bytes")
        for outcome in refused {
            #expect(!outcome.mayLeaveUnpushed(ambiguous: true, pushedUpTo: 6), "\(outcome)")
        }
    }
}
