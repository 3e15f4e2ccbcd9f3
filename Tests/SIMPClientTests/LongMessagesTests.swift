import Foundation
import NIOCore
import SIMPCore
import Testing
@testable import SIMPClient

@Suite struct LongMessagesTests {
    /// Part `index` of `count` of the message `base`, as the sequencer hands it over.
    private static func part(_ base: String, _ index: Int, of count: Int, text: String? = nil, from: String = "alice",
                             to: String = "bob", seq: UInt64 = 0) -> IncomingMessage {
        let id = LongText.PartID(base: base, index: index, count: count)
        var message = IncomingMessage(id: id.description, from: from, to: to, text: text ?? "\(base)-\(index)",
                                      seq: seq, sentAt: Date(millis: 1_000), storedAt: Date(millis: 2_000 + Int64(seq)))
        message.part = id
        return message
    }

    private static func add(_ message: IncomingMessage, to reassembly: inout Reassembly) -> IncomingMessage? {
        reassembly.add(message, as: message.part!)
    }

    // MARK: Reassembly

    @Test func partsInOrderMakeOneWholeMessage() {
        var reassembly = Reassembly()
        #expect(Self.add(Self.part("77", 1, of: 3, text: "one ", seq: 10), to: &reassembly) == nil)
        #expect(Self.add(Self.part("77", 2, of: 3, text: "two ", seq: 11), to: &reassembly) == nil)
        #expect(reassembly.count == 1)
        var last = Self.part("77", 3, of: 3, text: "three", seq: 12)
        last.group = "team"
        last.groupSeq = 40
        let whole = Self.add(last, to: &reassembly)
        #expect(whole?.id == "77")
        #expect(whole?.text == "one two three")
        #expect(whole?.parts == 3)
        #expect(whole?.part == nil)
        #expect(whole?.from == "alice")
        #expect(whole?.to == "bob")
        #expect(whole?.seq == 12)
        #expect(whole?.storedMillis == 2_012)
        #expect(whole?.group == "team")
        #expect(whole?.groupSeq == 40)
        #expect(whole?.markID == "77/3/3")
        #expect(reassembly.count == 0)
    }

    @Test func partsOutOfOrderMakeOneWholeMessageInTheRightOrder() {
        var reassembly = Reassembly()
        #expect(Self.add(Self.part("5", 3, of: 3, text: "c", seq: 3), to: &reassembly) == nil)
        #expect(Self.add(Self.part("5", 1, of: 3, text: "a", seq: 1), to: &reassembly) == nil)
        var middle = Self.part("5", 2, of: 3, text: "b", seq: 2)
        middle.groupSeq = 9
        let whole = Self.add(middle, to: &reassembly)
        #expect(whole?.id == "5")
        #expect(whole?.text == "abc")
        #expect(whole?.parts == 3)
        // The part that completed it gives its place.
        #expect(whole?.seq == 2)
        #expect(whole?.storedMillis == 2_002)
        #expect(whole?.groupSeq == 9)
        #expect(reassembly.count == 0)
    }

    @Test func aRepeatedPartNeitherCompletesEarlyNorMakesASecondWhole() {
        var reassembly = Reassembly()
        #expect(Self.add(Self.part("9", 1, of: 3, seq: 1), to: &reassembly) == nil)
        #expect(Self.add(Self.part("9", 1, of: 3, seq: 1), to: &reassembly) == nil)
        #expect(Self.add(Self.part("9", 2, of: 3, seq: 2), to: &reassembly) == nil)
        #expect(Self.add(Self.part("9", 2, of: 3, seq: 2), to: &reassembly) == nil, "three parts are needed, two are in")
        let whole = Self.add(Self.part("9", 3, of: 3, seq: 3), to: &reassembly)
        #expect(whole?.text == "9-19-29-3")
        #expect(Self.add(Self.part("9", 3, of: 3, seq: 3), to: &reassembly) == nil, "no second whole")
        #expect(Self.add(Self.part("9", 2, of: 3, seq: 2), to: &reassembly) == nil, "no second whole")
    }

