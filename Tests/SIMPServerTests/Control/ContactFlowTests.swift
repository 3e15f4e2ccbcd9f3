@testable import SIMPServer
import SIMPCore
import Testing

/// The steps of each contact request, and what each outcome leads to.
struct ContactFlowTests {
    typealias Result = ContactFlow.Result

    static func result(_ status: Int, contacts: [(String, String)] = [], blocked: [String] = [], nodes: [String] = []) -> Result {
        Result(status: status, contacts: contacts.map { Simp_Contact(name: $0.0, state: $0.1) }, blocked: blocked, nodes: nodes)
    }

    static func flow(_ action: Simp_ContactRequest.Action, _ peer: String = "bob") -> ContactFlow {
        var request = Simp_ContactRequest()
        request.action = action
        request.user = peer
        return ContactFlow(request, user: "alice")
    }

    static func answer(_ contacts: [(String, String)], blocked: [String] = []) -> ContactFlow.Next {
        .answer(ContactFlow.answer(result(0, contacts: contacts, blocked: blocked)))
    }

    @Test func askingWritesThePeersSideFirstThenTellsThem() {
        var flow = Self.flow(.add)
        #expect(flow.start() == .run(.ask, owner: "alice", peer: "bob"))
        #expect(flow.finished(.ask, owner: "alice", Self.result(0)) == .run(.receive, owner: "bob", peer: "alice"))
        #expect(flow.finished(.receive, owner: "bob", Self.result(1)) == .run(.sent, owner: "alice", peer: "bob"))
        #expect(flow.finished(.sent, owner: "alice", Self.result(0, contacts: [("bob", "sent")])) == .notify(.contactRequest, from: "alice", to: "bob"))
        #expect(flow.next() == Self.answer([("bob", "sent")]))
    }

