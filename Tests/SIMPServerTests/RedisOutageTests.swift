import Foundation
import SIMPClient
import Testing

@Suite(.serialized) struct RedisOutageTests {
    /// Redis stops mid-stream and comes back. Every message ends accepted-and-delivered or
    /// failed (store_unavailable) - none is lost, none hangs, none arrives twice.
    @Test func noAcceptedMessageIsLostAcrossARedisRestart() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        var sent: [String] = []
        for i in 0..<120 {
            if i == 40 { cluster.redis.stop() }
            if i == 80 { try cluster.redis.start() }
            sent.append(try await alice.send(to: "bob", text: "r-\(i)"))
            try await Task.sleep(for: .milliseconds(10))
        }
        let settled = await aliceLog.wait(timeout: .seconds(60)) { log in
            Set(log.delivered).union(log.failed.map(\.id)).isSuperset(of: sent)
        }
        #expect(settled, "every message has a final fate")
        // Nothing more can reach bob: a duplicate would have been shown by then.
        #expect(await cluster.settled("bob"))

        let accepted = Set(aliceLog.accepted)
        let failed = aliceLog.failed
        let received = bobLog.messages.map(\.id)
        #expect(!failed.isEmpty, "sends while Redis was down are refused, not silently queued")
        #expect(failed.allSatisfy { $0.reason.hasPrefix("message store unavailable") })
        #expect(accepted.count > 40)
        #expect(accepted.isSubset(of: Set(received)), "no accepted message is lost")
        #expect(Set(aliceLog.delivered) == accepted)
        #expect(received.count == Set(received).count, "no duplicates")
        #expect(Set(failed.map(\.id)).isDisjoint(with: accepted))
        let seqs = bobLog.messages.map(\.seq)
        #expect(seqs == seqs.sorted())
        await alice.disconnect()
        await bob.disconnect()
        await cluster.stop()
    }

    @Test func loginWhileRedisIsDownIsAClearErrorNotAHang() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("dave")
        cluster.redis.stop()
        var patient = cluster.clientConfiguration()
        // Only the server's answer can end the wait: a hang would show as this timeout's error.
        patient.requestTimeout = .seconds(3600)
        let client = SIMPClient(configuration: patient)
        do {
            try await client.connect(user: "dave", password: "pw-dave")
            Issue.record("connected without Redis")
        } catch {
            #expect(error.code == .storeUnavailable)
            #expect(error.message.contains("message store unavailable"))
        }
        await client.disconnect()
        await cluster.stop()
    }
}