    @Test func messagesFromDifferentSendersWithTheSameIDAreKeptApart() {
        var reassembly = Reassembly()
        #expect(Self.add(Self.part("42", 1, of: 2, text: "alice ", from: "alice", seq: 1), to: &reassembly) == nil)
        #expect(Self.add(Self.part("42", 1, of: 2, text: "carol ", from: "carol", seq: 2), to: &reassembly) == nil)
        #expect(reassembly.count == 2)
        let alices = Self.add(Self.part("42", 2, of: 2, text: "done", from: "alice", seq: 3), to: &reassembly)
        #expect(alices?.text == "alice done")
        #expect(alices?.from == "alice")
        #expect(reassembly.count == 1)
        let carols = Self.add(Self.part("42", 2, of: 2, text: "too", from: "carol", seq: 4), to: &reassembly)
        #expect(carols?.text == "carol too")
        #expect(carols?.from == "carol")
        #expect(reassembly.count == 0)
    }

    @Test func messagesToDifferentRecipientsWithTheSameIDAreKeptApart() {
        // The user's copies of its own messages (sent from another device) name their recipient.
        var reassembly = Reassembly()
        #expect(Self.add(Self.part("42", 1, of: 2, text: "to bob ", from: "me", to: "bob"), to: &reassembly) == nil)
        #expect(Self.add(Self.part("42", 1, of: 2, text: "to team ", from: "me", to: "#team"), to: &reassembly) == nil)
        let toTeam = Self.add(Self.part("42", 2, of: 2, text: "end", from: "me", to: "#team"), to: &reassembly)
        #expect(toTeam?.text == "to team end")
        #expect(reassembly.count == 1)
    }

    @Test func theOldestIncompleteMessageIsDroppedBeyondTheCapacity() {
        var reassembly = Reassembly(capacity: 2)
        #expect(Self.add(Self.part("a", 1, of: 2, seq: 1), to: &reassembly) == nil)
        #expect(Self.add(Self.part("b", 1, of: 2, seq: 2), to: &reassembly) == nil)
        #expect(reassembly.count == 2)
        #expect(Self.add(Self.part("c", 1, of: 2, seq: 3), to: &reassembly) == nil)
        #expect(reassembly.count == 2, "a was dropped")
        #expect(Self.add(Self.part("b", 2, of: 2, seq: 4), to: &reassembly)?.text == "b-1b-2")
        #expect(Self.add(Self.part("c", 2, of: 2, seq: 5), to: &reassembly)?.text == "c-1c-2")
        #expect(reassembly.count == 0)
        // a's last part starts it afresh: its first part is gone.
        #expect(Self.add(Self.part("a", 2, of: 2, seq: 6), to: &reassembly) == nil)
        #expect(reassembly.count == 1)
    }

    @Test func addingToAHeldMessageDoesNotDropAnother() {
        var reassembly = Reassembly(capacity: 2)
        #expect(Self.add(Self.part("a", 1, of: 3), to: &reassembly) == nil)
        #expect(Self.add(Self.part("b", 1, of: 3), to: &reassembly) == nil)
        #expect(Self.add(Self.part("a", 2, of: 3), to: &reassembly) == nil)
        #expect(Self.add(Self.part("b", 2, of: 3), to: &reassembly) == nil)
        #expect(reassembly.count == 2)
        #expect(Self.add(Self.part("a", 3, of: 3), to: &reassembly)?.text == "a-1a-2a-3")
        #expect(Self.add(Self.part("b", 3, of: 3), to: &reassembly)?.text == "b-1b-2b-3")
    }

    @Test func aPartWithAnotherCountReplacesTheHeldMessage() {
        var reassembly = Reassembly()
        #expect(Self.add(Self.part("7", 1, of: 3, text: "old "), to: &reassembly) == nil)
        #expect(Self.add(Self.part("7", 2, of: 3, text: "old "), to: &reassembly) == nil)
        #expect(Self.add(Self.part("7", 2, of: 2, text: "end"), to: &reassembly) == nil, "the parts of 3 are gone")
        #expect(reassembly.count == 1)
        let whole = Self.add(Self.part("7", 1, of: 2, text: "new "), to: &reassembly)
        #expect(whole?.text == "new end")
        #expect(whole?.parts == 2)
        #expect(reassembly.count == 0)
    }

