import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// Issue 46, finding 1: a login token is bound to one device, revoking a device ends every
/// login of it, and a password change or `logout{all}` ends the user's other logins, on every
/// node. Raw peers, where the library would never send the attack.
@Suite(.serialized) struct RevocationTests {
    private func connect(_ peer: RawPeer, token: String, device: String, id: UInt64 = 2) throws -> Simp_Envelope? {
        var connect = Simp_ConnectRequest()
        connect.token = token
        connect.device = device
        return try peer.request(id, .connect(connect))
    }

    private func peer(_ cluster: TestCluster) throws -> RawPeer {
        try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
    }

    /// The reviewer's attack: a stolen phone's token, CONNECTed under another device name after
    /// the owner revoked the phone, was `connected` and got the user's messages.
    @Test func aRevokedDevicesTokenOpensNoSessionUnderAnotherName() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let phone = try peer(cluster)
        let stolen = try phone.login("alice", "pw-alice", device: "phone")
        try phone.connectAndBind(token: stolen, device: "phone")
        let (laptop, _) = try await cluster.connectedDevice("alice", "laptop")
        try await laptop.revokeDevice("phone")

        let thief = try peer(cluster)
        #expect(errorCode(try connect(thief, token: stolen, device: "phone")) == .deviceRevoked)
        let renamed = try connect(thief, token: stolen, device: "phone2", id: 3)
        #expect(errorCode(renamed) == .invalidToken, "\(String(describing: renamed))")
        if case .error(let error)? = renamed?.body {
            #expect(error.reason == "this token was issued to device phone, not phone2; log in on phone2")
        }
        #expect(await cluster.server.sessionCount() == 1, "only the laptop")
        await laptop.close()
        await cluster.stop()
    }

    /// Without any revocation, a token opens a session for its own device only; one from a
    /// login that named no device is the `default` device's.
    @Test func aTokenOpensASessionForItsOwnDeviceOnly() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let first = try peer(cluster)
        let token = try first.login("alice", "pw-alice", device: "phone")
        #expect(errorCode(try connect(try peer(cluster), token: token, device: "laptop")) == .invalidToken)
        #expect(errorCode(try connect(try peer(cluster), token: token, device: "")) == .invalidToken)
        guard case .connected(let response)? = try connect(try peer(cluster), token: token, device: "phone")?.body else {
            Issue.record("the token's own device was refused")
            return
        }
        #expect(response.device == "phone")
        let unnamed = try peer(cluster).login("alice", "pw-alice")
        guard case .connected? = try connect(try peer(cluster), token: unnamed, device: "")?.body else {
            Issue.record("a token without a device name did not open the default device")
            return
        }
        await cluster.stop()
    }

    /// Revoking a device also closes its connections that logged in but never connected, and
    /// the revocation is one key per device that expires with the token lifetime.
    @Test func revokingADeviceClosesEveryLoginOfItAndStaysBounded() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let phone = try peer(cluster)
        try phone.connectAndBind(token: try phone.login("alice", "pw-alice", device: "phone"), device: "phone")
        let idle = try peer(cluster)
        _ = try idle.login("alice", "pw-alice", device: "phone")
        let (laptop, _) = try await cluster.connectedDevice("alice", "laptop")
        try await laptop.revokeDevice("phone")
        for connection in [phone, idle] {
            let ended = try connection.read()
            #expect(errorCode(ended) == .sessionClosed, "\(String(describing: ended))")
            #expect(connection.isClosedByServer())
        }
        #expect(cluster.metric("simp_logins_ended_total") >= 2)
        let ttl = try #require(Int(try cluster.redis.command(["PTTL", "simp:{alice}:revoked:phone"]).dropFirst().prefix { $0 != "\r\n" }))
        #expect(ttl > 0 && ttl <= 24 * 3600 * 1000, "the revocation lasts no longer than a token: \(ttl)")
        #expect(try cluster.redis.command(["EXISTS", "simp:{alice}:revoked"]).hasPrefix(":0"), "no hash of every revocation")
        await laptop.close()
        await cluster.stop()
    }

    /// When a token was issued (ms since the epoch): its expiry, less the 24 h lifetime.
    private func issued(_ token: String) throws -> Int64 {
        let parts = token.split(separator: ".")
        return try #require(Int64(parts[parts.count - 3])) - 24 * 3600 * 1000
    }

    /// Waits for the wall clock to pass `millis`, so the next token is issued after it.
    private func waitPast(_ millis: Int64) async throws {
        while Moment.read().millis <= millis { try await Task.sleep(for: .milliseconds(1)) }
    }

    /// Sends `text` over the admin channel as a node announces it, and returns once this node
    /// has handled it: a request sent after it on the same channel (the earlier form of
    /// `end-device`, which ends every login of the device) has closed a tablet's login.
    private func announce(_ text: String, to cluster: TestCluster) throws {
        let tablet = try peer(cluster)
        _ = try tablet.login("alice", "pw-alice", device: "tablet")
        for request in [text, "end-device alice tablet laptop"] {
            #expect(try cluster.redis.command(["SPUBLISH", "simp:admin", request]).hasPrefix(":1"), "no node heard \(request)")
        }
        let ended = try tablet.read()
        #expect(errorCode(ended) == .sessionClosed, "\(String(describing: ended))")
    }

    /// Race (b): the revoking node's own announcement (or another node's) arrives after the
    /// device logged in again with a new token; that login outlives it.
    @Test func aLoginMadeAfterARevocationOutlivesItsLateAnnouncement() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let phone = try peer(cluster)
        try phone.connectAndBind(token: try phone.login("alice", "pw-alice", device: "phone"), device: "phone")
        let (laptop, _) = try await cluster.connectedDevice("alice", "laptop")
        try await laptop.revokeDevice("phone")
        #expect(errorCode(try phone.read()) == .sessionClosed)
        let stored = try cluster.redis.command(["GET", "simp:{alice}:revoked:phone"]).split(separator: "\r\n")
        let revokedAt = try #require(stored.count > 1 ? Int64(stored[1]) : nil, "\(stored)")

        try await waitPast(revokedAt)
        let again = try peer(cluster)
        let token = try again.login("alice", "pw-alice", device: "phone")
        #expect(try issued(token) > revokedAt)
        try again.connectAndBind(token: token, device: "phone")
        try announce("end-device alice phone laptop \(revokedAt)", to: cluster)
        guard case .pong? = try again.request(9, .ping(Simp_Ping()))?.body else {
            Issue.record("the login made after the revocation was closed by its announcement")
            return
        }
        #expect(await cluster.server.sessionCount() == 2, "the laptop and the phone's new session")
        await laptop.close()
        await cluster.stop()
    }

    /// One announcement closes the device's logins whose token was issued at or before the
    /// revocation, and no other.
    @Test func anAnnouncementClosesOnlyLoginsWithTokensFromBeforeIt() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let old = try peer(cluster)
        let revokedAt = try issued(try old.login("alice", "pw-alice", device: "phone"))
        try await waitPast(revokedAt)
        let new = try peer(cluster)
        try new.connectAndBind(token: try new.login("alice", "pw-alice", device: "phone"), device: "phone")

        try announce("end-device alice phone laptop \(revokedAt)", to: cluster)
        let ended = try old.read()
        #expect(errorCode(ended) == .sessionClosed, "\(String(describing: ended))")
        if case .error(let error)? = ended?.body { #expect(error.reason == "this device was revoked from alice's device laptop") }
        #expect(old.isClosedByServer())
        guard case .pong? = try new.request(9, .ping(Simp_Ping()))?.body else {
            Issue.record("a login with a token issued after the revocation was closed")
            return
        }
        await cluster.stop()
    }

    /// Race (a): a CONNECT whose registration the store took before the revocation was written
    /// joins this node's logins only after the revocation's closes ran. Here the node hears the
    /// revocation while Redis holds none (as when the CONNECT's check ran first): the CONNECT
    /// is refused all the same, and a new login connects.
    @Test func aConnectThatPassedItsCheckBeforeARevocationIsRefusedWhenItJoins() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let thief = try peer(cluster)
        let stolen = try thief.login("alice", "pw-alice", device: "phone")
        let revokedAt = try issued(stolen)
        try announce("end-device alice phone laptop \(revokedAt)", to: cluster)
        #expect(errorCode(try thief.read()) == .sessionClosed, "the login itself closed")

        let late = try peer(cluster)
        let refused = try connect(late, token: stolen, device: "phone")
        #expect(errorCode(refused) == .deviceRevoked, "\(String(describing: refused))")
        #expect(try cluster.redis.command(["EXISTS", "simp:{alice}:revoked:phone"]).hasPrefix(":0"), "refused by the node, not Redis")
        #expect(await cluster.server.sessionCount() == 0)

        try await waitPast(revokedAt)
        let owner = try peer(cluster)
        try owner.connectAndBind(token: try owner.login("alice", "pw-alice", device: "phone"), device: "phone")
        #expect(await cluster.server.sessionCount() == 1)
        await cluster.stop()
    }

    /// `changePassword`: the caller gets a new token and keeps its session; every other
    /// connection of the user closes with SESSION_CLOSED, and every earlier token is refused.
    @Test func aPasswordChangeEndsEveryOtherLogin() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        try await cluster.register("bob")
        let phone = try peer(cluster)
        let phoneToken = try phone.login("alice", "pw-alice", device: "phone")
        try phone.connectAndBind(token: phoneToken, device: "phone")
        let (laptop, laptopLog) = try await cluster.connectedDevice("alice", "laptop")
        let oldLaptopToken = try #require(await laptop.loginToken())

        try await laptop.changePassword(from: "pw-alice", to: "new-secret")
        let ended = try phone.read()
        #expect(errorCode(ended) == .sessionClosed)
        if case .error(let error)? = ended?.body {
            #expect(error.reason == "the password was changed on another connection; log in with the new one")
        }
        #expect(phone.isClosedByServer())
        for token in [phoneToken, oldLaptopToken.value] {
            let refused = try connect(try peer(cluster), token: token, device: token == phoneToken ? "phone" : "laptop")
            #expect(errorCode(refused) == .invalidToken, "\(String(describing: refused))")
        }
        let newToken = try #require(await laptop.loginToken())
        #expect(newToken.value != oldLaptopToken.value)
        #expect(throws: TestSupportError.self) { try peer(cluster).login("alice", "pw-alice") }
        _ = try peer(cluster).login("alice", "new-secret")
        // The laptop goes on: its session was not ended.
        let (bob, bobLog) = try await cluster.connectedClient("bob", register: false)
        let id = try await laptop.send(to: "bob", text: "still here")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == id } })
        #expect(!laptopLog.all.contains { if case .ended = $0 { true } else { false } })
        for client in [laptop, bob] { await client.close() }
        await cluster.stop()
    }

    /// A wrong old password changes nothing and counts as a failed login.
    @Test func aPasswordChangeNeedsTheOldPassword() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let (laptop, _) = try await cluster.connectedDevice("alice", "laptop")
        do {
            try await laptop.changePassword(from: "wrong", to: "new-secret")
            Issue.record("changed with a wrong old password")
        } catch {
            #expect(error.code == .invalidCredentials)
        }
        #expect(cluster.metric("simp_logins_failed_total") == 1)
        _ = try peer(cluster).login("alice", "pw-alice")
        await laptop.close()
        await cluster.stop()
    }

    /// `logout{all}` on one node closes the user's connections on the other node too, and no
    /// token issued before it opens a session.
    @Test func logoutAllEndsEveryLoginOnEveryNode() async throws {
        let deployment = try Deployment(nodes: 2)
        defer { deployment.stop() }
        let (one, two) = (deployment.servers[0], deployment.servers[1])
        let register = try RawPeer(tcpPort: one.tcpPort, udpPort: one.udpPort)
        guard case .ok? = try register.request(1, .register(.with { $0.user = "alice"; $0.password = "pw-alice" }))?.body else {
            Issue.record("register refused")
            return
        }
        let phone = try RawPeer(tcpPort: two.tcpPort, udpPort: two.udpPort)
        let phoneToken = try phone.login("alice", "pw-alice", device: "phone")
        try phone.connectAndBind(token: phoneToken, device: "phone")
        let idle = try RawPeer(tcpPort: two.tcpPort, udpPort: two.udpPort)
        _ = try idle.login("alice", "pw-alice", device: "tablet")
        let laptop = try RawPeer(tcpPort: one.tcpPort, udpPort: one.udpPort)
        try laptop.connectAndBind(token: try laptop.login("alice", "pw-alice", device: "laptop"), device: "laptop")

        guard case .ok? = try laptop.request(7, .logout(.with { $0.all = true }))?.body else {
            Issue.record("logout all refused")
            return
        }
        for connection in [phone, idle] {
            let ended = try connection.read()
            #expect(errorCode(ended) == .sessionClosed, "\(String(describing: ended))")
            if case .error(let error)? = ended?.body {
                #expect(error.reason == "every login of this user was ended from another connection; log in again")
            }
        }
        let again = try RawPeer(tcpPort: two.tcpPort, udpPort: two.udpPort)
        #expect(errorCode(try connect(again, token: phoneToken, device: "phone")) == .invalidToken)
        _ = try again.login("alice", "pw-alice", device: "phone")
    }
}
