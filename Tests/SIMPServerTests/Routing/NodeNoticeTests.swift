@testable import SIMPServer
import SIMPCore
import Testing

/// What one node tells another, as bytes and back; anything else is refused.
struct NodeNoticeTests {
    @Test(arguments: [
        NodeNotice.inbox(user: "bob"),
        .devices(user: "bob", count: 3),
        .filtered(user: "bob"),
        .typing(from: "alice", to: "bob"),
        .typing(from: "alice", to: "bob", sealed: SealedText.privateMessagePrefix + [0x20, 0x00, 0x20, 0xff]),
        .presence(PresenceChange(user: "bob", online: true, since: 5), watchers: ["alice"]),
        .presence(PresenceChange(user: "bob", online: false, since: 1_764_000_000_000), watchers: ["alice", "carol"]),
        .keys(user: "bob", watchers: ["alice", "bob"]),
    ])
    func roundTrips(_ notice: NodeNotice) {
        #expect(NodeNotice(payload: notice.payload) == notice)
    }

    @Test(arguments: ["typing alice", "typing alice Bob", "typing alice bob ", "typing alice bob xyzw", "typing alice bob \u{0}\u{1}\u{0}\u{2}", "filtered", "filtered Bob", "presence alice bob online",
                      "presence  bob online", "presence alice bob offline", "presence alice,Bad bob online", "presence alice bob away",
                      "keys alice", "keys  bob", "keys alice,Bad bob", "keys alice bob carol", "keys alice Bob"])
    func refusesMalformed(_ text: String) {
        #expect(NodeNotice(payload: Array(text.utf8)) == nil)
    }

    @Test func presencePayloads() {
        #expect(PresenceChange(user: "bob", online: true, since: 7).payload == Array("bob online 7".utf8))
        #expect(PresenceChange(user: "bob", online: false, since: 5).payload == Array("bob offline 5".utf8))
        #expect(PresenceChange(payload: Array("bob offline -1".utf8)) == nil)
        #expect(PresenceChange(payload: Array("bob online".utf8)) == nil)
        #expect(PresenceChange(payload: Array("bob online 5".utf8)) == PresenceChange(user: "bob", online: true, since: 5))
    }
}
