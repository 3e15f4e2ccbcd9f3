import MQTTLoad
import NIOCore
import NIOPosix
import Testing

@Suite struct FanOutCountTests {
    let count = FanOutCount(loop: MultiThreadedEventLoopGroup.singleton.next())
    /// A window that holds every message of the test.
    let clock = LoadClock(warmup: 0, duration: 3600, drain: 0)

    @Test func aReceiverCountsDistinctMessagesAndWhatItLacksAtTheDeadline() async throws {
        try await count.start(clock).get()
        try await receive([1, 2, 2, 3])
        let part = try await count.settled(expecting: 5, until: 0).get()
        #expect(part.deliveries == 3 && part.deliveriesInWindow == 3)
        #expect(part.duplicates == 1)
        #expect(part.lost == 2)
        #expect(part.sendToReceive.totalCount == 3)
    }

    @Test func aReceiverSettlesOnceItHasEverythingSent() async throws {
        try await count.start(clock).get()
        try await receive([1])
        let settled = count.settled(expecting: 2, until: .max)
        try await receive([2])
        let part = try await settled.get()
        #expect(part.deliveries == 2 && part.lost == 0)
        // Settled: later messages no longer count.
        try await receive([3])
        #expect(try await count.settled(expecting: 2, until: 0).get().deliveries == 2)
    }

    @Test func aFailedReceiverSettlesAtOnceWithItsFailure() async throws {
        try await count.start(clock).get()
        let settled = count.settled(expecting: 10, until: .max)
        try await count.loop.submit { count.fail("subscriber: gone") }.get()
        let part = try await settled.get()
        #expect(part.failed == 1 && part.failures == ["subscriber: gone"])
        #expect(part.lost == 10)
    }

    private func receive(_ counters: [UInt64]) async throws {
        try await count.loop.submit { [count] in
            for counter in counters { count.receive(counter: counter, sentAt: LoadClock.now()) }
        }.get()
    }
}
