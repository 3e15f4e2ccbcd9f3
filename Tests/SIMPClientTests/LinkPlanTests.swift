import Crypto
import Foundation
import SIMPCore
import Testing
@testable import SIMPClient

/// `LinkPlan`, pure: what a device holding the identity does with the user's links: offers to
/// a new request, shows a code only once the reveal opens the request it offered to, declines
/// a reveal that does not, and leaves alone links offered from elsewhere, declined or granted.
@Suite struct LinkPlanTests {
    static let identity = Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)

    static func record(_ device: String, _ new: LinkingDevice, by: String = "", offer: OfferedLink? = nil, reveal: DeviceLink.Reveal? = nil) -> Simp_LinkRecord {
        var record = Simp_LinkRecord()
        record.device = device
        record.request = Data(new.request.bytes)
        record.offeredBy = by
        if let offer { record.offer = Data(offer.offer.bytes) }
        if let reveal { record.reveal = Data(reveal.bytes) }
        return record
    }

    @Test func offersToANewRequestAndShowsTheCodeOnceRevealed() {
        let new = LinkingDevice(user: "alice", device: "laptop")
        let first = LinkPlan.plan([Self.record("laptop", new)], device: "phone", offers: [:])
        #expect(first.steps == [.offer(device: "laptop", request: new.request)])
        #expect(first.shown == [PendingLink(device: "laptop", code: nil, offeredElsewhere: false)])

        let offered = OfferedLink(user: "alice", device: "laptop", request: new.request, identityKey: Self.identity)
        let waiting = LinkPlan.plan([Self.record("laptop", new, by: "phone", offer: offered)], device: "phone", offers: ["laptop": offered])
        #expect(waiting.steps.isEmpty && waiting.shown == [PendingLink(device: "laptop", code: nil, offeredElsewhere: false)])

        let revealed = LinkPlan.plan([Self.record("laptop", new, by: "phone", offer: offered, reveal: new.reveal)], device: "phone",
                                     offers: ["laptop": offered])
        #expect(revealed.steps.isEmpty)
        #expect(revealed.shown == [PendingLink(device: "laptop", code: new.code(for: offered.offer), offeredElsewhere: false)])
    }

    @Test func aRevealThatDoesNotMatchIsDeclined() {
        let new = LinkingDevice(user: "alice", device: "laptop")
        let offered = OfferedLink(user: "alice", device: "laptop", request: new.request, identityKey: Self.identity)
        let stranger = LinkingDevice(user: "alice", device: "laptop")
        let plan = LinkPlan.plan([Self.record("laptop", new, by: "phone", offer: offered, reveal: stranger.reveal)], device: "phone",
                                 offers: ["laptop": offered])
        #expect(plan.steps == [.decline(device: "laptop")] && plan.shown.isEmpty)
    }

    @Test func linksNotThisDevicesToAnswerAreLeftAlone() {
        let new = LinkingDevice(user: "alice", device: "laptop")
        var declined = Self.record("tablet", new)
        declined.declined = true
        var granted = Self.record("watch", new, by: "phone")
        granted.grant = Data([1])
        var garbage = Self.record("tv", new)
        garbage.request = Data([1, 2, 3])
        let plan = LinkPlan.plan([Self.record("laptop", new, by: "desktop"), declined, granted, garbage, Self.record("phone", new)],
                                 device: "phone", offers: [:])
        #expect(plan.steps.isEmpty)
        #expect(plan.shown == [PendingLink(device: "laptop", code: nil, offeredElsewhere: true)], "its own link and the others are not shown")
    }
}
