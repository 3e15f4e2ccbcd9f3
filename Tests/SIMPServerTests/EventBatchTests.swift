import Foundation
import SIMPClient
import SIMPCore
import Testing

/// `ClientConfiguration.eventBatches`: the same events, in order, a loop turn's at a time, and
/// nothing in `events`.
@Suite(.serialized) struct EventBatchTests {
    @Test func aBatchedClientGetsEveryEventInOrderAndNothingOneAtATime() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        var configuration = cluster.clientConfiguration()
        configuration.eventBatches = true
        let bob = SIMPClient(configuration: configuration)
        let collected = Task {
            var texts: [String] = []
            var batches = 0
            for await batch in bob.eventBatches {
                batches += 1
                texts += batch.compactMap { if case .message(let m) = $0 { m.text } else { nil } }
            }
            return (texts, batches)
        }
        try await bob.connect(user: "bob", password: "pw-bob")
        var ids: [String] = []
        for index in 0..<50 { ids.append(try await alice.send(to: "bob", text: "m\(index)")) }
        #expect(await aliceLog.wait { Set($0.delivered).isSuperset(of: ids) })
        await bob.close()
        let (texts, batches) = await collected.value
        #expect(texts == (0..<50).map { "m\($0)" })
        #expect(batches > 0)
        var single = 0
        for await _ in bob.events { single += 1 }
        #expect(single == 0, "events stays empty")
        await alice.close()
        await cluster.stop()
    }
}