    @Test func aHistoryPageJoinsCompleteMessagesAndLeavesOutCutOnes() {
        let first = IncomingMessage(id: "m1", from: "alice", to: "bob", text: "hi", seq: 1, sentAt: Date(millis: 1), storedAt: Date(millis: 1))
        let second = IncomingMessage(id: "m2", from: "bob", to: "alice", text: "yo", seq: 4, sentAt: Date(millis: 1), storedAt: Date(millis: 1))
        let page = [
            Self.part("early", 2, of: 2, text: "cut at the start", seq: 0),
            first,
            Self.part("long", 1, of: 2, text: "long ", seq: 2),
            Self.part("long", 2, of: 2, text: "message", seq: 3),
            second,
            Self.part("late", 1, of: 3, text: "cut at the end", seq: 5),
            Self.part("late", 2, of: 3, text: "cut at the end", seq: 6),
        ]
        let joined = Reassembly.joined(page)
        #expect(joined.map(\.id) == ["m1", "long", "m2"])
        #expect(joined[1].text == "long message")
        #expect(joined[1].parts == 2)
        #expect(joined[1].seq == 3)
        #expect(joined[1].part == nil)
        #expect(joined[0] == first)
        #expect(joined[2] == second)
        #expect(Reassembly.joined([]).isEmpty)
    }

    @Test func aReadMarkNamesALongMessagesLastPart() {
        var message = IncomingMessage(id: "123", from: "alice", to: "bob", text: "t", seq: 1, sentAt: Date(millis: 1), storedAt: Date(millis: 1))
        #expect(message.markID == "123")
        message.parts = 4
        #expect(message.markID == "123/4/4")
    }

    // MARK: Parts of unknown messages (issue 46, finding 7)

    /// A time `seconds` after an arbitrary start.
    private static func at(_ seconds: Double) -> NIODeadline {
        .uptimeNanoseconds(1_000_000_000_000) + .nanoseconds(Int64(seconds * 1_000_000_000))
    }

    /// What `budget` answers to each (sender, seconds) in turn.
    private static func answers(_ budget: inout PartRecoveryBudget, _ asks: [(String, Double)]) -> [Bool] {
        asks.map { budget.admit($0.0, now: at($0.1)) }
    }

    @Test func recoveriesAreCappedPerSender() {
        var budget = PartRecoveryBudget()
        #expect(PartRecoveryBudget.perSender == 2)
        let answers = Self.answers(&budget, [("mallory", 0), ("mallory", 1), ("mallory", 2), ("mallory", 30), ("alice", 30)])
        #expect(answers == [true, true, false, false, true], "another sender has a cap of its own")
        #expect(budget.skipped == 2)
        #expect(budget.admitted == 3)
    }

    /// A window is a minute from the first recovery admitted in it; the next one starts fresh.
    @Test func thePerMinuteWindowRollsOver() {
        var budget = PartRecoveryBudget()
        let answers = Self.answers(&budget, [("mallory", 0), ("mallory", 50), ("mallory", 59.999), ("mallory", 60),
                                             ("mallory", 61), ("mallory", 119.999), ("mallory", 500)])
        #expect(answers == [true, true, false, true, true, false, true])
        #expect(budget.skipped == 2)
        #expect(budget.admitted == 5)
    }

    @Test func recoveriesAreCappedOverAllSenders() {
        var budget = PartRecoveryBudget()
        #expect(PartRecoveryBudget.overall == 6)
        let six = Self.answers(&budget, (1...6).map { ("user\($0)", Double($0)) })
        #expect(six == Array(repeating: true, count: 6))
        // The seventh sender in the minute, and one with an allowance left: the overall cap.
        let over = Self.answers(&budget, [("user7", 10), ("user1", 20)])
        #expect(over == [false, false])
        #expect(budget.skipped == 2)
        // A minute after the overall window's first; a refused recovery took nothing from its
        // sender's allowance.
        let later = Self.answers(&budget, [("user7", 61), ("user7", 62)])
        #expect(later == [true, true])
    }

