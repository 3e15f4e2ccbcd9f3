import NIOCore
import Testing
@testable import SIMPServer

/// Which stores are under way and which conversation's latest store came after a refused one,
/// with the time passed in.
@Suite struct StoreTrackerTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func request(_ id: String, to: String = "bob", device: String = "phone", place order: UInt64 = 0) -> StoreRequest {
        var request = StoreRequest(from: "alice", id: id, to: to, bytes: [1])
        request.device = device
        request.place = order
        return request
    }

    @Test func aMessageIsUnderWayOnceUntilSettled() {
        var tracker = StoreTracker()
        #expect(tracker.begin(request("m1")) == 1)
        #expect(tracker.begin(request("m1")) == nil, "its resend waits for the first store's outcome")
        #expect(tracker.begin(request("m2")) == 2)
        tracker.settled(request("m1"))
        #expect(tracker.begin(request("m1")) == 3, "settled: a resend is a new store")
    }

    @Test func aRecipientWithStoresUnderWayIsKnown() {
        var tracker = StoreTracker()
        #expect(!tracker.othersBeingStored(for: "bob"))
        _ = tracker.begin(request("m1"))
        #expect(!tracker.othersBeingStored(for: "bob"), "counted once queued")
        tracker.queued(for: "bob")
        _ = tracker.begin(request("m2"))
        tracker.queued(for: "bob")
        tracker.settled(request("m1"))
        #expect(tracker.othersBeingStored(for: "bob"))
        tracker.settled(request("m2"))
        #expect(!tracker.othersBeingStored(for: "bob"))
        #expect(!tracker.othersBeingStored(for: "carol"))
    }

    /// A store refused for replicas learns that a later one of its conversation (same sender,
    /// device and recipient) was stored, for a minute.
    @Test func aLaterStoreOfTheConversationOvertakesAnEarlierOne() {
        var tracker = StoreTracker()
        tracker.stored(request("m5", place: 5), now: t0)
        #expect(tracker.isOvertaken(request("m3", place: 3)))
        #expect(!tracker.isOvertaken(request("m6", place: 6)))
        #expect(!tracker.isOvertaken(request("m3", device: "laptop", place: 3)), "another device's order")
        #expect(!tracker.isOvertaken(request("m3", to: "carol", place: 3)))
        tracker.stored(request("m4", place: 4), now: t0)
        #expect(tracker.isOvertaken(request("m4", place: 4)), "an older store does not lower the mark")
        tracker.prune(now: t0 + .seconds(59))
        #expect(tracker.isOvertaken(request("m3", place: 3)))
        tracker.prune(now: t0 + .seconds(61))
        #expect(!tracker.isOvertaken(request("m3", place: 3)), "forgotten after a minute")
    }
}
