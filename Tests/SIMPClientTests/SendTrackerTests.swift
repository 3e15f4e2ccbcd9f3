import NIOCore
import SIMPCore
import Testing

@testable import SIMPClient

@Suite struct SendTrackerTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// RTO 500 ms, doubling to 2 s; out of time 3 s after the first send.
    func tracker() -> SendTracker {
        SendTracker(policy: RetransmitPolicy(maxBackoff: .seconds(2), giveUpAfter: .seconds(3)),
                    estimator: RTTEstimator(initialRTO: .milliseconds(500), minRTO: .milliseconds(100), maxRTO: .seconds(8)))
    }

    func item(_ id: String, to: String = "bob") -> Outgoing {
        var message = Simp_Message()
        message.messageID = id
        message.toUser = to
        message.content = "text of \(id)"
        return Outgoing(to: to, message: message)
    }

    /// Sends each id in turn at `now` and returns the clientSeq each went out with (0: held).
    func send(_ ids: [String], on tracker: inout SendTracker, now: NIODeadline, bound: Bool = true) -> [UInt64] {
        ids.map { tracker.send(item($0), id: $0, now: now, bound: bound)?.clientSeq ?? 0 }
    }

    func accepted(_ id: String, seq: UInt64, to: String = "bob") -> Simp_Accepted {
        var notice = Simp_Accepted()
        notice.messageID = id
        notice.toUser = to
        notice.seq = seq
        return notice
    }

    func delivered(_ id: String, seq: UInt64, to: String = "bob") -> Simp_Delivered {
        var notice = Simp_Delivered()
        notice.messageID = id
        notice.toUser = to
        notice.seq = seq
        return notice
    }

    func missing(_ orders: [UInt64]) -> Simp_Missing {
        var notice = Simp_Missing()
        notice.clientSeqs = orders
        return notice
    }

    /// Moves the clock on in 50 ms steps until something is withdrawn.
    func runUntilWithdrawn(_ tracker: inout SendTracker, from start: NIODeadline) -> (SendTracker.Resends, NIODeadline) {
        var now = start
        while now < start + .seconds(60) {
            now = now + .milliseconds(50)
            let resends = tracker.resends(now: now, bound: true)
            if !resends.withdraw.isEmpty { return (resends, now) }
        }
        return (SendTracker.Resends(), now)
    }

    /// The ids of the messages to send again, in order.
    func ids(_ resends: SendTracker.Resends) -> [String] {
        resends.transmit.map { $0.payload.message.messageID }
    }

    /// The clientSeq each message to send again carries.
    func orders(_ resends: SendTracker.Resends) -> [UInt64] {
        resends.transmit.map { $0.payload.message.clientSeq }
    }

    // MARK: sending

    @Test func messagesAreNumberedInSendOrderOnlyWhenBound() {
        var tracker = tracker()
        #expect(send(["a", "b"], on: &tracker, now: t0) == [1, 2])
        #expect(send(["c"], on: &tracker, now: t0, bound: false) == [0])
        #expect(tracker.outstandingCount == 3)
        #expect(tracker.awaitsAcceptance)
    }

    @Test func theMessageGoesOutWhole() {
        var tracker = tracker()
        let message = tracker.send(item("a", to: "carol"), id: "a", now: t0, bound: true)
        #expect(message?.messageID == "a")
        #expect(message?.toUser == "carol")
        #expect(message?.content == "text of a")
    }

    // MARK: notices

    @Test func acceptedThenDelivered() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        #expect(tracker.accepted(accepted("a", seq: 7), now: t0 + .milliseconds(30)) == .accepted(id: "a", to: "bob", seq: 7))
        #expect(!tracker.awaitsAcceptance)
        #expect(tracker.awaitsDelivery)
        #expect(tracker.outstandingCount == 1)
        let news = tracker.delivered(delivered("a", seq: 7))
        #expect(news == .init(accepted: nil, delivered: .delivered(id: "a", to: "bob", seq: 7)))
        #expect(tracker.outstandingCount == 0)
    }

    @Test func aRepeatedNoticeIsToldOnce() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        _ = tracker.accepted(accepted("a", seq: 7), now: t0)
        #expect(tracker.accepted(accepted("a", seq: 7), now: t0) == nil)
        _ = tracker.delivered(delivered("a", seq: 7))
        #expect(tracker.delivered(delivered("a", seq: 7)) == .init(accepted: nil, delivered: nil))
    }

    @Test func deliveredBeforeAcceptedTellsBothInOrder() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        let news = tracker.delivered(delivered("a", seq: 3))
        #expect(news.accepted == .accepted(id: "a", to: "bob", seq: 3))
        #expect(news.delivered == .delivered(id: "a", to: "bob", seq: 3))
        #expect(tracker.accepted(accepted("a", seq: 3), now: t0) == nil)
        #expect(tracker.outstandingCount == 0)
    }

    @Test func failedGivesTheReasonOrElseTheCodeName() {
        var tracker = tracker()
        _ = send(["a", "b"], on: &tracker, now: t0)
        let full = tracker.failed(Simp_Failed(messageID: "a", to: "bob", code: .inboxFull, reason: "inbox full"))
        #expect(full == .failed(id: "a", to: "bob", reason: "inbox full", code: .inboxFull))
        let unknown = tracker.failed(Simp_Failed(messageID: "b", to: "bob", code: .unknownUser, reason: ""))
        #expect(unknown == .failed(id: "b", to: "bob", reason: "unknown_user", code: .unknownUser))
        #expect(tracker.outstandingCount == 0)
        #expect(tracker.failed(Simp_Failed(messageID: "b", to: "bob", code: .unknownUser, reason: "")) == nil)
    }

    @Test func aFailureAfterAcceptanceIsIgnored() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        _ = tracker.accepted(accepted("a", seq: 4), now: t0)
        #expect(tracker.failed(Simp_Failed(messageID: "a", to: "bob", code: .storeUnavailable, reason: "")) == nil)
        #expect(tracker.delivered(delivered("a", seq: 4)).delivered == .delivered(id: "a", to: "bob", seq: 4))
    }

    @Test func missingResendsWithTheOrderTheMessagesHad() {
        var tracker = tracker()
        _ = send(["a", "b", "c"], on: &tracker, now: t0)
        let resend = tracker.missing(missing([3, 99, 2]), now: t0)
        #expect(resend.map(\.messageID) == ["c", "b"])
        #expect(resend.map(\.clientSeq) == [3, 2])
        _ = tracker.accepted(accepted("b", seq: 1), now: t0)
        #expect(tracker.missing(missing([2]), now: t0).isEmpty)
    }

    /// A `missing` shows that something sent later arrived: the flight the server holds behind
    /// the gap is not probed with ever longer waits, it goes again an RTO after the notice.
    @Test func aMissingNoticeEndsTheProbing() {
        var tracker = tracker()
        _ = send(["a", "b", "c", "d"], on: &tracker, now: t0)
        #expect(ids(tracker.resends(now: t0 + .milliseconds(500), bound: true)) == ["a", "b"])
        #expect(tracker.missing(missing([1]), now: t0 + .milliseconds(600)).map(\.messageID) == ["a"])
        // c and d an RTO after the notice, all of them (a and b went again at 500 ms: later).
        #expect(tracker.resends(now: t0 + .milliseconds(1099), bound: true).transmit.isEmpty)
        #expect(ids(tracker.resends(now: t0 + .milliseconds(1100), bound: true)) == ["c", "d"])
    }

    /// A long session keeps numbers only for what the server has not answered for.
    @Test func answeredMessagesGiveUpTheirNumbers() {
        var tracker = tracker()
        _ = send(["a", "b", "c", "d"], on: &tracker, now: t0)
        #expect(tracker.numberedCount == 4)
        _ = tracker.accepted(accepted("a", seq: 1), now: t0)
        _ = tracker.delivered(delivered("b", seq: 2))
        var failure = Simp_Failed()
        failure.messageID = "c"
        failure.toUser = "bob"
        _ = tracker.failed(failure)
        #expect(tracker.numberedCount == 1)
        // The number of the one still waiting is kept, and the next message continues the count.
        #expect(tracker.missing(missing([4]), now: t0).map(\.messageID) == ["d"])
        #expect(send(["e"], on: &tracker, now: t0) == [5])
    }

    @Test func missingAsksForAtMost64() {
        var tracker = tracker()
        let ids = (1...100).map { "m\($0)" }
        _ = send(ids, on: &tracker, now: t0)
        #expect(tracker.missing(missing(Array(1...100)), now: t0).count == 64)
    }

    // MARK: timers

    @Test func aResendFallsDueAfterTheTimeoutAndKeepsItsOrder() {
        var tracker = tracker()
        _ = send(["a", "b"], on: &tracker, now: t0)
        _ = tracker.accepted(accepted("a", seq: 1), now: t0 + .milliseconds(10))
        // The timer runs from the server's last acknowledgement (it was still answering).
        #expect(tracker.resends(now: t0 + .milliseconds(509), bound: true).transmit.isEmpty)
        let due = tracker.resends(now: t0 + .milliseconds(510), bound: true)
        #expect(ids(due) == ["b"])
        #expect(orders(due) == [2])
        #expect(due.withdraw.isEmpty)
    }

    /// A server that answers nothing (a starved CPU, a dead path) gets a probe of the two
    /// oldest, not every message again; once it answers, the rest follow.
    @Test func anUnansweredFlightIsProbedWithTheOldestTwo() {
        var tracker = tracker()
        _ = send(["a", "b", "c", "d"], on: &tracker, now: t0)
        #expect(ids(tracker.resends(now: t0 + .milliseconds(500), bound: true)) == ["a", "b"])
        #expect(tracker.resends(now: t0 + .milliseconds(1400), bound: true).transmit.isEmpty)
        _ = tracker.accepted(accepted("a", seq: 1), now: t0 + .milliseconds(1450))
        _ = tracker.accepted(accepted("b", seq: 2), now: t0 + .milliseconds(1450))
        #expect(tracker.resends(now: t0 + .milliseconds(1949), bound: true).transmit.isEmpty)
        #expect(ids(tracker.resends(now: t0 + .milliseconds(1950), bound: true)) == ["c", "d"])
    }

    /// A refusal answers too: after the server refused the first two (a full inbox share, say),
    /// the rest are not probed two at a time but go again on their timers, all of them.
    @Test func aRefusalEndsTheProbing() {
        var tracker = tracker()
        _ = send(["a", "b", "c", "d"], on: &tracker, now: t0)
        #expect(ids(tracker.resends(now: t0 + .milliseconds(500), bound: true)) == ["a", "b"])
        _ = tracker.failed(Simp_Failed(messageID: "a", to: "bob", code: .inboxFull, reason: "full"), now: t0 + .milliseconds(1450))
        _ = tracker.failed(Simp_Failed(messageID: "b", to: "bob", code: .inboxFull, reason: "full"), now: t0 + .milliseconds(1450))
        #expect(ids(tracker.resends(now: t0 + .milliseconds(1950), bound: true)) == ["c", "d"])
    }

    @Test func unboundNothingGoesOutButResendsStayDue() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0, bound: false)
        #expect(tracker.resends(now: t0 + .seconds(1), bound: false).transmit.isEmpty)
        // The first message of a session is numbered 1 when it first goes out.
        let due = tracker.resendAll(now: t0 + .seconds(1), bound: true)
        #expect(orders(due) == [1])
    }

    @Test func outOfTimeWhileBoundIsWithdrawnWithItsOrder() {
        var tracker = tracker()
        _ = send(["a", "b"], on: &tracker, now: t0)
        _ = tracker.accepted(accepted("a", seq: 1), now: t0)
        let (due, at) = runUntilWithdrawn(&tracker, from: t0)
        #expect(at >= t0 + .seconds(3))
        #expect(due.withdraw.map(\.messageID) == ["b"])
        #expect(due.withdraw.map(\.clientSeq) == [2])
        #expect(due.withdraw.map(\.toUser) == ["bob"])
        #expect(!tracker.awaitsAcceptance)
        #expect(tracker.outstandingCount == 2)
    }

    @Test func theServerDecidesTheFateOfAWithdrawnMessage() {
        var tracker = tracker()
        _ = send(["a", "b"], on: &tracker, now: t0)
        _ = runUntilWithdrawn(&tracker, from: t0)
        #expect(tracker.accepted(accepted("a", seq: 9), now: t0) == .accepted(id: "a", to: "bob", seq: 9))
        let refused = tracker.failed(Simp_Failed(messageID: "b", to: "bob", code: .withdrawn, reason: ""))
        #expect(refused == .failed(id: "b", to: "bob", reason: "withdrawn", code: .withdrawn))
    }

    @Test func outOfTimeUnboundKeepsTrying() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        let late = t0 + .seconds(10)
        let due = tracker.resends(now: late, bound: false)
        #expect(due.transmit.isEmpty && due.withdraw.isEmpty)
        #expect(tracker.awaitsAcceptance)
        // Tracked afresh: due again after one timeout, not withdrawn at once.
        let again = tracker.resends(now: late + .milliseconds(500), bound: true)
        #expect(ids(again) == ["a"])
    }

    // MARK: sessions

    @Test func disconnectingFailsWhatIsNotAccepted() {
        var tracker = tracker()
        _ = send(["a", "b", "c"], on: &tracker, now: t0)
        _ = tracker.accepted(accepted("b", seq: 5), now: t0)
        _ = tracker.failed(Simp_Failed(messageID: "c", to: "bob", code: .inboxFull, reason: ""))
        let (_, at) = runUntilWithdrawn(&tracker, from: t0)
        _ = send(["d"], on: &tracker, now: at)
        let failed = tracker.abandonUnaccepted().sorted { "\($0)" < "\($1)" }
        let reason = "client disconnected before the server confirmed it"
        // "a" was withdrawn, "d" not yet accepted.
        #expect(failed == [.failed(id: "a", to: "bob", reason: reason), .failed(id: "d", to: "bob", reason: reason)])
        #expect(tracker.outstandingCount == 1)
        #expect(tracker.deliveryQuery()?.messages.map(\.messageID) == ["b"])
    }

    @Test func aNewSessionNumbersFromOneAgain() {
        var tracker = tracker()
        _ = send(["a", "b", "c"], on: &tracker, now: t0)
        _ = tracker.accepted(accepted("a", seq: 1), now: t0)
        tracker.startSession(now: t0 + .seconds(1))
        #expect(tracker.missing(missing([2, 3]), now: t0).isEmpty)
        let due = tracker.resendAll(now: t0 + .seconds(2), bound: true)
        #expect(ids(due) == ["b", "c"])
        #expect(orders(due) == [1, 2])
        #expect(send(["d"], on: &tracker, now: t0 + .seconds(2)) == [3])
    }

    @Test func aWithdrawnMessageIsSentAgainOnTheNextSession() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        let (_, at) = runUntilWithdrawn(&tracker, from: t0)
        tracker.startSession(now: at)
        #expect(tracker.awaitsAcceptance)
        let due = tracker.resendAll(now: at + .seconds(1), bound: true)
        #expect(ids(due) == ["a"])
        #expect(orders(due) == [1])
    }

    /// A client kept from the server longer than the give-up time (reconnects refused while
    /// Redis was down) must still have its earlier messages stored first.
    @Test func aMessageOutOfTimeWhileUnboundKeepsItsPlaceInTheNextSession() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0, bound: false)
        _ = send(["b"], on: &tracker, now: t0 + .seconds(2), bound: false)
        var now = t0
        while now < t0 + .seconds(10) {
            now = now + .milliseconds(50)
            _ = tracker.resends(now: now, bound: false)
        }
        tracker.startSession(now: now)
        let due = tracker.resendAll(now: now, bound: true)
        #expect(ids(due) == ["a", "b"])
        #expect(orders(due) == [1, 2])
    }

    @Test func aWithdrawnMessageKeepsItsPlaceInTheNextSession() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        _ = send(["b"], on: &tracker, now: t0 + .seconds(2))
        let (due, at) = runUntilWithdrawn(&tracker, from: t0)
        #expect(due.withdraw.map(\.messageID) == ["a"])
        tracker.startSession(now: at)
        let again = tracker.resendAll(now: at, bound: true)
        #expect(ids(again) == ["a", "b"])
        #expect(orders(again) == [1, 2])
    }

    /// Once a later message to bob is accepted, an earlier one to bob not yet accepted may no
    /// longer be stored (it would follow the later one): every copy of it says `overtaken`.
    /// Messages to others, and later ones, are not touched.
    @Test func aLaterAcceptanceMarksEarlierMessagesToTheSameRecipientOvertaken() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        _ = tracker.send(item("c", to: "carol"), id: "c", now: t0, bound: true)
        _ = send(["b", "d"], on: &tracker, now: t0)
        _ = tracker.accepted(accepted("b", seq: 7), now: t0)
        let due = tracker.resends(now: t0 + .milliseconds(500), bound: true)
        #expect(ids(due) == ["a", "c", "d"])
        #expect(due.transmit.map(\.payload.message.overtaken) == [true, false, false])
        #expect(tracker.missing(missing([1]), now: t0).map(\.overtaken) == [true])
    }

    /// A withdrawn message whose answer was lost with its session goes out again on the next
    /// one; if a later message to the same recipient was accepted meanwhile, as `overtaken`.
    @Test func aWithdrawnMessageOvertakenMeanwhileSaysSoOnTheNextSession() {
        var tracker = tracker()
        _ = send(["a"], on: &tracker, now: t0)
        _ = send(["b"], on: &tracker, now: t0 + .seconds(2))
        let (_, at) = runUntilWithdrawn(&tracker, from: t0)
        _ = tracker.accepted(accepted("b", seq: 3), now: at)
        tracker.startSession(now: at)
        let again = tracker.resendAll(now: at, bound: true)
        #expect(ids(again) == ["a"])
        #expect(again.transmit.map(\.payload.message.overtaken) == [true])
    }

    /// Delivered before its acceptance arrived (a retransmitted path): the same holds.
    @Test func aDeliveryOvertakingItsAcceptanceAlsoMarksEarlierOnes() {
        var tracker = tracker()
        _ = send(["a", "b"], on: &tracker, now: t0)
        _ = tracker.delivered(delivered("b", seq: 4))
        #expect(tracker.missing(missing([1]), now: t0).map(\.overtaken) == [true])
    }

    @Test func theDeliveryQueryNamesWhatAwaitsDelivery() {
        var tracker = tracker()
        #expect(tracker.deliveryQuery() == nil)
        _ = send(["a", "b"], on: &tracker, now: t0)
        _ = tracker.accepted(accepted("a", seq: 11, to: "carol"), now: t0)
        let query = tracker.deliveryQuery()
        #expect(query?.messages.map(\.messageID) == ["a"])
        #expect(query?.messages.map(\.toUser) == ["carol"])
        #expect(query?.messages.map(\.seq) == [11])
    }

    @Test func theDeliveryQueryAsksAboutAtMost512() {
        var tracker = tracker()
        let ids = (1...600).map { "m\($0)" }
        _ = send(ids, on: &tracker, now: t0)
        for (n, id) in ids.enumerated() { _ = tracker.accepted(accepted(id, seq: UInt64(n + 1)), now: t0) }
        #expect(tracker.deliveryQuery()?.messages.count == 512)
    }

    @Test func restoredMessagesAreResentOrAskedAbout() {
        var tracker = tracker()
        let pending = item("p")
        let saved = ClientStore.Saved(device: "default", savedUpTo: 0,
                                      pending: [(id: "p", to: "bob", message: pending.message)],
                                      accepted: [(id: "q", to: "carol", seq: 8)])
        tracker.restore(saved, now: t0)
        #expect(tracker.outstandingCount == 2)
        #expect(ids(tracker.resendAll(now: t0, bound: true)) == ["p"])
        #expect(tracker.deliveryQuery()?.messages.map(\.messageID) == ["q"])
        #expect(tracker.delivered(delivered("q", seq: 8, to: "carol")).delivered == .delivered(id: "q", to: "carol", seq: 8))
    }
}