    /// Senders whose window ended are forgotten: many senders over a long time cost no memory.
    @Test func theBudgetForgetsSendersWhoseWindowEnded() {
        var budget = PartRecoveryBudget()
        for minute in 0..<100 {
            for sender in 0..<10 {
                _ = budget.admit("user\(minute)-\(sender)", now: Self.at(Double(minute * 60 + sender)))
            }
        }
        #expect(budget.admitted == 600)
        #expect(budget.skipped == 400)
        #expect(budget.sendersTracked <= 2 * PartRecoveryBudget.overall)
    }

    /// One datagram of a part of a message nobody sent asks for at most the sender's share of
    /// history reads: 100 such parts start 2 recoveries, and the other 98 are skipped and counted.
    @Test func unknownPartsFromOneSenderStartAtMostItsRecoveries() {
        var reassembly = Reassembly()
        var recovered = 0
        for n in 0..<100 {
            let part = Self.part("bogus\(n)", 2, of: 3, text: "x", from: "mallory", seq: UInt64(n + 1))
            let taken = reassembly.take(part, as: part.part!, now: Self.at(Double(n) / 10))
            #expect(taken.whole == nil)
            if taken.recoverEarlierParts { recovered += 1 }
        }
        #expect(recovered == 2)
        #expect(reassembly.recoveries.skipped == 98)
        // A later part of a message held already asks for nothing, and is not counted.
        let next = Self.part("bogus99", 3, of: 3, text: "y", from: "mallory", seq: 101)
        #expect(!reassembly.take(next, as: next.part!, now: Self.at(11)).recoverEarlierParts)
        #expect(reassembly.recoveries.skipped == 98)
        // A first part never asks.
        let first = Self.part("new", 1, of: 2, from: "mallory", seq: 102)
        #expect(!reassembly.take(first, as: first.part!, now: Self.at(12)).recoverEarlierParts)
        #expect(reassembly.recoveries.skipped == 98)
    }

    @Test func aRestartedClientRecoversTheMessagesThatWereComingIn() {
        var reassembly = Reassembly()
        for (n, sender) in ["alice", "carol"].enumerated() {
            let part = Self.part("long", 3, of: 4, from: sender, seq: UInt64(n + 1))
            #expect(reassembly.take(part, as: part.part!, now: Self.at(0)).recoverEarlierParts, "\(sender)")
        }
        #expect(reassembly.recoveries.skipped == 0)
    }

    /// One sender's 100 parts of messages it never finishes take only its own share of the 16
    /// slots: another sender's message, half in, stays held and completes.
    @Test func oneSendersUnknownPartsLeaveAnotherSendersPartialMessageIntact() {
        var reassembly = Reassembly()
        let first = Self.part("essay", 1, of: 3, text: "one ", from: "alice", seq: 1)
        #expect(reassembly.take(first, as: first.part!, now: Self.at(0)).whole == nil)
        for n in 0..<100 {
            let part = Self.part("bogus\(n)", 2, of: 3, text: "x", from: "mallory", seq: UInt64(n + 2))
            _ = reassembly.take(part, as: part.part!, now: Self.at(1))
        }
        #expect(reassembly.count == 1 + Reassembly.perSenderShare, "mallory holds only its share")
        let second = Self.part("essay", 2, of: 3, text: "two ", from: "alice", seq: 200)
        #expect(reassembly.take(second, as: second.part!, now: Self.at(2)).whole == nil)
        let last = Self.part("essay", 3, of: 3, text: "three", from: "alice", seq: 201)
        let whole = reassembly.take(last, as: last.part!, now: Self.at(3)).whole
        #expect(whole?.id == "essay")
        #expect(whole?.text == "one two three")
        #expect(whole?.from == "alice")
    }

