import NIOCore
import SIMPCore
import SIMPRedis
import Testing
@testable import SIMPServer

@Suite struct DeliveryEngineTests {
    let limits = DeliveryEngine.Limits(inboxShare: 2500, minReplicas: 1, replicaHoldSeconds: 10)

    func request(overtaken: Bool = false, ambiguous: Bool = false) -> StoreRequest {
        var request = StoreRequest(from: "alice", id: "m1", to: "bob", bytes: [1])
        request.overtaken = overtaken
        if ambiguous { request.ambiguousSince = .uptimeNanoseconds(1) }
        return request
    }

    func failure(_ envelopes: [Simp_Envelope]) -> (code: Simp_ErrorCode, reason: String)? {
        guard envelopes.count == 1, case .failed(let failed)? = envelopes.first?.body else { return nil }
        return (failed.code, failed.reason)
    }

    @Test func aStoredMessageIsAcceptedAndADuplicateSaysWhetherItWasDelivered() {
        let stored = DeliveryEngine.answers(request(), .stored(seq: 7, bytes: []), limits: limits)
        #expect(stored.map(\.body) == [.accepted(.with { $0.messageID = "m1"; $0.toUser = "bob"; $0.seq = 7 })])
        let again = DeliveryEngine.answers(request(), .duplicate(seq: 7, delivered: true), limits: limits)
        #expect(again.count == 2)
        guard case .delivered(let delivered)? = again.last?.body else { Issue.record("no delivered"); return }
        #expect(delivered.seq == 7 && delivered.toUser == "bob")
        #expect(DeliveryEngine.answers(request(), .duplicate(seq: 7, delivered: false), limits: limits).count == 1)
    }