@Suite struct FreshMarkTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func tracker() -> SendTracker {
        SendTracker(policy: RetransmitPolicy(maxBackoff: .seconds(2), giveUpAfter: .seconds(30)),
                    estimator: RTTEstimator(initialRTO: .milliseconds(500), minRTO: .milliseconds(100), maxRTO: .seconds(8)))
    }

    func item(_ id: String) -> Outgoing {
        var message = Simp_Message()
        message.messageID = id
        message.toUser = "bob"
        return Outgoing(to: "bob", message: message)
    }

    /// Fresh on the session it first goes out on, resends there included; never again after.
    @Test func aMessageIsFreshOnlyOnTheSessionItFirstWentOutOn() {
        var tracker = tracker()
        #expect(tracker.send(item("a"), id: "a", now: t0, bound: true)?.fresh == true)
        let resend = tracker.resends(now: t0 + .seconds(1), bound: true).transmit
        #expect(resend.map(\.payload.message.fresh) == [true])
        var missing = Simp_Missing()
        missing.clientSeqs = [1]
        #expect(tracker.missing(missing, now: t0).map(\.fresh) == [true])

        tracker.startSession(now: t0 + .seconds(2))
        let again = tracker.resendAll(now: t0 + .seconds(2), bound: true).transmit
        #expect(again.map(\.key) == ["a"])
        #expect(again.map(\.payload.message.fresh) == [false], "the first session may have stored it")
        #expect(tracker.send(item("b"), id: "b", now: t0 + .seconds(2), bound: true)?.fresh == true)
    }

    /// Queued while unbound, it never went out: fresh on the session that sends it first.
    @Test func aMessageHeldUntilTheFirstBindIsFresh() {
        var tracker = tracker()
        #expect(tracker.send(item("a"), id: "a", now: t0, bound: false) == nil)
        tracker.startSession(now: t0)
        let first = tracker.resendAll(now: t0, bound: true).transmit
        #expect(first.map(\.payload.message.fresh) == [true])
    }

    @Test func aMessageRestoredFromDiskIsNeverFresh() {
        var tracker = tracker()
        var message = Simp_Message()
        message.messageID = "a"
        tracker.restore(ClientStore.Saved(device: "default", savedUpTo: 0, pending: [("a", "bob", message)], accepted: []), now: t0)
        tracker.startSession(now: t0)
        #expect(tracker.resendAll(now: t0, bound: true).transmit.map(\.payload.message.fresh) == [false])
    }
}