    @Test func askingSomeoneWhoBlockedYouLooksLikeAnUnansweredRequest() {
        var flow = Self.flow(.add)
        _ = flow.start()
        _ = flow.finished(.ask, owner: "alice", Self.result(0))
        #expect(flow.finished(.receive, owner: "bob", Self.result(0)) == .run(.sent, owner: "alice", peer: "bob"))
        #expect(flow.finished(.sent, owner: "alice", Self.result(0, contacts: [("bob", "sent")])) == Self.answer([("bob", "sent")]),
                "no notice")
    }

    @Test func askingBackIsAccepting() {
        var flow = Self.flow(.add)
        _ = flow.start()
        #expect(flow.finished(.ask, owner: "alice", Self.result(1)) == .run(.accept, owner: "alice", peer: "bob"))
        #expect(flow.finished(.accept, owner: "alice", Self.result(0, contacts: [("bob", "contact")])) == .run(.contact, owner: "bob", peer: "alice"))
        #expect(flow.finished(.contact, owner: "bob", Self.result(0, contacts: [("alice", "contact")])) == .notify(.contactAccepted, from: "alice", to: "bob"))
        #expect(flow.next() == Self.answer([("bob", "contact")]), "answered with alice's records, not bob's")
    }

    @Test func aRequestTheAskersSideLostIsRepaired() {
        // bob had asked alice, but a node lost between the steps left alice without the request.
        var flow = Self.flow(.add)
        _ = flow.start()
        _ = flow.finished(.ask, owner: "alice", Self.result(0))
        #expect(flow.finished(.receive, owner: "bob", Self.result(3)) == .run(.contact, owner: "alice", peer: "bob"))
        #expect(flow.finished(.contact, owner: "alice", Self.result(0)) == .notify(.contactAccepted, from: "alice", to: "bob"))
    }

    @Test func refusals() {
        var blocked = Self.flow(.add)
        _ = blocked.start()
        #expect(blocked.finished(.ask, owner: "alice", Self.result(-1)) == .refuse(.badRequest, "you blocked bob; unblock them first"))
        var limited = Self.flow(.add)
        _ = limited.start()
        #expect(limited.finished(.ask, owner: "alice", Self.result(-2)) == .refuse(.rateLimited, "too many contact requests; try again later"))
        var unknown = Self.flow(.add)
        _ = unknown.start()
        _ = unknown.finished(.ask, owner: "alice", Self.result(0))
        #expect(unknown.finished(.receive, owner: "bob", Self.result(-3)) == .refuse(.unknownUser, "no such user: bob"))
        var accept = Self.flow(.accept)
        #expect(accept.start() == .run(.accept, owner: "alice", peer: "bob"))
        #expect(accept.finished(.accept, owner: "alice", Self.result(-4)) == .refuse(.badRequest, "bob has not asked to be your contact"))
        var unblock = Self.flow(.unblock)
        _ = unblock.start()
        #expect(unblock.finished(.unblock, owner: "alice", Self.result(-4)) == .refuse(.badRequest, "bob is not blocked"))
    }

    @Test func decliningAndRemovingForgetTheOtherSide() {
        for action in [Simp_ContactRequest.Action.decline, .remove] {
            var flow = Self.flow(action)
            guard case .run(let step, _, _) = flow.start() else { Issue.record("starts with a step"); continue }
            #expect(flow.finished(step, owner: "alice", Self.result(0)) == .run(.forget, owner: "bob", peer: "alice"))
            #expect(flow.finished(.forget, owner: "bob", Self.result(0, contacts: [("carol", "contact")])) == Self.answer([]),
                    "bob's records are not alice's answer")
        }
    }

    @Test func blockingStopsEarlyPushesWhereTheUsersDevicesAre() {
        var flow = Self.flow(.block)
        #expect(flow.start() == .run(.block, owner: "alice", peer: "bob"))
        #expect(flow.finished(.block, owner: "alice", Self.result(0, blocked: ["bob"], nodes: ["node-2"])) == .filtered(nodes: ["node-2"]))
        #expect(flow.next() == Self.answer([], blocked: ["bob"]))
    }

    @Test func blockingAContactEndsItOnBothSides() {
        var flow = Self.flow(.block)
        _ = flow.start()
        #expect(flow.finished(.block, owner: "alice", Self.result(1, blocked: ["bob"])) == .run(.forget, owner: "bob", peer: "alice"))
        #expect(flow.finished(.forget, owner: "bob", Self.result(0)) == .filtered(nodes: []))
        #expect(flow.next() == Self.answer([], blocked: ["bob"]))
    }

    @Test func twoUsersAskingEachOtherAtOnceBecomeContacts() {
        var flow = Self.flow(.add)
        _ = flow.start()
        _ = flow.finished(.ask, owner: "alice", Self.result(0))
        _ = flow.finished(.receive, owner: "bob", Self.result(1))
        // bob's own request reached alice's side meanwhile.
        #expect(flow.finished(.sent, owner: "alice", Self.result(3, contacts: [("bob", "contact")])) == .run(.contact, owner: "bob", peer: "alice"))
        #expect(flow.finished(.contact, owner: "bob", Self.result(0)) == .notify(.contactAccepted, from: "alice", to: "bob"))
        #expect(flow.next() == Self.answer([("bob", "contact")]))
    }

    @Test func anAcceptanceIsNotToldToAUserWhoBlockedTheAccepter() {
        var flow = Self.flow(.accept)
        _ = flow.start()
        #expect(flow.finished(.accept, owner: "alice", Self.result(0, contacts: [("bob", "contact")])) == .run(.contact, owner: "bob", peer: "alice"))
        #expect(flow.finished(.contact, owner: "bob", Self.result(-1)) == Self.answer([("bob", "contact")]))
        var again = Self.flow(.accept)
        _ = again.start()
        #expect(again.finished(.accept, owner: "alice", Self.result(2, contacts: [("bob", "contact")])) == Self.answer([("bob", "contact")]),
                "accepting a contact again is no error")
    }

    @Test func askingAgainTellsThePeerOnlyIfItsSideLostTheRequest() {
        var again = Self.flow(.add)
        _ = again.start()
        #expect(again.finished(.ask, owner: "alice", Self.result(3)) == .run(.receive, owner: "bob", peer: "alice"))
        #expect(again.finished(.receive, owner: "bob", Self.result(4)) == .run(.sent, owner: "alice", peer: "bob"))
        #expect(again.finished(.sent, owner: "alice", Self.result(0)) == Self.answer([]), "told before: no second notice")
        var lost = Self.flow(.add)
        _ = lost.start()
        _ = lost.finished(.ask, owner: "alice", Self.result(0))
        _ = lost.finished(.receive, owner: "bob", Self.result(4))
        #expect(lost.finished(.sent, owner: "alice", Self.result(0)) == .notify(.contactRequest, from: "alice", to: "bob"))
    }

    @Test func requestsRefusedBeforeAnythingRuns() {
        var request = Simp_ContactRequest()
        request.action = .add
        request.user = "Not A Name"
        #expect(ContactFlow.problem(in: request, from: "alice")?.0 == .unknownUser)
        request.user = "alice"
        #expect(ContactFlow.problem(in: request, from: "alice")?.1 == "that is you")
        request.action = .list
        request.user = ""
        #expect(ContactFlow.problem(in: request, from: "alice") == nil)
        request.action = .UNRECOGNIZED(42)
        #expect(ContactFlow.problem(in: request, from: "alice")?.0 == .badRequest)
    }

    @Test func noticesAreStoredUnfilteredAndAnswerNobody() throws {
        let notice = ContactFlow.notice(.contactRequest, from: "alice", to: "bob", id: 7, nowMillis: 1_000)
        #expect(notice.notice && !notice.filtered)
        let message = try Simp_Message(serializedBytes: notice.bytes)
        #expect(message.type == .contactRequest && message.fromUser == "alice" && message.toUser == "bob" && message.messageID == "7")
    }
}
