import Foundation
import NIOPosix
import SIMPClient
import SIMPCore
import Testing

/// How async consumers take events: `ClientConfiguration.eventBatches` (the same events, in
/// order, a loop turn's at a time, and nothing in `events`), and a task on the client's loop
/// (`SIMPClient.taskExecutor`).
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

    /// A task started with the client's `taskExecutor` runs on an event loop thread (the
    /// client's), not on Swift's pool, and can await events and send from there as any task.
    @Test func aTaskOnTheClientsLoopReadsEventsAndSendsFromThere() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let bob = SIMPClient(configuration: cluster.clientConfiguration())
        let onPool = Task { MultiThreadedEventLoopGroup.currentEventLoop != nil }
        #expect(await onPool.value == false, "a plain task runs on Swift's pool")
        let replying = Task(executorPreference: bob.taskExecutor) {
            var onLoop: [Bool] = []
            for await event in bob.events {
                guard case .message(let message) = event else { continue }
                onLoop.append(MultiThreadedEventLoopGroup.currentEventLoop != nil)
                _ = try await bob.send(to: "alice", text: "re:" + message.text)
                if onLoop.count == 10 { break }
            }
            return onLoop
        }
        try await bob.connect(user: "bob", password: "pw-bob")
        for index in 0..<10 { _ = try await alice.send(to: "bob", text: "m\(index)") }
        #expect(try await replying.value == Array(repeating: true, count: 10))
        #expect(await aliceLog.wait { $0.messages.count == 10 })
        #expect(aliceLog.messages.map(\.text) == (0..<10).map { "re:m\($0)" })
        await alice.close()
        await bob.close()
        await cluster.stop()
    }
}
