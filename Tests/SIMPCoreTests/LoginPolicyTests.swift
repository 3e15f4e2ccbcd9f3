import NIOCore
import SIMPCore
import Testing

@Suite struct LoginPolicyTests {
    @Test func aWaitNeverOutlastsItsCountsWindow() {
        let free = LoginThrottle.freeAttempts
        #expect(LoginThrottle.lockout(afterFailures: free + 8, windowLeft: .seconds(40)) == .seconds(40))
        #expect(LoginThrottle.lockout(afterFailures: free + 2, windowLeft: .seconds(40)) == .seconds(4))
        #expect(LoginThrottle.lockout(afterFailures: free + 2, windowLeft: .milliseconds(-5)) == .zero)
    }

    @Test func aKnownSourceIsSparedTheWaitsOthersCaused() {
        let waits = LoginThrottle.Waits(source: .seconds(8), name: .seconds(30))
        #expect(LoginThrottle.refusal(waits, knownSource: true) == nil)
        #expect(LoginThrottle.refusal(waits, knownSource: false)?.lock == .source)
        let nameOnly = LoginThrottle.Waits(name: .seconds(30))
        #expect(LoginThrottle.refusal(nameOnly, knownSource: false)?.lock == .name)
        #expect(LoginThrottle.refusal(nameOnly, knownSource: false)?.wait == .seconds(30))
    }

    @Test func failuresOnTheNameFromTheSourceItselfStillCount() {
        let waits = LoginThrottle.Waits(nameFromSource: .seconds(2), name: .seconds(30))
        let refusal = LoginThrottle.refusal(waits, knownSource: true)
        #expect(refusal?.lock == .nameFromSource)
        #expect(refusal?.wait == .seconds(2))
        #expect(LoginThrottle.refusal(LoginThrottle.Waits(), knownSource: false) == nil)
    }

    /// One address guessing one user's password as fast as the waits allow, for a day (the
    /// clock is simulated): the counts' fixed windows keep it far below the all-sources
    /// allowance in every window, so alone it never makes the user wait anywhere else, and
    /// it gets a bounded number of guesses.
    @Test func aSlowAttackerFromOneAddressNeverLocksTheUserElsewhere() {
        var clock = SimulatedThrottle()
        var guesses = 0
        while clock.now < .hours(24) {
            clock.now = max(clock.now, clock.ready(["alice@10.0.0.9", "10.0.0.9"]))
            let counts = clock.fail(["alice@10.0.0.9": LoginThrottle.freeAttempts, "10.0.0.9": LoginThrottle.freeAttemptsPerSource,
                                     "alice": LoginThrottle.freeAttemptsPerUser])
            #expect(counts["alice"]! < LoginThrottle.freeAttemptsPerUser)
            guesses += 1
        }
        let windows = Int(TimeAmount.hours(24).nanoseconds / LoginThrottle.window.nanoseconds)
        #expect(guesses <= windows * 16, "\(guesses) guesses a day from one address")
        #expect(clock.lockedUntil["alice", default: .zero] == .zero, "the user-wide wait was never set")
    }

    /// One address trying many names (password spraying): after its allowance the address
    /// waits for every name, so it gets a bounded number of guesses per window.
    @Test func oneAddressSprayingManyNamesIsSlowedForAll() {
        var clock = SimulatedThrottle()
        var guesses = 0
        while clock.now < LoginThrottle.window {
            let name = "user\(guesses)"
            clock.now = max(clock.now, clock.ready(["\(name)@10.0.0.9", "10.0.0.9"]))
            guard clock.now < LoginThrottle.window else { break }
            _ = clock.fail(["\(name)@10.0.0.9": LoginThrottle.freeAttempts, "10.0.0.9": LoginThrottle.freeAttemptsPerSource,
                            name: LoginThrottle.freeAttemptsPerUser])
            guesses += 1
        }
        #expect(guesses > LoginThrottle.freeAttemptsPerSource)
        #expect(guesses <= LoginThrottle.freeAttemptsPerSource + 11, "\(guesses) names tried in one window")
    }
}

/// The server's failure counts as its Redis script keeps them (Scripts.countInWindow): each
/// count lives `LoginThrottle.window` from its first failure; each failure sets the wait
/// `LoginThrottle.lockout` gives for the count and the window's remaining time.
private struct SimulatedThrottle {
    var now = TimeAmount.zero
    var windows: [String: (start: TimeAmount, count: Int)] = [:]
    var lockedUntil: [String: TimeAmount] = [:]

    /// When every one of these waits is over.
    func ready(_ keys: [String]) -> TimeAmount {
        keys.map { lockedUntil[$0, default: .zero] }.max() ?? .zero
    }

    /// Records a failure under each key (with its allowance); returns the counts.
    mutating func fail(_ keys: [String: Int]) -> [String: Int] {
        var counts: [String: Int] = [:]
        for (key, free) in keys {
            var window = windows[key] ?? (now, 0)
            if now >= window.start + LoginThrottle.window { window = (now, 0) }
            window.count += 1
            windows[key] = window
            counts[key] = window.count
            let wait = LoginThrottle.lockout(afterFailures: window.count, free: free,
                                             windowLeft: window.start + LoginThrottle.window - now)
            if wait > .zero { lockedUntil[key] = now + wait }
        }
        return counts
    }
}

@Suite struct HashingAdmissionTests {
    @Test func boundsTheQueueAndEachSourcesShare() {
        var queue = HashingAdmission(limit: 3, perSource: 2)
        #expect(queue.admit("10.0.0.1") == nil)
        #expect(queue.admit("10.0.0.1") == nil)
        #expect(queue.admit("10.0.0.1") == .sourceFull)
        #expect(queue.admit("10.0.0.2") == nil)
        #expect(queue.admit("10.0.0.3") == .full)
        #expect(queue.total == 3)
        queue.release("10.0.0.1")
        #expect(queue.admit("10.0.0.3") == nil)
        #expect(queue.count("10.0.0.1") == 1)
    }

    @Test func releasingWhatWasNeverAdmittedChangesNothing() {
        var queue = HashingAdmission(limit: 2, perSource: 1)
        queue.release("10.0.0.1")
        #expect(queue.total == 0)
        #expect(queue.admit("10.0.0.1") == nil)
        #expect(queue.total == 1)
    }
}

@Suite struct SourceAddressTests {
    @Test func ipv6AddressesCountByTheirSlash64() {
        #expect(SourceAddress.bucket("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64")
        #expect(SourceAddress.bucket("2001:db8:1:2::1") == SourceAddress.bucket("2001:db8:1:2:ffff::9"))
        #expect(SourceAddress.bucket("2001:db8:1:3::1") != SourceAddress.bucket("2001:db8:1:2::1"))
    }

    @Test func ipv4AndMappedIPv4CountByTheAddress() {
        #expect(SourceAddress.bucket("192.0.2.7") == "192.0.2.7")
        #expect(SourceAddress.bucket("::ffff:192.0.2.7") == "192.0.2.7")
        #expect(SourceAddress.bucket("unknown") == "unknown")
    }
}
