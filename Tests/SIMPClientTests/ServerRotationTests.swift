import NIOCore
import SIMPCore
import Testing

@testable import SIMPClient

@Suite struct ServerRotationTests {
    func rotation(_ count: Int) -> ServerRotation {
        ServerRotation(count: count, backoff: ReconnectBackoff(base: .seconds(2), cap: .seconds(8)))
    }

    /// `count` reconnect attempts, with full jitter.
    func attempts(_ r: inout ServerRotation, _ count: Int) -> [ServerRotation.Attempt] {
        (0..<count).map { _ in r.nextAttempt(jitter: 1) }
    }

    @Test func connectStartsWithTheFirstServerAndTriesEachOnce() {
        #expect(rotation(3).connectOrder == [0, 1, 2])
        #expect(rotation(1).connectOrder == [0])
    }

    @Test func connectStartsWithTheServerThatLastWorked() {
        var r = rotation(3)
        r.connected(to: 2)
        #expect(r.connectOrder == [2, 0, 1])
    }

    @Test func afterALossTheNextServerComesFirstAndTheLostOneLast() {
        var r = rotation(3)
        r.connected(to: 1)
        #expect(attempts(&r, 3).map(\.index) == [2, 0, 1])
    }

    @Test func onlyTheFirstAttemptOfARoundWaitsAndTheWaitGrowsPerRound() {
        var r = rotation(3)
        r.connected(to: 0)
        let tried = attempts(&r, 7)
        #expect(tried.map(\.delay) == [.seconds(2), .zero, .zero, .seconds(4), .zero, .zero, .seconds(8)])
        #expect(tried.map(\.index) == [1, 2, 0, 1, 2, 0, 1])
        #expect(tried.map(\.number) == Array(1...7))
    }

    @Test func theWaitIsJittered() {
        var r = rotation(2)
        #expect(r.nextAttempt(jitter: 0).delay == .seconds(1))
    }

    @Test func oneServerIsTheBackoffAlone() {
        var r = rotation(1)
        let tried = attempts(&r, 5)
        #expect(tried.map(\.index) == [0, 0, 0, 0, 0])
        #expect(tried.map(\.delay) == [.seconds(2), .seconds(4), .seconds(8), .seconds(8), .seconds(8)])
    }

    @Test func aSuccessMidRoundAnchorsThereAndStartsOverFromTheShortestWait() {
        var r = rotation(3)
        r.connected(to: 0)
        let first = attempts(&r, 5)  // 1, 2, 0 (round 1), 1, 2 (round 2)
        r.connected(to: first[4].index)
        #expect(r.connectOrder == [2, 0, 1])
        let next = attempts(&r, 2)
        #expect(next.map(\.index) == [0, 1])
        #expect(next.map(\.delay) == [.seconds(2), .zero])
        #expect(next.map(\.number) == [1, 2])
    }

    @Test func noServersBehavesAsOne() {
        var r = rotation(0)
        #expect(r.connectOrder == [0])
        #expect(r.nextAttempt(jitter: 1).index == 0)
    }
}
