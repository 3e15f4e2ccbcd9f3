import SIMPChaos
import SIMPCore
import Testing

@Suite struct StorePipelineTests {
    @Test func batchesLeaveInArrivalOrderUpToTheInFlightLimit() {
        var pipeline = StorePipeline<Int, Int>(maxBatch: 3, maxInFlight: 2, place: { UInt64($0) }, lane: { _ in 0 })
        for i in 1...8 { pipeline.enqueue(i) }
        let first = pipeline.nextBatch()
        let second = pipeline.nextBatch()
        #expect(first?.items == [1, 2, 3])
        #expect(second?.items == [4, 5, 6])
        #expect(pipeline.nextBatch() == nil, "two batches in flight already")
        #expect(pipeline.completed(first!.ticket, retry: []) == .proceed)
        let third = pipeline.nextBatch()
        #expect(third?.items == [7, 8])
        #expect(pipeline.nextBatch() == nil)
        #expect(pipeline.completed(second!.ticket, retry: []) == .proceed)
        #expect(pipeline.completed(third!.ticket, retry: []) == .proceed)
        #expect(pipeline.isIdle)
    }

    /// The connection broke with three batches in flight: all come back unknown, in order.
    /// Nothing leaves until the last is back; after the pause they go first, in their order,
    /// ahead of what arrived meanwhile.
    @Test func unknownOutcomesGoAgainFirstInOriginalOrder() {
        var pipeline = StorePipeline<Int, Int>(maxBatch: 2, maxInFlight: 3, place: { UInt64($0) }, lane: { _ in 0 })
        for i in 1...6 { pipeline.enqueue(i) }
        let tickets = (0..<3).map { _ in pipeline.nextBatch()!.ticket }
        pipeline.enqueue(7)
        #expect(pipeline.completed(tickets[0], retry: [1, 2]) == .waitForInFlight)
        #expect(pipeline.nextBatch() == nil, "paused while batches are in flight")
        #expect(pipeline.completed(tickets[1], retry: [3]) == .waitForInFlight)
        pipeline.enqueue(8)
        #expect(pipeline.completed(tickets[2], retry: [5, 6]) == .pause)
        #expect(pipeline.nextBatch() == nil, "paused until resume")
        pipeline.resume()
        var sent: [Int] = []
        while let batch = pipeline.nextBatch() {
            sent += batch.items
            _ = pipeline.completed(batch.ticket, retry: [])
        }
        #expect(sent == [1, 2, 3, 5, 6, 7, 8], "4 settled; the rest in order, the retried first")
        #expect(pipeline.isIdle)
    }

    /// Messages held for their shard's replicas come back ahead of what was queued while they
    /// were away (chaos seed 7: a later message of the same conversation queued behind a
    /// paused pipeline left before the released earlier ones).
    @Test func itemsBackFromAHoldGoAheadOfTheQueue() {
        var pipeline = StorePipeline<Int, Int>(maxBatch: 8, maxInFlight: 1, place: { UInt64($0) }, lane: { _ in 0 })
        pipeline.enqueue(1)
        let first = pipeline.nextBatch()!
        pipeline.enqueue(23)
        #expect(pipeline.nextBatch() == nil, "one batch in flight already")
        #expect(pipeline.completed(first.ticket, retry: []) == .proceed)
        pipeline.enqueueFirst([13, 20])
        #expect(pipeline.nextBatch()?.items == [13, 20, 23])
    }

    /// Chaos seed 7 again: the later message's batch timed out (an unknown outcome) while the
    /// earlier ones came back from their hold. Both go first, the earlier one first.
    @Test func itemsBackFromAHoldAndUnknownOutcomesLeaveByPlace() {
        var pipeline = StorePipeline<Int, Int>(maxBatch: 8, maxInFlight: 2, place: { UInt64($0) }, lane: { _ in 0 })
        pipeline.enqueue(23)
        let later = pipeline.nextBatch()!
        pipeline.enqueue(30)
        #expect(pipeline.completed(later.ticket, retry: [23]) == .pause)
        pipeline.enqueueFirst([20, 13])
        #expect(pipeline.nextBatch() == nil, "paused")
        pipeline.resume()
        #expect(pipeline.nextBatch()?.items == [13, 20, 23, 30])
    }

