import Foundation
import SIMPClient
import SIMPTestSupport
import Testing

/// A node learns of a message stored for one of its users on another node through a pub/sub
/// notice, which Redis does not keep for a subscriber that is away. When its subscription
/// comes back, the node reads its sessions' inboxes, so a message whose notice was lost is
/// pushed then, not at the recipient's next message or reconnect.
@Suite(.serialized) struct NoticeLossTests {
    @Test func aNoticeLostWhileResubscribingIsMadeUpForOnceSubscribedAgain() async throws {
        let deployment = try Deployment(nodes: 2)
        defer { deployment.stop() }
        let alice = try await deployment.connect("nl-alice", startingAt: 0)
        let bob = try await deployment.connect("nl-bob", startingAt: 1)
        try await deployment.waitForPresence(of: [alice.name, bob.name])
        let warm = try await alice.client.send(to: bob.name, text: "before")
        #expect(await bob.log.wait { $0.messages.map(\.id) == [warm] })

        // Every subscription is cut; node-2 subscribes again after 100 ms, and the notice for
        // the message sent meanwhile goes to nobody.
        let channel = "simp:to-node:node-2"
        _ = try deployment.redis.command(["CLIENT", "KILL", "TYPE", "pubsub"])
        let id = try await alice.client.send(to: bob.name, text: "while node-2 was away")
        #expect(await alice.log.wait { $0.accepted.contains(id) })
        #expect(await eventually { try deployment.redis.command(["PUBSUB", "SHARDNUMSUB", channel]).contains(":1") },
                "node-2 subscribed again")
        #expect(await bob.log.wait { $0.messages.map(\.id) == [warm, id] })
        #expect(await alice.log.wait { $0.delivered.contains(id) })
        await alice.client.close()
        await bob.client.close()
    }
}
