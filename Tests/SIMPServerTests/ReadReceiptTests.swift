import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

extension EventLog {
    /// (id, by) of every read event, in order.
    var reads: [(id: String, by: String)] {
        all.compactMap { if case .read(let id, _, let by) = $0 { (id, by) } else { nil } }
    }

    /// Where in the log the first event matching `match` is.
    func index(where match: (ClientEvent) -> Bool) -> Int? {
        all.firstIndex(where: match)
    }
}

/// Read receipts (docs/PROTOCOL.md, Read receipts), against a real server and Redis: who hears
/// of a read, never before `delivered`, and the setting that stops them.
@Suite(.serialized) struct ReadReceiptTests {
    static func sendAll(_ client: SIMPClient, to peer: String, _ texts: [String]) async throws -> [String] {
        var ids: [String] = []
        for text in texts { ids.append(try await client.send(to: peer, text: text)) }
        return ids
    }

    @Test func everyDeviceOfTheSenderHearsEachReadAfterItsDelivery() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (phone, phoneLog) = try await cluster.connectedDevice("alice", "phone")
        let (laptop, laptopLog) = try await cluster.connectedDevice("alice", "laptop")
        let (bob, bobLog) = try await cluster.connectedDevice("bob", "phone")
        let (tablet, tabletLog) = try await cluster.connectedDevice("bob", "tablet")

        let ids = try await Self.sendAll(phone, to: "bob", ["one", "two", "three", "four", "five"])
        #expect(await bobLog.wait { $0.messages.map(\.id) == ids })
        // bob read the first three.
        try await bob.markRead(Array(bobLog.messages.prefix(3)))
        let read = Array(ids.prefix(3))
        for log in [phoneLog, laptopLog] {
            #expect(await log.wait { Set($0.reads.map(\.id)) == Set(read) }, "\(log.reads)")
            #expect(log.reads.allSatisfy { $0.by == "bob" })
        }
        // The sending device heard `delivered` for each before its `read`.
        for id in read {
            let delivered = phoneLog.index { if case .delivered(id, _, _) = $0 { true } else { false } }
            let seen = phoneLog.index { if case .read(id, _, _) = $0 { true } else { false } }
            #expect(delivered != nil && seen != nil && delivered! < seen!)
        }
        // bob's other device learns what he read; the device that read hears nothing of it.
        #expect(await tabletLog.wait { Set($0.reads.map(\.id)) == Set(read) })
        #expect(tabletLog.reads.allSatisfy { $0.by == "bob" })
        // Marked again: nothing new (the last read comes after every earlier one).
        try await bob.markRead(Array(bobLog.messages.suffix(2)))
        #expect(await phoneLog.wait { $0.reads.count == 5 })
        #expect(phoneLog.reads.map(\.id) == ids, "each once, in order")
        #expect(bobLog.reads.isEmpty)
        for client in [phone, laptop, bob, tablet] { await client.close() }
        await cluster.stop()
    }

    @Test func readReceiptsOffStopsSendingAndShowingThem() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let ids = try await Self.sendAll(alice, to: "bob", ["a", "b", "c"])
        #expect(await bobLog.wait { $0.messages.count == 3 })
        let messages = bobLog.messages

        // bob does not send them.
        #expect(try await bob.set(.readReceipts(false)).readReceipts == false)
        try await bob.markRead([messages[0]])
        try await bob.set(.readReceipts(true))
        // alice does not take them.
        try await alice.set(.readReceipts(false))
        try await bob.markRead([messages[1]])
        try await alice.set(.readReceipts(true))
        try await bob.markRead([messages[2]])
        // Notices keep the inbox's order: had either of the first two been told, it would be here first.
        #expect(await aliceLog.wait { !$0.reads.isEmpty })
        #expect(aliceLog.reads.map(\.id) == [ids[2]])
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func badReadRequestsGetClearErrors() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        peer.setReadTimeout(seconds: 10)
        func marks(_ from: String, count: Int = 1) -> Simp_Envelope.OneOf_Body {
            var request = Simp_ReadRequest()
            request.reads = (1...count).map { index in
                var mark = Simp_ReadMark()
                mark.fromUser = from
                mark.messageID = "\(index)"
                mark.seq = UInt64(index)
                return mark
            }
            return .markRead(request)
        }
        let token = try peer.login("bob", "pw-bob")
        #expect(try peer.request(10, marks("alice"))?.error.code == .notConnected)
        try peer.connectAndBind(token: token)
        #expect(try peer.request(3, marks("bob"))?.error.code == .badRequest, "one's own message is no read receipt")
        #expect(try peer.request(4, marks("alice", count: 257))?.error.reason == "at most 256 marks in one request")
        // A mark above what the session confirmed, of a message never received: nothing to tell, and no error.
        if case .ok? = try peer.request(5, marks("alice"))?.body {} else { Issue.record("answered ok") }
        await cluster.stop()
    }
}
