import NIOCore
import SIMPCore
import Testing

@Suite struct TokenBucketTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func admitsABurstThenRefusesUntilTimePasses() {
        var bucket = TokenBucket(rate: 10, burst: 5, now: start)
        let admitted = (0..<8).filter { _ in bucket.take(now: start) }.count
        #expect(admitted == 5)
        #expect(!bucket.take(now: start + .milliseconds(50)))
        #expect(bucket.take(now: start + .milliseconds(100)))
        #expect(!bucket.take(now: start + .milliseconds(100)))
    }

    @Test func sustainedRateIsTheConfiguredRate() {
        var bucket = TokenBucket(rate: 100, burst: 1, now: start)
        var admitted = 0
        // One attempt per millisecond for ten seconds.
        for ms in 0..<10_000 where bucket.take(now: start + .milliseconds(Int64(ms))) { admitted += 1 }
        #expect((999...1001).contains(admitted))
    }

    @Test func idleTimeDoesNotBankMoreThanTheBurst() {
        var bucket = TokenBucket(rate: 1000, burst: 3, now: start)
        let later = start + .seconds(3600)
        let admitted = (0..<10).filter { _ in bucket.take(now: later) }.count
        #expect(admitted == 3)
    }

    @Test func aClockThatGoesBackwardsGivesNothing() {
        var bucket = TokenBucket(rate: 1, burst: 1, now: start)
        #expect(bucket.take(now: start))
        #expect(!bucket.take(now: start - .seconds(10)))
    }
}

@Suite struct AmplificationBudgetTests {
    @Test func nothingMayBeSentBeforeAnythingWasReceived() {
        var budget = AmplificationBudget()
        #expect(!budget.spend(1))
    }

    @Test func sendsStayWithinThreeTimesTheReceivedBytes() {
        var budget = AmplificationBudget()
        budget.receive(36)
        #expect(budget.spend(52))
        #expect(budget.spend(52))
        #expect(!budget.spend(52))  // 156 > 108
        #expect(budget.sent == 104)
        budget.receive(36)
        #expect(budget.spend(52))
    }
}

@Suite struct LoginThrottleTests {
    @Test func theFirstFailuresAreFree() {
        for failures in 0..<LoginThrottle.freeAttempts {
            #expect(LoginThrottle.lockout(afterFailures: failures) == .zero)
        }
    }

    @Test func furtherFailuresDoubleTheWaitUpToTheCap() {
        let free = LoginThrottle.freeAttempts
        #expect(LoginThrottle.lockout(afterFailures: free) == .seconds(1))
        #expect(LoginThrottle.lockout(afterFailures: free + 1) == .seconds(2))
        #expect(LoginThrottle.lockout(afterFailures: free + 4) == .seconds(16))
        #expect(LoginThrottle.lockout(afterFailures: free + 30) == LoginThrottle.maxLockout)
        #expect(LoginThrottle.lockout(afterFailures: Int.max) == LoginThrottle.maxLockout)
    }
}

@Suite struct SlotCounterTests {
    @Test func refusesTheHolderOverTheLimitPerKey() {
        var slots = SlotCounter<String>(limit: 2)
        #expect(slots.acquire("10.0.0.1"))
        #expect(slots.acquire("10.0.0.1"))
        #expect(!slots.acquire("10.0.0.1"))
        #expect(slots.acquire("10.0.0.2"))
        slots.release("10.0.0.1")
        #expect(slots.acquire("10.0.0.1"))
    }

    @Test func releasedKeysLeaveNothingBehind() {
        var slots = SlotCounter<String>(limit: 1)
        for i in 0..<1000 {
            #expect(slots.acquire("k\(i)"))
            slots.release("k\(i)")
        }
        slots.release("never-held")
        #expect(slots.keyCount == 0)
    }
}
