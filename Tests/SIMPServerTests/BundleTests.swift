import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Pushes that leave the server together for one session share BUNDLE datagrams, but only
/// for a client that asked for them at CONNECT (docs/PROTOCOL.md, section 2).
@Suite(.serialized) struct BundleTests {
    @Test(arguments: [true, false])
    func waitingMessagesArriveInBundlesOnlyWhenAskedFor(bundles: Bool) async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let (ann, annLog) = try await cluster.connectedClient("ann")
        let ids = try (1...20).map { _ in try ann.post(to: "bob", text: String(repeating: "b", count: 100)) }
        #expect(await annLog.wait { $0.accepted.count == 20 }, "stored while bob is away")

        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("bob", "pw-bob"), bundles: bundles)
        var kinds: [DatagramKind] = []
        var received: [Simp_Message] = []
        while received.count < ids.count, let datagram = try peer.receiveDatagram() {
            switch datagram.header.kind {
            case .data: received.append(try Simp_Message(serializedBytes: datagram.payload))
            case .bundle: received += try DatagramBundle.split(datagram.payload).map { try Simp_Message(serializedBytes: $0) }
            default: continue  // the PONG answering BIND
            }
            kinds.append(datagram.header.kind)
        }
        #expect(received.map(\.messageID) == ids)
        #expect(received.map(\.seq) == Array(1...20))
        if bundles {
            // 20 messages of about 170 bytes in one read: spread over four bundles of five.
            #expect(kinds == Array(repeating: .bundle, count: DatagramBundle.spread), "datagram kinds: \(kinds)")
        } else {
            #expect(!kinds.contains(.bundle), "datagram kinds: \(kinds)")
        }
        await ann.close()
        await cluster.stop()
    }

    /// A client's BUNDLE is taken message by message, in order; one that does not split
    /// cleanly is dropped whole and counted, and the session goes on.
    @Test func theServerTakesBundlesAndDropsMalformedOnes() async throws {
        let cluster = try await TestCluster.start()
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        try await cluster.register("mallory")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))
        #expect(peer.session?.bundles == true, "the server says it takes bundles")

        let malformed = DatagramBundle.pack([try message("lost-1"), try message("lost-2")], spread: 1)[0].payload.dropLast()
        peer.sendDatagram(.bundle, Array(malformed))
        #expect(await waitFor { cluster.metric(#"simp_datagrams_dropped_total{reason="malformed"}"#) == 1 })

        let bundle = DatagramBundle.pack(try ["one", "two", "three"].map(message), spread: 1)
        #expect(bundle.count == 1 && bundle[0].kind == .bundle)
        peer.sendDatagram(.bundle, bundle[0].payload)
        var accepted: [String] = []
        while accepted.count < 3, let envelope = try peer.read() {
            if case .accepted(let a) = envelope.body { accepted.append(a.messageID) }
        }
        #expect(accepted == ["one", "two", "three"])
        #expect(await bobLog.wait { $0.messages.map(\.id) == ["one", "two", "three"] })
        await bob.close()
        await cluster.stop()
    }

    private func message(_ id: String) throws -> [UInt8] {
        var message = Simp_Message()
        message.messageID = id
        message.toUser = "bob"
        message.type = .text
        message.content = "text \(id)"
        return try message.serializedBytes()
    }

    /// The library asks for bundles: a client that reconnects to a full inbox gets every
    /// message once, in order, through them.
    @Test func theClientLibraryReadsBundles() async throws {
        let cluster = try await TestCluster.start()
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        await bob.close()
        let (ann, annLog) = try await cluster.connectedClient("ann")
        let ids = try (1...50).map { try ann.post(to: "bob", text: "message \($0)") }
        #expect(await annLog.wait { $0.accepted.count == 50 })

        let (again, againLog) = try await cluster.connectedClient("bob", register: false)
        #expect(await againLog.wait { $0.messages.count >= 50 })
        #expect(againLog.messages.map(\.id) == ids)
        #expect(cluster.metric("simp_push_bundles_total") >= 1, "the messages came in bundles")
        // UDP works here: the stream path carried no message either way (issue 45, item 1).
        #expect(cluster.metric(#"simp_stream_payloads_total{direction="in"}"#) == 0)
        #expect(cluster.metric(#"simp_stream_payloads_total{direction="out"}"#) == 0)
        #expect(cluster.metric(#"simp_sessions_on_path{path="udp"}"#) >= 1 && cluster.metric(#"simp_sessions_on_path{path="stream"}"#) == 0)
        #expect(again.path == .udp && againLog.all.contains(.connected(user: "bob", path: .udp)))
        #expect(await annLog.wait { Set($0.delivered) == Set(ids) })
        _ = bobLog
        await again.close()
        await ann.close()
        await cluster.stop()
    }
}
