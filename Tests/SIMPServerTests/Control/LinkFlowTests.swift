import Foundation
@testable import SIMPServer
import SIMPCore
import Testing

/// `LinkFlow`, pure: which link requests are refused before anything runs, what a script's
/// status answers, and which links a fetch shows.
@Suite struct LinkFlowTests {
    static func step(_ kind: Simp_LinkStepKind, _ device: String, _ body: [UInt8] = [1]) -> Simp_Envelope.OneOf_Body {
        var step = Simp_LinkStep()
        step.kind = kind
        step.device = device
        step.body = Data(body)
        return .linkStep(step)
    }

    static func refusal(_ body: Simp_Envelope.OneOf_Body, from device: String = "phone") -> Simp_ErrorCode? {
        guard case .failure(let refusal)? = LinkFlow.request(from: body, device: device) else { return nil }
        return refusal.code
    }

    @Test func stepsOnlyTheirDevicesMayTakeAreRefusedBeforeTheyRun() {
        #expect(Self.refusal(Self.step(.linkRequest, "laptop")) == .linkStep)
        #expect(Self.refusal(Self.step(.linkReveal, "laptop")) == .linkStep)
        #expect(Self.refusal(Self.step(.linkOffer, "phone")) == .linkStep)
        #expect(Self.refusal(Self.step(.linkStepNone, "laptop")) == .badRequest)
        #expect(Self.refusal(Self.step(.linkOffer, "Not A Name")) == .badRequest)
        #expect(Self.refusal(Self.step(.linkOffer, "laptop", [])) == .badRequest)
        #expect(Self.refusal(Self.step(.linkGrant, "laptop", [UInt8](repeating: 0, count: 257))) == .badRequest)
        #expect(Self.refusal(Self.step(.linkDecline, "laptop", [1])) == .badRequest)
        #expect(Self.refusal(Self.step(.linkDecline, "laptop", [])) == nil)
        // A request names its own device, or none (the sender's).
        #expect(LinkFlow.request(from: Self.step(.linkRequest, ""), device: "phone") == .success(.step(.linkRequest, device: "phone", body: [1])))
    }

    @Test func aScriptsStatusAnswers() {
        let flow = LinkFlow(request: .step(.linkGrant, device: "laptop", body: [1]), user: "alice", device: "phone", nowMillis: 0)
        #expect(flow.stepped(.done) == .answer(.ok(Simp_Ok())))
        for status in [LinkFlow.Stepped.noLink, .outOfOrder, .notOfferer] {
            guard case .refuse(.linkStep, _) = flow.stepped(status) else {
                Issue.record("\(status) is not LINK_STEP")
                continue
            }
        }
    }

    @Test func aFetchShowsLinksNotExpiredWithTheirParts() {
        let fields: [String: [UInt8]] = [
            "laptop\0request": [1], "laptop\0by": Array("phone".utf8), "laptop\0offer": [2], "laptop\0expires": Array("2000".utf8),
            "tablet\0request": [3], "tablet\0expires": Array("999".utf8), "tablet\0declined": Array("1".utf8),
            "old\0request": [4], "old\0expires": Array("500".utf8),
        ]
        let flow = LinkFlow(request: .fetch(device: nil), user: "alice", device: "phone", nowMillis: 900)
        guard case .answer(.linkRecords(let records)) = flow.fetched(fields) else {
            Issue.record("no records")
            return
        }
        #expect(records.links.map(\.device) == ["laptop", "tablet"], "the old link expired")
        #expect(records.links[0].offeredBy == "phone" && records.links[0].offer == Data([2]) && records.links[0].expiresAt == 2000)
        #expect(records.links[1].declined)
        let one = LinkFlow(request: .fetch(device: "tablet"), user: "alice", device: "phone", nowMillis: 900)
        guard case .answer(.linkRecords(let only)) = one.fetched(fields) else { return }
        #expect(only.links.map(\.device) == ["tablet"])
    }
}
