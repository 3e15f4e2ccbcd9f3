import SIMPCore
import Testing

@Suite struct SendOrderGateTests {
    func released(_ o: SendOrderGate<String>.Outcome) -> [String]? {
        if case .release(let items) = o { return items }
        return nil
    }

    @Test func inOrderPassesStraightThrough() {
        var g = SendOrderGate<String>()
        #expect(released(g.receive(1, "a")) == ["a"])
        #expect(released(g.receive(2, "b")) == ["b"])
        #expect(g.next == 3)
    }

    @Test func earlyArrivalsWaitForTheGap() {
        var g = SendOrderGate<String>()
        guard case .held = g.receive(3, "c") else { Issue.record(); return }
        guard case .held = g.receive(2, "b") else { Issue.record(); return }
        guard case .held = g.receive(3, "c") else { Issue.record("duplicate held twice"); return }
        #expect(released(g.receive(1, "a")) == ["a", "b", "c"])
        #expect(g.heldCount == 0)
    }

    @Test func lateDuplicatesAreAnsweredAgain() {
        var g = SendOrderGate<String>()
        _ = g.receive(1, "a")
        guard case .late(let item) = g.receive(1, "a") else { Issue.record(); return }
        #expect(item == "a")
    }

    @Test func withdrawnGapUnblocksTheRestAndIsRefusedLater() {
        var g = SendOrderGate<String>()
        _ = g.receive(2, "b")
        _ = g.receive(3, "c")
        let (pending, more) = g.withdraw(1)
        #expect(pending)
        #expect(more == ["b", "c"])
        guard case .withdrawn = g.receive(1, "a") else { Issue.record("withdrawn message stored"); return }
    }

    @Test func withdrawingAHeldMessageDropsIt() {
        var g = SendOrderGate<String>()
        _ = g.receive(2, "b")
        #expect(g.withdraw(2) == (true, []))
        #expect(released(g.receive(1, "a")) == ["a"])
        guard case .withdrawn = g.receive(2, "b") else { Issue.record(); return }
        #expect(released(g.receive(3, "c")) == ["c"])
    }

    @Test func withdrawingAProcessedMessageChangesNothing() {
        var g = SendOrderGate<String>()
        _ = g.receive(1, "a")
        #expect(g.withdraw(1) == (false, []))
        guard case .late = g.receive(1, "a") else { Issue.record(); return }
    }

    @Test func holdingIsBounded() {
        var g = SendOrderGate<String>(maxHeld: 2)
        _ = g.receive(5, "e")
        _ = g.receive(6, "f")
        guard case .dropped = g.receive(7, "g") else { Issue.record(); return }
    }

    /// Every number missing below the highest held, not the withdrawn ones, at most the limit.
    @Test func gapsListEveryMissingNumberBelowTheHighestHeld() {
        var g = SendOrderGate<String>()
        #expect(g.gaps().isEmpty)
        _ = g.receive(3, "c")
        #expect(g.gaps() == [1, 2])
        _ = g.receive(6, "f")
        _ = g.withdraw(5)
        #expect(g.gaps() == [1, 2, 4])
        #expect(g.gaps(limit: 2) == [1, 2])
        #expect(g.gaps(from: 3) == [4], "a scan from 3 on")
        #expect(g.highestHeld == 6)
        _ = g.receive(1, "a")
        #expect(g.gaps() == [2, 4])
        _ = g.receive(2, "b")
        #expect(g.gaps() == [4])
        _ = g.receive(4, "d")
        #expect(g.gaps().isEmpty)
        #expect(g.highestHeld == 0, "nothing held: the scan has no end")
        _ = g.receive(9, "i")
        #expect(g.gaps() == [7, 8], "6 was released, 7 and 8 are waited for")
    }
}
