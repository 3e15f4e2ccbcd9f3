import SIMPCore
import Testing

@Suite struct StorePipelineTests {
    @Test func batchesLeaveInArrivalOrderUpToTheInFlightLimit() {
        var pipeline = StorePipeline<Int>(maxBatch: 3, maxInFlight: 2)
        for i in 1...8 { pipeline.enqueue(i) }
        #expect(pipeline.nextBatch() == [1, 2, 3])
        #expect(pipeline.nextBatch() == [4, 5, 6])
        #expect(pipeline.nextBatch() == nil, "two batches in flight already")
        #expect(pipeline.completed(retry: []) == .proceed)
        #expect(pipeline.nextBatch() == [7, 8])
        #expect(pipeline.nextBatch() == nil)
        #expect(pipeline.completed(retry: []) == .proceed)
        #expect(pipeline.completed(retry: []) == .proceed)
        #expect(pipeline.isIdle)
    }

    /// The connection broke with three batches in flight: all come back unknown, in order.
    /// Nothing leaves until the last is back; after the pause they go first, in their order,
    /// ahead of what arrived meanwhile.
    @Test func unknownOutcomesGoAgainFirstInOriginalOrder() {
        var pipeline = StorePipeline<Int>(maxBatch: 2, maxInFlight: 3)
        for i in 1...6 { pipeline.enqueue(i) }
        _ = pipeline.nextBatch(); _ = pipeline.nextBatch(); _ = pipeline.nextBatch()
        pipeline.enqueue(7)
        #expect(pipeline.completed(retry: [1, 2]) == .waitForInFlight)
        #expect(pipeline.nextBatch() == nil, "paused while batches are in flight")
        #expect(pipeline.completed(retry: [3]) == .waitForInFlight)
        pipeline.enqueue(8)
        #expect(pipeline.completed(retry: [5, 6]) == .pause)
        #expect(pipeline.nextBatch() == nil, "paused until resume")
        pipeline.resume()
        var sent: [Int] = []
        while let batch = pipeline.nextBatch() {
            sent += batch
            _ = pipeline.completed(retry: [])
        }
        #expect(sent == [1, 2, 3, 5, 6, 7, 8], "4 settled; the rest in order, the retried first")
        #expect(pipeline.isIdle)
    }

    /// Randomized, modelled on a connection that breaks now and then (a batch comes back with
    /// its tail unknown, and every batch still in flight behind it comes back all unknown):
    /// every item settles exactly once, and in arrival order.
    @Test func everyItemSettlesOnceAndRetriesAreNeverOvertaken() {
        var rng = SplitMix(seed: 7)
        for _ in 0..<300 {
            var pipeline = StorePipeline<Int>(maxBatch: Int(rng.next() % 4) + 1, maxInFlight: Int(rng.next() % 3) + 1)
            var next = 0
            var inFlight: [[Int]] = []
            var settled: [Int] = []
            var broken = false
            for _ in 0..<200 {
                switch rng.next() % 3 {
                case 0:
                    pipeline.enqueue(next)
                    next += 1
                case 1:
                    if let batch = pipeline.nextBatch() { inFlight.append(batch) }
                default:
                    guard !inFlight.isEmpty else { continue }
                    let batch = inFlight.removeFirst()
                    let cut = broken ? 0 : Int(rng.next() % UInt64(batch.count + 1))
                    settled += batch.prefix(cut)
                    broken = broken || cut < batch.count
                    if pipeline.completed(retry: Array(batch.dropFirst(cut))) == .pause {
                        pipeline.resume()
                        broken = false
                    }
                }
            }
            while !pipeline.isIdle {
                if let batch = pipeline.nextBatch() { inFlight.append(batch) }
                guard !inFlight.isEmpty else { pipeline.resume(); continue }
                let batch = inFlight.removeFirst()
                if !broken { settled += batch }
                if pipeline.completed(retry: broken ? batch : []) == .pause {
                    pipeline.resume()
                    broken = false
                }
            }
            #expect(settled.sorted() == Array(0..<next))
            #expect(settled == settled.sorted(), "an unknown outcome goes again before anything after it")
        }
    }
}

/// A small deterministic generator, so a failure can be replayed.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
