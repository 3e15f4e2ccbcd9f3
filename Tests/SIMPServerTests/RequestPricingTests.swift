import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// Issue 46, finding 4: a request is charged what it makes the server do, before it runs
/// where that is known (a query's items, a group change's users), once done where it is not
/// (presence), and names are checked before they reach a key.
@Suite struct RequestCostTests {
    @Test func aQueryIsChargedByItsItems() {
        var query = Simp_DeliveryQuery()
        #expect(RequestCost.of(Simp_Envelope(.query(query))) == RequestCost.redisRead)
        query.messages = Array(repeating: Simp_Accepted(), count: 512)
        #expect(RequestCost.of(Simp_Envelope(.query(query))) == RequestCost.redisRead + 512 * RequestCost.perQueryItem)
    }

    @Test func aGroupChangeIsChargedByTheUsersItNames() {
        var request = Simp_GroupRequest()
        request.action = .create
        request.users = (0..<999).map { "u\($0)" }
        #expect(RequestCost.of(Simp_Envelope(.groupRequest(request))) == RequestCost.groupChange + 999 * RequestCost.perGroupUser)
        request.action = .members
        #expect(RequestCost.of(Simp_Envelope(.groupRequest(request))) == RequestCost.redisRead)
    }

    @Test func aPasswordChangeCostsTwoHashes() {
        #expect(RequestCost.of(Simp_Envelope(.changePassword(Simp_ChangePassword()))) == 2 * RequestCost.passwordHash)
    }

    /// Work paid after it was done leaves a debt the next request waits for, at most a burst.
    @Test func aChargeAfterTheWorkDelaysTheNextRequest() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var gate = RequestGate(RequestGate.Settings(rate: 100, burst: 200, maxOutstanding: 2), now: start)
        let first = gate.admit(cost: 2, now: start)
        #expect(first)
        gate.charge(10_000, now: start)
        let inDebt = gate.admit(cost: 1, now: start)
        #expect(!inDebt)
        // The debt is capped at a burst: from -200, 201 units take 2.01 s at 100 a second.
        let wait = gate.rateWait(cost: 1, now: start)
        #expect(wait == .nanoseconds(2_010_000_000))
        let paid = gate.admit(cost: 1, now: start + .milliseconds(2_010))
        #expect(paid)
    }
}

@Suite(.serialized) struct RequestPricingTests {
    /// The reviewer's flood: queries of 512 items each, charged 2 units apiece before, ran
    /// unpaced (1,024 Redis commands each). Now the connection is read more slowly once their
    /// items use up its burst (`control_requests` counts each pause), and every one is still
    /// answered.
    @Test func aFloodOfLargeQueriesIsPacedByItsItems() async throws {
        // A burst of 600 units and 200 a second: the second query (514 units) finds the burst
        // spent however fast the first was answered, unless that took over 2 s.
        let cluster = try await TestCluster.start {
            $0.limits.requestBurst = 600
            $0.limits.requestsPerSecond = 200
        }
        try await cluster.register("bob")
        try await cluster.register("mallory")
        let peer = try cluster.boundRawPeer("mallory")
        var query = Simp_DeliveryQuery()
        query.messages = (0..<512).map { index in
            var item = Simp_Accepted()
            item.messageID = "m\(index)"
            item.toUser = "bob"
            item.seq = 1
            return item
        }
        let queries = 2
        for _ in 0..<queries { peer.writeRaw(peer.frame(Simp_Envelope(.query(query)))) }
        var ping = Simp_Ping()
        ping.nonce = 7
        guard case .pong? = try peer.request(99, .ping(ping))?.body else {
            Issue.record("no pong after the queries")
            return
        }
        // 2 x 514 units against a burst of 600: the connection waited for its rate.
        #expect(cluster.metric(#"simp_limit_exceeded_total{limit="control_requests"}"#) >= 1)
        await cluster.stop()
    }

    /// A query item's recipient reaches a Redis key: one that is no user or group name is
    /// refused before anything is read.
    @Test func aQueryNamingNoUserIsRefused() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let peer = try cluster.boundRawPeer("mallory")
        var item = Simp_Accepted()
        item.messageID = "1"
        item.toUser = "bob}:inbox"
        item.seq = 1
        var query = Simp_DeliveryQuery()
        query.messages = [item]
        let refused = try peer.request(5, .query(query))
        #expect(errorCode(refused) == .badRequest, "\(String(describing: refused))")
        if case .error(let error)? = refused?.body { #expect(error.reason.contains("not a user or group name")) }
        await cluster.stop()
    }
}
