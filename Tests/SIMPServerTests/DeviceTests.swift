import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import Testing

/// Several devices of one user (docs/PROTOCOL.md, Devices): each gets every message to its
/// user once and in order with its own confirmed mark; what one sends shows on the others;
/// the sender hears `delivered` once, on every device.
@Suite(.serialized) struct DeviceTests {
    func device(_ cluster: TestCluster, _ user: String, _ name: String) async throws -> (SIMPClient, EventLog) {
        try await cluster.connectedDevice(user, name)
    }

    /// bob's phone and laptop, and alice on her desk, registered and connected.
    func bobOnTwoDevicesAndAlice(_ cluster: TestCluster) async throws
        -> ((SIMPClient, EventLog), (SIMPClient, EventLog), (SIMPClient, EventLog)) {
        try await cluster.register("alice")
        try await cluster.register("bob")
        return (try await device(cluster, "bob", "phone"), try await device(cluster, "bob", "laptop"),
                try await device(cluster, "alice", "desk"))
    }

    @Test func twoDevicesGetEverythingOnceInOrderAndSeeEachOthersSends() async throws {
        let cluster = try await TestCluster.start()
        let ((phone, phoneLog), (laptop, laptopLog), (alice, aliceLog)) = try await bobOnTwoDevicesAndAlice(cluster)

        async let toBob = sendAll(alice, to: "bob", prefix: "a", count: 200)
        async let fromPhone = sendAll(phone, to: "alice", prefix: "p", count: 100)
        async let fromLaptop = sendAll(laptop, to: "alice", prefix: "l", count: 100)
        let (sentToBob, sentFromPhone, sentFromLaptop) = try await (toBob, fromPhone, fromLaptop)

        #expect(await aliceLog.wait { Set($0.delivered).isSuperset(of: sentToBob) && $0.messages.count >= 200 })
        #expect(await phoneLog.wait { $0.messages.count >= 300 && Set($0.delivered).isSuperset(of: sentFromPhone + sentFromLaptop) })
        #expect(await laptopLog.wait { $0.messages.count >= 300 && Set($0.delivered).isSuperset(of: sentFromPhone + sentFromLaptop) })
        for log in [phoneLog, laptopLog] {
            expectExactlyOnceInOrder(received: log.messages, sentIDs: sentToBob, from: "alice", prefix: "a")
        }
        expectExactlyOnceInOrder(received: aliceLog.messages, sentIDs: sentFromPhone, from: "bob", prefix: "p")
        expectExactlyOnceInOrder(received: aliceLog.messages, sentIDs: sentFromLaptop, from: "bob", prefix: "l")
        // Each device shows what the other sent, addressed to alice, and not its own again.
        #expect(phoneLog.messages.filter { $0.from == "bob" }.map(\.id) == sentFromLaptop)
        #expect(laptopLog.messages.filter { $0.from == "bob" }.map(\.id) == sentFromPhone)
        #expect(phoneLog.messages.filter { $0.from == "bob" }.allSatisfy { $0.to == "alice" && $0.fromDevice == "laptop" })
        // Delivered once per message, when the first of bob's devices confirmed it.
        #expect(Dictionary(grouping: aliceLog.delivered, by: { $0 }).values.allSatisfy { $0.count == 1 })
        #expect(aliceLog.delivered.count == 200)
        // The receipt of what one device sent reaches the other, once.
        for log in [phoneLog, laptopLog] {
            #expect(log.delivered.count == 200 && Set(log.delivered).count == 200)
        }
        for client in [phone, laptop, alice] { await client.close() }
        await cluster.stop()
    }

    @Test func aDeviceOfflineDuringABurstCatchesUpAlone() async throws {
        let cluster = try await TestCluster.start()
        let ((phone, phoneLog), (laptop, laptopLog), (alice, aliceLog)) = try await bobOnTwoDevicesAndAlice(cluster)
        let before = try await sendAll(alice, to: "bob", prefix: "before", count: 20)
        #expect(await laptopLog.wait { $0.messages.count >= 20 })
        await laptop.close()

        let burst = try await sendAll(alice, to: "bob", prefix: "burst", count: 100)
        #expect(await aliceLog.wait { Set($0.delivered).isSuperset(of: before + burst) }, "the phone confirmed them")
        #expect(await phoneLog.wait { $0.messages.count >= 120 })

        // A new client of the same device: no local state, the server's mark for the laptop.
        let (again, againLog) = try await device(cluster, "bob", "laptop")
        #expect(await againLog.wait { $0.messages.count >= 100 })
        expectExactlyOnceInOrder(received: againLog.messages, sentIDs: burst, from: "alice", prefix: "burst")
        #expect(againLog.messages.count == 100, "only what the laptop had not confirmed")
        #expect(phoneLog.messages.count == 120)
        for client in [phone, again, alice] { await client.close() }
        await cluster.stop()
    }