    /// A sender over its share drops its own oldest incomplete message, not the oldest of all.
    @Test func aSenderOverItsShareDropsItsOwnOldest() {
        var reassembly = Reassembly(capacity: 16, perSender: 2)
        #expect(Self.add(Self.part("b1", 1, of: 2, from: "bob", seq: 1), to: &reassembly) == nil)
        #expect(Self.add(Self.part("m1", 1, of: 2, from: "mallory", seq: 2), to: &reassembly) == nil)
        #expect(Self.add(Self.part("m2", 1, of: 2, from: "mallory", seq: 3), to: &reassembly) == nil)
        #expect(Self.add(Self.part("m3", 1, of: 2, from: "mallory", seq: 4), to: &reassembly) == nil)
        #expect(reassembly.count == 3, "m1 was dropped, bob's older one kept")
        #expect(Self.add(Self.part("b1", 2, of: 2, from: "bob", seq: 5), to: &reassembly)?.text == "b1-1b1-2")
        #expect(Self.add(Self.part("m2", 2, of: 2, from: "mallory", seq: 6), to: &reassembly)?.text == "m2-1m2-2")
        #expect(Self.add(Self.part("m1", 2, of: 2, from: "mallory", seq: 7), to: &reassembly) == nil, "m1's first part is gone")
    }

    // MARK: LongSends

    @Test func eventsNotAboutAPartPassUnchanged() {
        var sends = LongSends()
        let message = IncomingMessage(id: "m", from: "alice", to: "bob", text: "t", seq: 1, sentAt: Date(millis: 1), storedAt: Date(millis: 1))
        let events: [ClientEvent] = [
            .connected(user: "bob"),
            .accepted(id: "1", to: "bob", seq: 1),
            .delivered(id: "1", to: "bob", seq: 1),
            .groupAccepted(id: "2", to: "#team", seq: 3, recipients: 4),
            .memberDelivered(id: "2", to: "#team", member: "carol", seq: 3),
            .read(id: "1", from: "bob", by: "bob"),
            .failed(id: "3", to: "bob", reason: "no such user"),
            .failed(id: "3", to: "bob", reason: "no such user"),
            .message(message),
            .error("x"),
        ]
        for event in events {
            #expect(sends.fold(event) == event)
        }
    }

    @Test func anIDWithASlashThatIsNotAPartsPassesUnchanged() {
        var sends = LongSends()
        for id in ["a/b", "5/1/1", "5/4/3", "5/0/3", "/1/2", "5/x/3"] {
            let events: [ClientEvent] = [
                .accepted(id: id, to: "bob", seq: 1),
                .delivered(id: id, to: "bob", seq: 1),
                .groupAccepted(id: id, to: "#team", seq: 1, recipients: 2),
                .memberDelivered(id: id, to: "#team", member: "carol", seq: 1),
                .read(id: id, from: "bob", by: "bob"),
                .failed(id: id, to: "bob", reason: "refused"),
                .failed(id: id, to: "bob", reason: "refused again"),
            ]
            for event in events {
                #expect(sends.fold(event) == event, "\(id)")
            }
        }
    }

    @Test func aPartOtherThanTheLastHasNoNews() {
        var sends = LongSends()
        for index in 1...2 {
            let id = "8/\(index)/3"
            #expect(sends.fold(.accepted(id: id, to: "bob", seq: UInt64(index))) == nil)
            #expect(sends.fold(.delivered(id: id, to: "bob", seq: UInt64(index))) == nil)
            #expect(sends.fold(.groupAccepted(id: id, to: "#team", seq: UInt64(index), recipients: 2)) == nil)
            #expect(sends.fold(.memberDelivered(id: id, to: "#team", member: "carol", seq: UInt64(index))) == nil)
            #expect(sends.fold(.read(id: id, from: "bob", by: "bob")) == nil)
        }
    }

