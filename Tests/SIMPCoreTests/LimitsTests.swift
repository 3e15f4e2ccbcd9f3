import NIOCore
import SIMPCore
import Testing

@Suite struct TokenBucketTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func admitsABurstThenRefusesUntilTimePasses() {
        var bucket = TokenBucket(rate: 10, burst: 5, now: start)
        let admitted = (0..<8).filter { _ in bucket.take(now: start) }.count
        #expect(admitted == 5)
        let r1 = bucket.take(now: start + .milliseconds(50))
        #expect(!r1)
        let r2 = bucket.take(now: start + .milliseconds(100))
        #expect(r2)
        let r3 = bucket.take(now: start + .milliseconds(100))
        #expect(!r3)
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
        let r4 = bucket.take(now: start)
        #expect(r4)
        let r5 = bucket.take(now: start - .seconds(10))
        #expect(!r5)
    }
}

@Suite struct AmplificationBudgetTests {
    @Test func nothingMayBeSentBeforeAnythingWasReceived() {
        var budget = AmplificationBudget()
        let r6 = budget.spend(1)
        #expect(!r6)
    }

    @Test func sendsStayWithinThreeTimesTheReceivedBytes() {
        var budget = AmplificationBudget()
        budget.receive(36)
        let r7 = budget.spend(52)
        #expect(r7)
        let r8 = budget.spend(52)
        #expect(r8)
        let r9 = budget.spend(52)
        #expect(!r9)  // 156 > 108
        #expect(budget.sent == 104)
        budget.receive(36)
        let r10 = budget.spend(52)
        #expect(r10)
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

    @Test func theAllSourcesCountHasItsOwnAllowance() {
        let free = LoginThrottle.freeAttemptsPerUser
        #expect(LoginThrottle.lockout(afterFailures: free - 1, free: free) == .zero)
        #expect(LoginThrottle.lockout(afterFailures: free, free: free) == .seconds(1))
        #expect(LoginThrottle.lockout(afterFailures: free + 2, free: free) == .seconds(4))
    }
}

@Suite struct SlotCounterTests {
    @Test func refusesTheHolderOverTheLimitPerKey() {
        var slots = SlotCounter<String>(limit: 2)
        let r11 = slots.acquire("10.0.0.1")
        #expect(r11)
        let r12 = slots.acquire("10.0.0.1")
        #expect(r12)
        let r13 = slots.acquire("10.0.0.1")
        #expect(!r13)
        let r14 = slots.acquire("10.0.0.2")
        #expect(r14)
        slots.release("10.0.0.1")
        let r15 = slots.acquire("10.0.0.1")
        #expect(r15)
    }

    @Test func releasedKeysLeaveNothingBehind() {
        var slots = SlotCounter<String>(limit: 1)
        for i in 0..<1000 {
            let r16 = slots.acquire("k\(i)")
        #expect(r16)
            slots.release("k\(i)")
        }
        slots.release("never-held")
        #expect(slots.keyCount == 0)
    }
}
