import Foundation
import Testing

@testable import SIMPClient

/// The order of writes of received messages to the data directory, and what a failed one
/// gives up (SIMPClient confirms only `savedUpTo`).
@Suite struct ReceivedSavesTests {
    func messages(_ seqs: ClosedRange<UInt64>) -> [IncomingMessage] {
        seqs.map { IncomingMessage(id: "m\($0)", from: "alice", to: "bob", text: "text \($0)", seq: $0, sentAt: Date(millis: 0), storedAt: Date(millis: 0)) }
    }

    @Test func aWrittenBatchIsShownAndRaisesTheFloor() {
        var saves = ReceivedSaves(savedUpTo: 4)
        let batch = saves.ready(messages(5...7), after: 4, upTo: 7)
        #expect(batch == ReceivedSaves.Batch(after: 4, upTo: 7, messages: messages(5...7)))
        #expect(saves.savedUpTo == 4, "nothing is confirmed before it is on disk")
        let done = saves.written()
        #expect(done.shown == messages(5...7))
        #expect(done.next == nil)
        #expect(saves.savedUpTo == 7)
    }

    @Test func whatArrivesDuringAWriteWaitsAndGoesInOneNextWrite() {
        var saves = ReceivedSaves(savedUpTo: 0)
        #expect(saves.ready(messages(1...2), after: 0, upTo: 2) != nil)
        #expect(saves.ready(messages(3...3), after: 2, upTo: 3) == nil)
        #expect(saves.ready(messages(4...6), after: 3, upTo: 6) == nil)
        let first = saves.written()
        #expect(first.shown == messages(1...2))
        #expect(first.next == ReceivedSaves.Batch(after: 2, upTo: 6, messages: messages(3...6)))
        #expect(saves.savedUpTo == 2)
        #expect(saves.written().shown == messages(3...6))
        #expect(saves.savedUpTo == 6)
    }

    /// The write behind a failed one is never issued: its floor would cover messages that
    /// are not on disk.
    @Test func aFailedWriteGivesUpWhatWaitsBehindItAndRollsBackToItsStart() {
        var saves = ReceivedSaves(savedUpTo: 2)
        _ = saves.ready(messages(3...4), after: 2, upTo: 4)
        _ = saves.ready(messages(5...9), after: 4, upTo: 9)
        let failure = saves.failed()
        #expect(failure == ReceivedSaves.Failure(rollBackTo: 2, count: 7, upTo: 9, report: 3...9))
        #expect(saves.savedUpTo == 2)
        #expect(saves.writing == nil)
        #expect(saves.written().shown.isEmpty, "nothing was in flight")
    }

    /// The server pushes unconfirmed messages again and again while the disk stays full:
    /// each is reported once, a new one when it comes.
    @Test func aMessageThatFailsAgainIsNotReportedAgain() {
        var saves = ReceivedSaves(savedUpTo: 0)
        _ = saves.ready(messages(1...3), after: 0, upTo: 3)
        #expect(saves.failed().report == 1...3)
        _ = saves.ready(messages(1...3), after: 0, upTo: 3)
        #expect(saves.failed() == ReceivedSaves.Failure(rollBackTo: 0, count: 3, upTo: 3, report: nil))
        _ = saves.ready(messages(1...4), after: 0, upTo: 4)
        #expect(saves.failed().report == 4...4)
    }

    @Test func onceTheDiskHasRoomTheResentMessagesAreWrittenAndShown() {
        var saves = ReceivedSaves(savedUpTo: 0)
        _ = saves.ready(messages(1...3), after: 0, upTo: 3)
        _ = saves.failed()
        let retry = saves.ready(messages(1...3), after: 0, upTo: 3)
        #expect(retry == ReceivedSaves.Batch(after: 0, upTo: 3, messages: messages(1...3)))
        #expect(saves.written().shown == messages(1...3))
        #expect(saves.savedUpTo == 3)
        // A later failure is reported from where the floor is now.
        _ = saves.ready(messages(4...5), after: 3, upTo: 5)
        #expect(saves.failed() == ReceivedSaves.Failure(rollBackTo: 3, count: 2, upTo: 5, report: 4...5))
    }

    /// A session's `confirmedSeq` can move the sequencer floor up past what is on disk; a batch
    /// after such a jump starts there.
    @Test func aBatchAfterAJumpOfTheFloorRollsBackToTheJump() {
        var saves = ReceivedSaves(savedUpTo: 3)
        _ = saves.ready(messages(11...12), after: 10, upTo: 12)
        #expect(saves.failed() == ReceivedSaves.Failure(rollBackTo: 10, count: 2, upTo: 12, report: 11...12))
        _ = saves.ready(messages(11...12), after: 10, upTo: 12)
        _ = saves.written()
        #expect(saves.savedUpTo == 12)
    }
}