    /// Two devices do not replace each other: both stay connected with no reconnect through
    /// thirty heartbeats each (counted by the server, not waited for by the clock).
    @Test func twoDevicesStayConnected() async throws {
        let cluster = try await TestCluster.start(heartbeat: .milliseconds(300))
        try await cluster.register("bob")
        let (phone, phoneLog) = try await device(cluster, "bob", "phone")
        let (laptop, laptopLog) = try await device(cluster, "bob", "laptop")
        let start = cluster.metric("simp_keepalives_received_total")
        #expect(await waitFor(timeout: .seconds(60)) { cluster.metric("simp_keepalives_received_total") >= start + 60 })
        for log in [phoneLog, laptopLog] {
            #expect(log.all.filter { if case .connected = $0 { true } else { false } }.count == 1, "\(log.all)")
            #expect(!log.all.contains { if case .disconnected = $0 { true } else if case .reconnecting = $0 { true } else { false } })
        }
        #expect(cluster.metric("simp_sessions") == 2)
        for client in [phone, laptop] { await client.close() }
        await cluster.stop()
    }

    /// The same device name twice: the newer client replaces the older, which ends (it does not
    /// reconnect and take the session back).
    @Test func aSecondClientOfTheSameDeviceReplacesTheFirst() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let (first, firstLog) = try await device(cluster, "bob", "phone")
        let (second, secondLog) = try await device(cluster, "bob", "phone")
        #expect(await firstLog.wait { $0.all.contains(.ended(reason: "a newer session of bob's device phone connected")) }, "\(firstLog.all)")
        #expect(!firstLog.all.contains { if case .reconnecting = $0 { true } else { false } })
        // Its events arrive on their own stream: waited for, not read at once.
        #expect(await secondLog.wait { $0.all.filter { if case .connected = $0 { true } else { false } }.count == 1 }, "\(secondLog.all)")
        #expect(!secondLog.all.contains { if case .ended = $0 { true } else { false } })
        for client in [first, second] { await client.close() }
        await cluster.stop()
    }

    /// `--max-devices-per-user`: a new device beyond it is refused with TOO_MANY_DEVICES; a
    /// revoked device's session ends, its token opens nothing for it, and its place is free.
    @Test func devicesAreLimitedAndRevoked() async throws {
        let cluster = try await TestCluster.start { $0.maxDevicesPerUser = 2 }
        try await cluster.register("bob")
        let (phone, _) = try await device(cluster, "bob", "phone")
        let (laptop, laptopLog) = try await device(cluster, "bob", "laptop")
        let laptopToken = try #require(await laptop.loginToken())
        do {
            _ = try await device(cluster, "bob", "tablet")
            Issue.record("a third device was let in")
        } catch let error as ClientError {
            #expect(error.code == .tooManyDevices)
            #expect(error.message.contains("bob has 2 devices"), "\(error.message)")
        }
        let listed = try await phone.devices()
        #expect(listed.map(\.name) == ["laptop", "phone"])
        #expect(listed.map(\.online) == [true, true])
        #expect(listed.map(\.current) == [false, true])

        try await phone.revokeDevice("laptop")
        #expect(await laptopLog.wait { $0.all.contains(.ended(reason: "this device was revoked from bob's device phone")) }, "\(laptopLog.all)")
        var config = cluster.clientConfiguration()
        config.device = "laptop"
        do {
            try await SIMPClient(configuration: config).connect(user: "bob", token: laptopToken)
            Issue.record("the revoked device's token still opens a session for it")
        } catch {
            #expect(error.code == .deviceRevoked, "\(error.message)")
        }
        await #expect(throws: ClientError.self) { try await phone.revokeDevice("laptop") }
        let (tablet, _) = try await device(cluster, "bob", "tablet")
        #expect(try await phone.devices().map(\.name) == ["phone", "tablet"])
        for client in [phone, laptop, tablet] { await client.close() }
        await cluster.stop()
    }
}
