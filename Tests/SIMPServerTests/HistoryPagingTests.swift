import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Issue 9, finding 2: a history larger than the frame limit was sent in one frame anyway, and
/// the client dropped the connection. Now it comes in pages that each fit a frame.
@Suite(.serialized) struct HistoryPagingLiveTests {
    /// About 1 KB (as large as a text going as one message may be), numbered so that order shows.
    static func text(_ i: Int) -> String { "m-\(i)-" + String(repeating: "x", count: LongText.partBytes - 12) }

    /// alice sends texts `range` to bob and waits until every one is stored.
    func send(_ alice: SIMPClient, _ log: EventLog, _ range: Range<Int>) async throws {
        for i in range { _ = try await alice.send(to: "bob", text: Self.text(i)) }
        #expect(await log.wait { $0.accepted.count >= range.upperBound })
    }

    @Test func aThousandAskedOfAHistoryOverTwoFramesArriveInOrderOnOneConnection() async throws {
        let cluster = try await TestCluster.start()
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        try await send(alice, aliceLog, 0..<130) // about 140 KB

        let history = try await bob.history(with: "alice", limit: 1000)
        #expect(history.map(\.text) == (0..<130).map(Self.text))
        #expect(history.allSatisfy { $0.from == "alice" && $0.to == "bob" })
        #expect(!bobLog.all.contains { if case .disconnected = $0 { true } else { false } }, "the connection stayed up")
        let newest = try await bob.historyPage(with: "alice", limit: 3)
        #expect(newest.messages.map(\.text) == (127..<130).map(Self.text))
        #expect(newest.more && newest.nextBefore == 3)
        let fewer = try await bob.history(with: "alice", limit: 70)
        #expect(fewer.map(\.text) == (60..<130).map(Self.text))
        await alice.close()
        await bob.close()
        await cluster.stop()
    }

    /// The same history read with a hand-driven client whose frame parser refuses anything
    /// over the limit: every page's frame fits with the margin, and the pages add up.
    @Test func everyPageFrameFitsTheLimit() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        try await send(alice, aliceLog, 0..<130)
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        _ = try peer.login("bob", "pw-bob")

        var pages: [Simp_HistoryResponse] = []
        var before: UInt64 = 0
        for id in UInt64(10)..<20 {
            var request = Simp_HistoryRequest()
            request.peer = "alice"
            request.limit = 1000
            request.before = before
            guard let reply = try peer.request(id, .history(request)), case .historyResult(let page) = reply.body else {
                Issue.record("no page for request \(id)")
                break
            }
            let frame = Frame.encode(reply).readableBytes
            #expect(frame <= Frame.defaultMaxLength - HistoryPaging.frameMargin + 100, "page frame of \(frame) bytes")
            #expect(page.nextBefore == before + UInt64(page.messages.count))
            pages.append(page)
            before = page.nextBefore
            if !page.more { break }
        }
        #expect(pages.count == 3, "146 KB in pages of under 62 KB")
        #expect(pages.reversed().flatMap(\.messages).map(\.content) == (0..<130).map(Self.text))
        #expect(pages.last?.more == false)

        var bad = Simp_HistoryRequest()
        bad.peer = String(repeating: "A", count: 60_000)
        let refused = try peer.request(30, .history(bad))
        guard case .error(let error)? = refused?.body else {
            Issue.record("no error: \(String(describing: refused))")
            return
        }
        #expect(error.code == .badRequest)
        var past = Simp_HistoryRequest()
        past.peer = "alice"
        past.before = UInt64.max
        guard case .historyResult(let empty)? = try peer.request(31, .history(past))?.body else {
            Issue.record("the connection did not survive a bad request")
            return
        }
        #expect(empty.messages.isEmpty && !empty.more)
        await alice.close()
        await cluster.stop()
    }

    /// Messages arriving between two pages move the older ones back: the next page repeats
    /// some of the previous page's messages and loses none; `history` drops the repeats.
    @Test func messagesArrivingBetweenPagesAreRepeatedNotLost() async throws {
        let cluster = try await TestCluster.start()
        let (bob, _) = try await cluster.connectedClient("bob")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        try await send(alice, aliceLog, 0..<100)
        let first = try await bob.historyPage(with: "alice", limit: 40)
        #expect(first.messages.map(\.text) == (60..<100).map(Self.text))
        try await send(alice, aliceLog, 100..<105)
        let second = try await bob.historyPage(with: "alice", before: first.nextBefore, limit: 40)
        #expect(second.messages.map(\.text) == (25..<65).map(Self.text))
        let all = try await bob.history(with: "alice", limit: 1000)
        #expect(all.map(\.text) == (0..<105).map(Self.text))
        await alice.close()
        await bob.close()
        await cluster.stop()
    }
}