    @Test func theLastPartsEventsAreTheWholesEvents() {
        var sends = LongSends()
        #expect(sends.fold(.accepted(id: "8/3/3", to: "bob", seq: 12)) == .accepted(id: "8", to: "bob", seq: 12))
        #expect(sends.fold(.delivered(id: "8/3/3", to: "bob", seq: 12)) == .delivered(id: "8", to: "bob", seq: 12))
        #expect(sends.fold(.read(id: "8/3/3", from: "bob", by: "bob")) == .read(id: "8", from: "bob", by: "bob"))
        #expect(sends.fold(.groupAccepted(id: "9/2/2", to: "#team", seq: 30, recipients: 5))
            == .groupAccepted(id: "9", to: "#team", seq: 30, recipients: 5))
        #expect(sends.fold(.memberDelivered(id: "9/2/2", to: "#team", member: "carol", seq: 30))
            == .memberDelivered(id: "9", to: "#team", member: "carol", seq: 30))
        #expect(sends.fold(.read(id: "9/2/2", from: "#team", by: "carol")) == .read(id: "9", from: "#team", by: "carol"))
        // A base with a slash keeps it.
        #expect(sends.fold(.accepted(id: "a/b/2/2", to: "bob", seq: 1)) == .accepted(id: "a/b", to: "bob", seq: 1))
    }

    @Test func theFirstFailureOfAPartFailsTheWholeOnce() {
        var sends = LongSends()
        #expect(sends.fold(.accepted(id: "6/1/5", to: "bob", seq: 1)) == nil)
        #expect(sends.fold(.accepted(id: "6/2/5", to: "bob", seq: 2)) == nil)
        let failed = sends.fold(.failed(id: "6/3/5", to: "bob", reason: "no answer from the server"))
        #expect(failed == .failed(id: "6", to: "bob", reason: "part 3 of 5: no answer from the server"))
        if case .failed(_, _, let reason, _) = failed {
            #expect(reason.hasPrefix("part 3 of 5: "))
        }
        #expect(sends.fold(.failed(id: "6/4/5", to: "bob", reason: "OUT_OF_ORDER")) == nil)
        #expect(sends.fold(.failed(id: "6/3/5", to: "bob", reason: "again")) == nil)
        #expect(sends.fold(.accepted(id: "6/5/5", to: "bob", seq: 5)) == nil)
        #expect(sends.fold(.delivered(id: "6/5/5", to: "bob", seq: 5)) == nil)
        #expect(sends.fold(.read(id: "6/5/5", from: "bob", by: "bob")) == nil)
        #expect(sends.fold(.groupAccepted(id: "6/5/5", to: "bob", seq: 5, recipients: 1)) == nil)
        #expect(sends.fold(.memberDelivered(id: "6/5/5", to: "bob", member: "bob", seq: 5)) == nil)
        // Other messages are not silenced.
        #expect(sends.fold(.accepted(id: "7/2/2", to: "bob", seq: 7)) == .accepted(id: "7", to: "bob", seq: 7))
        #expect(sends.fold(.accepted(id: "6", to: "bob", seq: 8)) == .accepted(id: "6", to: "bob", seq: 8),
                "a message whose id is the failed one's base is not a part")
        #expect(sends.fold(.failed(id: "7/1/2", to: "bob", reason: "x")) == .failed(id: "7", to: "bob", reason: "part 1 of 2: x"))
    }

    @Test func onlyTheLatestFailuresAreRemembered() {
        var sends = LongSends(capacity: 2)
        for base in ["a", "b", "c"] {
            #expect(sends.fold(.failed(id: "\(base)/1/2", to: "bob", reason: "x")) == .failed(id: base, to: "bob", reason: "part 1 of 2: x"))
        }
        #expect(sends.fold(.failed(id: "c/2/2", to: "bob", reason: "x")) == nil)
        #expect(sends.fold(.failed(id: "b/2/2", to: "bob", reason: "x")) == nil)
        #expect(sends.fold(.accepted(id: "a/2/2", to: "bob", seq: 1)) == .accepted(id: "a", to: "bob", seq: 1), "a was forgotten")
    }
}