/// A message to a group: accepted once with how many members will confirm, then one
/// confirmation per member, each reported once.
@Suite struct GroupSendTrackerTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func sent(_ id: String) -> SendTracker {
        var tracker = SendTracker(policy: RetransmitPolicy(maxBackoff: .seconds(2), giveUpAfter: .seconds(3)))
        var message = Simp_Message()
        message.messageID = id
        message.toUser = "#team"
        _ = tracker.send(Outgoing(to: "#team", message: message), id: id, now: t0, bound: true)
        return tracker
    }

    func member(_ id: String, _ member: String) -> Simp_Delivered {
        .with { $0.messageID = id; $0.toUser = "#team"; $0.seq = 4; $0.member = member }
    }

    @Test func acceptedOnceThenEachMemberOnce() {
        var tracker = sent("m1")
        let accepted = Simp_Accepted.with { $0.messageID = "m1"; $0.toUser = "#team"; $0.seq = 4; $0.recipients = 2 }
        #expect(tracker.accepted(accepted, now: t0) == .groupAccepted(id: "m1", to: "#team", seq: 4, recipients: 2))
        #expect(tracker.accepted(accepted, now: t0) == nil)
        #expect(!tracker.awaitsAcceptance && !tracker.awaitsDelivery, "nothing left to resend nor to ask about")
        #expect(tracker.delivered(member("m1", "bob")).delivered == .memberDelivered(id: "m1", to: "#team", member: "bob", seq: 4))
        #expect(tracker.delivered(member("m1", "bob")).delivered == nil, "bob's second device, on another node")
        #expect(tracker.delivered(member("m1", "carol")).delivered != nil)
    }

    /// `accepted` waits for every member's copy, so a member may confirm first: the message
    /// stays unaccepted (and resent) until `accepted` says how many members there are.
    @Test func aMemberConfirmingBeforeAcceptedLeavesItWaitingForAccepted() {
        var tracker = sent("m1")
        let news = tracker.delivered(member("m1", "bob"))
        #expect(news.accepted == nil && news.delivered == .memberDelivered(id: "m1", to: "#team", member: "bob", seq: 4))
        #expect(tracker.awaitsAcceptance)
        let accepted = Simp_Accepted.with { $0.messageID = "m1"; $0.toUser = "#team"; $0.seq = 4; $0.recipients = 2 }
        #expect(tracker.accepted(accepted, now: t0) == .groupAccepted(id: "m1", to: "#team", seq: 4, recipients: 2))
        #expect(tracker.delivered(member("m1", "bob")).delivered == nil)
    }
}
