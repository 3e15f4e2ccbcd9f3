import SIMPCore
import SIMPTestSupport
import Testing

/// Framing against a running server: PROTOCOL.md says split and coalesced frames are normal,
/// and a bad length or body gets an Error frame and a closed connection, while others carry on.
@Suite(.serialized) struct LiveFramingTests {
    func ping(_ nonce: UInt64) -> Simp_Envelope {
        var p = Simp_Ping()
        p.nonce = nonce
        return Simp_Envelope(requestID: nonce, .ping(p))
    }

    @Test func splitFrameIsAnsweredOnce() async throws {
        let cluster = try await TestCluster.start()
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        let bytes = peer.frame(ping(11))
        for chunk in [bytes.prefix(2), bytes.dropFirst(2).prefix(3), bytes.dropFirst(5)] {
            peer.writeRaw(Array(chunk))
            try await Task.sleep(for: .milliseconds(30))
        }
        guard case .pong(let pong)? = try peer.read()?.body else { Issue.record("no pong"); return }
        #expect(pong.nonce == 11)
        await cluster.stop()
    }

    @Test func coalescedFramesAreAnsweredInOrder() async throws {
        let cluster = try await TestCluster.start()
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        peer.writeRaw(peer.frame(ping(1)) + peer.frame(ping(2)) + peer.frame(ping(3)))
        var nonces: [UInt64] = []
        for _ in 0..<3 {
            if case .pong(let pong)? = try peer.read()?.body { nonces.append(pong.nonce) }
        }
        #expect(nonces == [1, 2, 3])
        await cluster.stop()
    }

    /// Before login the limit is 4 KiB (a login is small), after it 64 KiB.
    @Test func overLimitLengthGetsErrorFrameThenClose() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("framer")
        for loggedIn in [false, true] {
            let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
            if loggedIn { _ = try peer.login("framer", "pw-framer") }
            peer.writeRaw(loggedIn ? [0, 1, 0, 1] : [0, 0, 0x10, 0x01])
            guard case .error(let error)? = try peer.read()?.body else { Issue.record("no error frame"); return }
            #expect(error.code == .frameTooLarge)
            #expect(error.reason.contains(loggedIn ? "of 65537 bytes exceeds the limit of 65536" : "of 4097 bytes exceeds the limit of 4096"),
                    "\(error.reason)")
            #expect(peer.isClosedByServer())
        }
        try await expectServerStillServes(cluster)
        await cluster.stop()
    }

    /// A connection that logs out is a stranger again: small frames only.
    @Test func afterLogoutTheSmallLimitIsBack() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("leaver")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        _ = try peer.login("leaver", "pw-leaver")
        let loggedOut = try peer.request(7, .logout(Simp_Logout()))
        #expect(loggedOut?.body == .ok(Simp_Ok()))
        peer.writeRaw([0, 0, 0x10, 0x01])
        guard case .error(let error)? = try peer.read()?.body else { Issue.record("no error frame"); return }
        #expect(error.reason.contains("of 4097 bytes exceeds the limit of 4096"), "\(error.reason)")
        await cluster.stop()
    }

    @Test func garbageFrameGetsErrorFrameThenClose() async throws {
        let cluster = try await TestCluster.start()
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        peer.writeRaw([0, 0, 0, 6, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        guard case .error(let error)? = try peer.read()?.body else { Issue.record("no error frame"); return }
        #expect(error.code == .malformedFrame)
        #expect(peer.isClosedByServer())
        try await expectServerStillServes(cluster)
        await cluster.stop()
    }

    @Test func requestWithoutBodyOrFromTheWrongSideGetsAnErrorButTheConnectionStays() async throws {
        let cluster = try await TestCluster.start()
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        var empty = Simp_Envelope()
        empty.requestID = 5
        peer.writeRaw(peer.frame(empty))
        guard case .error(let e1)? = try peer.response(to: 5)?.body else { Issue.record("no error"); return }
        #expect(e1.code == .badRequest)
        peer.writeRaw(peer.frame(Simp_Envelope(requestID: 6, .accepted(Simp_Accepted()))))
        guard case .error(let e2)? = try peer.response(to: 6)?.body else { Issue.record("no error"); return }
        #expect(e2.code == .badRequest)
        peer.writeRaw(peer.frame(Simp_Envelope(requestID: 7, .receipt(Simp_Receipt()))))
        guard case .error(let e3)? = try peer.response(to: 7)?.body else { Issue.record("no error"); return }
        #expect(e3.code == .notConnected)
        peer.writeRaw(peer.frame(ping(8)))
        guard case .pong? = try peer.response(to: 8)?.body else { Issue.record("connection dropped"); return }
        await cluster.stop()
    }

    func expectServerStillServes(_ cluster: TestCluster) async throws {
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let id = try await alice.send(to: "bob", text: "still here")
        #expect(await bobLog.wait { $0.messages.map(\.id) == [id] })
        #expect(await aliceLog.wait { $0.delivered == [id] })
        await alice.disconnect()
        await bob.disconnect()
    }
}
