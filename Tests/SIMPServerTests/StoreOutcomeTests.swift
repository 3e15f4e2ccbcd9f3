import SIMPRedis
import Testing
@testable import SIMPServer

/// What a store's answer means for a message that went early, and for what its recipient was
/// pushed (docs/PROTOCOL.md, section 4, Early delivery).
@Suite struct StoreOutcomeTests {
    private let down = StoreOutcome.unavailable(RedisError(.connectionFailed, "connection refused"))
    private let refused: [StoreOutcome] = [.unknownRecipient, .inboxFull, .shareFull, .notStored]

    /// Retracted only when the numbered copy cannot come, or came before this copy (its sender
    /// sent it again): a retraction that overtook a numbered copy still to come would take the
    /// early copy out of the recipient's ledger, and the numbered copy would be shown again.
    @Test func anEarlyMessageIsRetractedOnlyWhenItCannotComeNumbered() {
        #expect(!StoreOutcome.stored(seq: 4, bytes: [1]).retractsEarlyCopy(ambiguous: false))
        // Stored and not confirmed: by this store's earlier attempt, or by a resend through
        // another node; its numbered copy is still to come.
        #expect(!StoreOutcome.duplicate(seq: 4, delivered: false).retractsEarlyCopy(ambiguous: true))
        #expect(!StoreOutcome.duplicate(seq: 4, delivered: false).retractsEarlyCopy(ambiguous: false))
        // Confirmed: before this copy was pushed early (a second showing), or, after an
        // attempt of this store that ran, as this copy's own numbered one.
        #expect(StoreOutcome.duplicate(seq: 4, delivered: true).retractsEarlyCopy(ambiguous: false))
        #expect(!StoreOutcome.duplicate(seq: 4, delivered: true).retractsEarlyCopy(ambiguous: true))
        // Given up on after 30 s while the first attempt may have run in Redis.
        #expect(!down.retractsEarlyCopy(ambiguous: true))
        #expect(down.retractsEarlyCopy(ambiguous: false))
        for outcome in refused {
            #expect(outcome.retractsEarlyCopy(ambiguous: true), "\(outcome)")
            #expect(outcome.retractsEarlyCopy(ambiguous: false), "\(outcome)")
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
