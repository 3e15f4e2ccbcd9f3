import Foundation
import SIMPClient
import SIMPCore
import Testing

/// Writing to names one after another no longer lists the users at message rate (issue 46,
/// finding 8): past `--new-recipients-per-hour` new recipients, a message is refused
/// RATE_LIMITED whether the name exists or not; recipients written to before still get
/// everything. Against a real server and Redis.
@Suite(.serialized) struct UnknownRecipientTests {
    @Test func newRecipientsArePacedAlikeWhetherTheyExistOrNot() async throws {
        let cluster = try await TestCluster.start { $0.limits.newRecipientsPerHour = 3 }
        for user in ["bob", "carol", "dave"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let toBob = try alice.post(to: "bob", text: "1")
        let toCarol = try alice.post(to: "carol", text: "2")
        let toGhost = try alice.post(to: "ghost", text: "3")
        #expect(await aliceLog.wait { $0.accepted.count == 2 && $0.failed.count == 1 })
        #expect(Set(aliceLog.accepted) == [toBob, toCarol] && aliceLog.failed.first?.id == toGhost)

        let toDave = try alice.post(to: "dave", text: "4")
        let toGhost2 = try alice.post(to: "ghost2", text: "5")
        #expect(await aliceLog.wait { $0.failed.count == 3 })
        let refused = aliceLog.failed.filter { [toDave, toGhost2].contains($0.id) }
        #expect(refused.count == 2 && Set(refused.map(\.reason)).count == 1, "one answer for a user and a name nobody has: \(refused)")
        #expect(refused.first?.reason.contains("wait before writing to someone new") == true)
        #expect(cluster.metric(#"simp_limit_exceeded_total{limit="new_recipients"}"#) == 2)

        let again = try alice.post(to: "bob", text: "6")
        #expect(await aliceLog.wait { $0.accepted.contains(again) }, "bob was written to before")
        await alice.close()
        await cluster.stop()
    }
}