    /// A broken connection may report its batches' failures out of order: NIO fails a write
    /// still in its buffer (the later batch) before the requests already sent (the earlier
    /// one). The unknown ones must still go again in the order they first left.
    @Test func unknownOutcomesReportedOutOfOrderGoAgainInTheOrderTheyLeft() {
        var pipeline = StorePipeline<Int, Int>(maxBatch: 2, maxInFlight: 2, place: { UInt64($0) }, lane: { _ in 0 })
        for i in 1...4 { pipeline.enqueue(i) }
        let first = pipeline.nextBatch()!
        let second = pipeline.nextBatch()!
        pipeline.enqueue(5)
        #expect(pipeline.completed(second.ticket, retry: [3, 4]) == .waitForInFlight, "the later batch's failure first")
        #expect(pipeline.completed(first.ticket, retry: [1, 2]) == .pause)
        pipeline.resume()
        var sent: [Int] = []
        while let batch = pipeline.nextBatch() {
            sent += batch.items
            _ = pipeline.completed(batch.ticket, retry: [])
        }
        #expect(sent == [1, 2, 3, 4, 5])
    }

    /// One sender queued a thousand; another's message, queued after them, leaves in the next
    /// batch, each sender's messages still in their order.
    @Test func sendersTakeTurnsInABatch() {
        var pipeline = StorePipeline<String, Character>(maxBatch: 4, maxInFlight: 1, place: { _ in 0 }, lane: { $0.first! })
        for i in 0..<1_000 { pipeline.enqueue("m\(i)") }
        let first = pipeline.nextBatch()!
        #expect(first.items == ["m0", "m1", "m2", "m3"], "alone, a sender fills the batch")
        pipeline.enqueue("a0")
        pipeline.enqueue("a1")
        pipeline.enqueue("b0")
        #expect(pipeline.nextBatch() == nil, "one batch in flight already")
        #expect(pipeline.completed(first.ticket, retry: []) == .proceed)
        #expect(pipeline.nextBatch()?.items == ["m4", "a0", "b0", "m5"])
        #expect(pipeline.queuedCount == 994 + 1)
    }

    /// Back from a hold, messages go ahead of every lane; the lanes then take turns.
    @Test func itemsBackFromAHoldGoAheadOfEveryLane() {
        var pipeline = StorePipeline<Int, Int>(maxBatch: 5, maxInFlight: 1, place: { UInt64($0) }, lane: { $0 / 100 })
        for i in [100, 101, 102, 200] { pipeline.enqueue(i) }
        pipeline.enqueueFirst([150, 3])
        #expect(pipeline.nextBatch()?.items == [3, 150, 100, 200, 101])
    }

    /// Randomized, modelled on a connection that breaks now and then (a batch comes back with
    /// its tail unknown, or the connection breaks under every batch in flight, which then come
    /// back all unknown and in any order), with one to three senders: every item settles exactly
    /// once, and each sender's in its arrival order.
    @Test func everyItemSettlesOnceAndRetriesAreNeverOvertaken() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<300 {
            let senders = Int(rng.next() % 3) + 1
            var pipeline = StorePipeline<Int, Int>(maxBatch: Int(rng.next() % 4) + 1, maxInFlight: Int(rng.next() % 3) + 1,
                                                   place: { UInt64($0) }, lane: { $0 % senders })
            var next = 0
            var inFlight: [StorePipeline<Int, Int>.Batch] = []
            var settled: [Int] = []
            var broken = false
            /// One batch back: the oldest while the connection works, any once it broke.
            func complete() {
                let batch = inFlight.remove(at: broken ? Int(rng.next() % UInt64(inFlight.count)) : 0)
                let cut = broken ? 0 : Int(rng.next() % UInt64(batch.items.count + 1))
                settled += batch.items.prefix(cut)
                broken = broken || cut < batch.items.count
                if pipeline.completed(batch.ticket, retry: Array(batch.items.dropFirst(cut))) == .pause {
                    pipeline.resume()
                    broken = false
                }
            }
            for _ in 0..<200 {
                switch rng.next() % 4 {
                case 0:
                    pipeline.enqueue(next)
                    next += 1
                case 1:
                    if let batch = pipeline.nextBatch() { inFlight.append(batch) }
                case 2:
                    broken = broken || (!inFlight.isEmpty && rng.next() % 4 == 0)
                default:
                    if !inFlight.isEmpty { complete() }
                }
            }
            while !pipeline.isIdle {
                if let batch = pipeline.nextBatch() { inFlight.append(batch) }
                guard !inFlight.isEmpty else { pipeline.resume(); continue }
                let batch = inFlight.remove(at: broken ? Int(rng.next() % UInt64(inFlight.count)) : 0)
                if !broken { settled += batch.items }
                if pipeline.completed(batch.ticket, retry: broken ? batch.items : []) == .pause {
                    pipeline.resume()
                    broken = false
                }
            }
            #expect(settled.sorted() == Array(0..<next))
            for sender in 0..<senders {
                let own = settled.filter { $0 % senders == sender }
                #expect(own == own.sorted(), "an unknown outcome goes again before anything after it from its sender")
            }
        }
    }
}
