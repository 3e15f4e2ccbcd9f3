import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A message the server refuses for its content (`failed`) used a `clientSeq` of the sender's
/// send order; the sender forgets it, so the server must not wait for that number.
@Suite(.serialized) struct RefusedMessageOrderTests {
    @Test func aRefusedMessageDoesNotHoldUpTheSendersNextOne() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        peer.sendDatagram(.data, try message(id: "bad-1", clientSeq: 1, type: .receipt))
        peer.sendDatagram(.data, try message(id: "good-2", clientSeq: 2, type: .text))
        let (failed, accepted) = try peer.readFailedAndAccepted()
        #expect(failed?.messageID == "bad-1" && failed?.code == .badRequest)
        #expect(accepted?.messageID == "good-2", "stored without waiting for the refused number")
        #expect(await bobLog.wait { $0.messages.map(\.id) == ["good-2"] })
        await bob.close()
        await cluster.stop()
    }

    /// A resend of a number the session already processed is answered from what was stored,
    /// never stored now: its first attempt failed (the sender was told so) and later messages
    /// may have been stored since, so storing it would break their order.
    @Test func aLateResendOfAFailedMessageIsAnsweredNotStored() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))
        let first = try message(id: "first", clientSeq: 1, type: .text, to: "carol")

        peer.sendDatagram(.data, first)
        #expect(try failure(of: "first", on: peer)?.code == .unknownUser, "carol does not exist yet")
        try await cluster.register("carol")
        peer.sendDatagram(.data, first)
        #expect(try failure(of: "first", on: peer)?.code == .storeUnavailable, "the resend is answered, not stored")
        peer.sendDatagram(.data, try message(id: "second", clientSeq: 2, type: .text, to: "carol"))

        let (carol, carolLog) = try await cluster.connectedClient("carol", register: false)
        #expect(await carolLog.wait { $0.messages.map(\.id) == ["second"] })
        await carol.close()
        await cluster.stop()
    }

    /// A message the sender marks `overtaken` (a later one to the same recipient was accepted
    /// first) is never stored now: answered accepted if it was stored before, else failed
    /// OUT_OF_ORDER. Here "later" was accepted on an earlier session of the sender.
    @Test func anOvertakenMessageIsAnsweredNeverStored() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        try await cluster.register("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))
        peer.sendDatagram(.data, try message(id: "later", clientSeq: 1, type: .text))
        let stored = try #require(try acceptance(of: "later", on: peer))

        peer.sendDatagram(.data, try message(id: "earlier", clientSeq: 2, type: .text, overtaken: true))
        let refused = try failure(of: "earlier", on: peer)
        #expect(refused?.code == .outOfOrder)
        #expect(refused?.reason.contains("a later message of yours to bob was stored first") == true)
        peer.sendDatagram(.data, try message(id: "later", clientSeq: 3, type: .text, overtaken: true))
        #expect(try acceptance(of: "later", on: peer)?.seq == stored.seq, "answered from what was stored")

        let (bob, bobLog) = try await cluster.connectedClient("bob", register: false)
        #expect(await bobLog.wait { $0.messages.map(\.id) == ["later"] })
        #expect(cluster.metric("simp_messages_stored_total") == 1)
        await bob.close()
        await cluster.stop()
    }

    /// A sender whose session ended before it heard that its message failed for good sends it
    /// again on a new session: the same failure comes back, and it is not stored after the
    /// message that was stored meanwhile.
    @Test func aMessageThatFailedForGoodFailsTheSameOnANewSession() async throws {
        let cluster = try await TestCluster.start { $0.inboxLimit = 1 }
        try await cluster.register("mallory")
        try await cluster.register("bob")
        let first = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try first.connectAndBind(token: try first.login("mallory", "pw-mallory"))
        first.sendDatagram(.data, try message(id: "fills", clientSeq: 1, type: .text))
        #expect(try acceptance(of: "fills", on: first) != nil)
        first.sendDatagram(.data, try message(id: "refused", clientSeq: 2, type: .text))
        #expect(try failure(of: "refused", on: first)?.code == .inboxFull)
        first.closeControl()

        let (bob, bobLog) = try await cluster.connectedClient("bob", register: false)
        #expect(await bobLog.wait { $0.messages.map(\.id) == ["fills"] })
        let second = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try second.connectAndBind(token: try second.login("mallory", "pw-mallory"))
        second.sendDatagram(.data, try message(id: "later", clientSeq: 1, type: .text))
        #expect(try acceptance(of: "later", on: second) != nil)
        second.sendDatagram(.data, try message(id: "refused", clientSeq: 2, type: .text))
        let again = try failure(of: "refused", on: second)
        #expect(again?.code == .inboxFull)
        #expect(again?.reason.contains("an earlier attempt of it failed") == true)
        #expect(await bobLog.wait { $0.messages.map(\.id) == ["fills", "later"] })
        #expect(cluster.metric("simp_messages_stored_total") == 2)
        await bob.close()
        await cluster.stop()
    }

    private func acceptance(of id: String, on peer: RawPeer) throws -> Simp_Accepted? {
        while let envelope = try peer.read() {
            if case .accepted(let accepted) = envelope.body, accepted.messageID == id { return accepted }
            if case .failed(let failed) = envelope.body, failed.messageID == id { return nil }
        }
        return nil
    }

    private func failure(of id: String, on peer: RawPeer) throws -> Simp_Failed? {
        while let envelope = try peer.read() {
            if case .failed(let failed) = envelope.body, failed.messageID == id { return failed }
            if case .accepted(let accepted) = envelope.body, accepted.messageID == id { return nil }
        }
        return nil
    }

    func message(id: String, clientSeq: UInt64, type: Simp_Message.MessageType, to: String = "bob",
                 overtaken: Bool = false) throws -> [UInt8] {
        try datagramMessage(id: id, clientSeq: clientSeq, type: type, to: to, overtaken: overtaken)
    }
}
