import SIMPCore
import Testing

@Suite struct InboundSequencerTests {
    func delivered(_ outcome: InboundSequencer<String>.Outcome) -> [String]? {
        if case .deliver(let items) = outcome { return items }
        return nil
    }

    @Test func inOrderArrivalsAreDeliveredAtOnce() {
        var s = InboundSequencer<String>()
        #expect(delivered(s.receive(seq: 1, item: "a")) == ["a"])
        #expect(delivered(s.receive(seq: 2, item: "b")) == ["b"])
        #expect(s.deliveredUpTo == 2)
    }

    @Test func duplicatesAreNeverDeliveredTwice() {
        var s = InboundSequencer<String>()
        _ = s.receive(seq: 1, item: "a")
        guard case .duplicate = s.receive(seq: 1, item: "a") else { Issue.record("redelivered"); return }
        _ = s.receive(seq: 3, item: "c")
        guard case .duplicate = s.receive(seq: 3, item: "c") else { Issue.record("buffered twice"); return }
    }

    @Test func gapIsHeldThenDrainedInOrder() {
        var s = InboundSequencer<String>()
        guard case .buffered = s.receive(seq: 3, item: "c") else { Issue.record(); return }
        guard case .buffered = s.receive(seq: 2, item: "b") else { Issue.record(); return }
        #expect(delivered(s.receive(seq: 1, item: "a")) == ["a", "b", "c"])
        #expect(s.bufferedCount == 0)
    }

    @Test func holdBufferIsBounded() {
        var s = InboundSequencer<String>(maxBuffered: 2)
        _ = s.receive(seq: 5, item: "e")
        _ = s.receive(seq: 6, item: "f")
        guard case .dropped = s.receive(seq: 7, item: "g") else { Issue.record("buffer grew"); return }
        #expect(s.bufferedCount == 2)
    }

    @Test func advanceSkipsWhatWasConfirmedEarlierAndNeverGoesBack() {
        var s = InboundSequencer<String>(deliveredUpTo: 0)
        _ = s.receive(seq: 4, item: "d")
        s.advance(to: 3)
        #expect(s.deliveredUpTo == 3)
        s.advance(to: 1)
        #expect(s.deliveredUpTo == 3)
        #expect(delivered(s.receive(seq: 5, item: "e")) == nil)
        guard case .duplicate = s.receive(seq: 2, item: "b") else { Issue.record(); return }
    }

    /// Handed over and not kept (a full disk): what is expected is missing until it comes again,
    /// and no longer once it has.
    @Test func expectedMessagesAreGapsUntilTheyArrive() {
        var s = InboundSequencer<String>(deliveredUpTo: 2)
        #expect(!s.hasGap)
        #expect(s.gaps().isEmpty)
        s.expect(upTo: 5)
        #expect(s.hasGap)
        #expect(s.gaps() == [3, 4, 5])
        _ = s.receive(seq: 4, item: "d")
        #expect(s.gaps() == [3, 5])
        #expect(delivered(s.receive(seq: 3, item: "c")) == ["c", "d"])
        #expect(s.gaps() == [5])
        #expect(delivered(s.receive(seq: 5, item: "e")) == ["e"])
        #expect(!s.hasGap)
        #expect(s.gaps().isEmpty)
        s.expect(upTo: 4)
        #expect(!s.hasGap, "an expectation below the delivered mark is met")
    }
}