    @Test func eachFailureHasItsCodeAndReason() {
        #expect(failure(DeliveryEngine.answers(request(), .unknownRecipient, limits: limits))! == (.unknownUser, "no such user: bob"))
        #expect(failure(DeliveryEngine.answers(request(), .inboxFull, limits: limits))! == (.inboxFull, "bob's inbox is full"))
        #expect(failure(DeliveryEngine.answers(request(), .shareFull, limits: limits))?.reason
                == "you have 2500 messages bob has not confirmed yet; wait for them to be read")
        #expect(failure(DeliveryEngine.answers(request(overtaken: true), .notStored, limits: limits))?.code == .outOfOrder)
        #expect(failure(DeliveryEngine.answers(request(), .notStored, limits: limits))?.code == .storeUnavailable)
        #expect(failure(DeliveryEngine.answers(request(), .failedBefore(code: .inboxFull), limits: limits))?.reason
                == "not stored: an earlier attempt of it failed (inbox_full), which this one cannot undo")
        #expect(failure(DeliveryEngine.answers(request(), .replicasShort(online: 0), limits: limits))?.reason
                == "not stored: the Redis shard of bob's inbox has 0 of the 1 replicas this server requires (waited 10 s); send it again later")
        let down = RedisError(.io, "connection refused")
        #expect(failure(DeliveryEngine.answers(request(), .unavailable(down), limits: limits))?.reason
                == "message store unavailable: connection refused")
        #expect(failure(DeliveryEngine.answers(request(ambiguous: true), .unavailable(down), limits: limits))?.reason
                == "message store unavailable: connection refused; it may still be delivered")
    }

    func push(_ seq: UInt64, copy: Bool = false) -> ConfirmedPush {
        ConfirmedPush(seq: seq, from: "alice", id: "m\(seq)", isCopy: copy)
    }

    /// The first device to confirm a message makes it delivered; a copy of the user's own
    /// message tells nobody; a repeat is not written again.
    @Test func aReceiptDeliversWhatNoOtherDeviceConfirmed() {
        let effects = DeliveryEngine.receipt(newMark: 5, pushes: [push(3), push(4, copy: true), push(5)], deviceMark: 2,
                                             otherDevicesMark: 3, user: "bob", device: "phone")
        #expect(effects.delivered.map(\.seq) == [5])
        #expect(effects.receipt == .init(user: "bob", device: "phone", deviceMark: 5, needsEntries: false))
        let repeated = DeliveryEngine.receipt(newMark: 5, pushes: [], deviceMark: 5, otherDevicesMark: 0, user: "bob", device: "phone")
        #expect(repeated.receipt == nil && repeated.delivered.isEmpty)
    }

    /// Seqs the receipt covers that this session never pushed: their senders are known only
    /// to the store, which is asked for the entries.
    @Test func aReceiptBeyondWhatWasPushedAsksTheStoreForTheEntries() {
        let effects = DeliveryEngine.receipt(newMark: 9, pushes: [push(8), push(9)], deviceMark: 4, otherDevicesMark: 0,
                                             user: "bob", device: "phone")
        #expect(effects.receipt?.needsEntries == true)
        #expect(effects.delivered.map(\.seq) == [8, 9])
    }

    @Test func otherNodesAreToldWhenTheSenderHasDevicesElsewhere() {
        #expect(DeliveryEngine.tellsOtherNodes(devicesHere: 0, devicesKnown: 0))
        #expect(!DeliveryEngine.tellsOtherNodes(devicesHere: 1, devicesKnown: 1))
        #expect(DeliveryEngine.tellsOtherNodes(devicesHere: 1, devicesKnown: 2))
        #expect(!DeliveryEngine.tellsOtherNodes(devicesHere: 2, devicesKnown: 2))
    }

    @Test func earlyOnlyForAFirstSendToOneReadyDeviceWithNothingElseUnderWay() {
        let ready = DeliveryEngine.EarlyRecipient()
        func early(fresh: Bool = true, answerOnly: Bool = false, others: Bool = false, here: Int = 1,
                   _ recipient: DeliveryEngine.EarlyRecipient? = DeliveryEngine.EarlyRecipient()) -> Bool {
            DeliveryEngine.mayPushEarly(fresh: fresh, answerOnly: answerOnly, othersBeingStored: others, sessionsHere: here, recipient: recipient)
        }
        #expect(early(ready))
        #expect(!early(fresh: false), "a resend on a later session may have been stored")
        #expect(!early(answerOnly: true))
        #expect(!early(others: true), "it could overtake a message being stored")
        #expect(!early(here: 2), "two devices here: a retraction would have two places to go")
        #expect(!early(here: 0, nil))
        var recipient = ready
        recipient.takesEarly = false
        #expect(!early(recipient))
        recipient = ready
        recipient.pushesOutstanding = true
        #expect(!early(recipient), "an unconfirmed push could be overtaken")
        recipient = ready
        recipient.mayMissPushes = true
        #expect(!early(recipient))
        recipient = ready
        recipient.synced = false
        #expect(!early(recipient), "its inbox was not read yet")
    }

    @Test func limitErrorsAndMissingReportsAreThrottled() {
        let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)
        #expect(DeliveryEngine.mayTellLimit(lastTold: nil, now: t0))
        #expect(!DeliveryEngine.mayTellLimit(lastTold: t0, now: t0 + .milliseconds(999)))
        #expect(DeliveryEngine.mayTellLimit(lastTold: t0, now: t0 + .seconds(1)))
        #expect(DeliveryEngine.missingScan(next: 4, checkedUpTo: 0, lastFullAt: .distantPast, now: t0) == (4, true),
                "the first report lists every gap")
        #expect(DeliveryEngine.missingScan(next: 4, checkedUpTo: 9, lastFullAt: t0, now: t0 + .milliseconds(199)) == (10, false),
                "within 200 ms only numbers above those looked at")
        #expect(DeliveryEngine.missingScan(next: 12, checkedUpTo: 9, lastFullAt: t0, now: t0 + .milliseconds(199)) == (12, false))
        #expect(DeliveryEngine.missingScan(next: 4, checkedUpTo: 9, lastFullAt: t0, now: t0 + .milliseconds(200)) == (4, true),
                "every 200 ms every gap again")
    }
}
