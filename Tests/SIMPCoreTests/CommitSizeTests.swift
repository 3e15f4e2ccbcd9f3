import SIMPCore
import Testing

/// What one `SubmitCommit` carries (`CommitRules.submitFits`): a client splits a large group's
/// adds into commits that each fit, and refuses, saying why, a device that fits none.
@Suite struct CommitSizeTests {
    @Test func aCommitFitsWithinEachLimitAndOneFrame() {
        #expect(CommitRules.submitFits(commit: 2_000, welcome: 1_500, welcomes: 32))
        #expect(CommitRules.submitFits(commit: CommitRules.maxCommitBytes, welcome: 0, welcomes: 0))
    }

    @Test func moreWelcomesThanARequestTakesDoNotFit() {
        #expect(!CommitRules.submitFits(commit: 100, welcome: 100, welcomes: CommitRules.maxWelcomes + 1))
    }

    @Test func aCommitOrWelcomeOverItsLimitDoesNotFit() {
        #expect(!CommitRules.submitFits(commit: CommitRules.maxCommitBytes + 1, welcome: 0, welcomes: 0))
        #expect(!CommitRules.submitFits(commit: 100, welcome: CommitRules.maxWelcomeBytes + 1, welcomes: 1))
    }

    /// Each Welcome is repeated for every device it adds: a group's Welcome grows with the group,
    /// so fewer devices fit a request as it grows.
    @Test func repeatedWelcomesOverOneFrameDoNotFit() {
        #expect(CommitRules.submitFits(commit: 4_000, welcome: 6_000, welcomes: 9))
        #expect(!CommitRules.submitFits(commit: 4_000, welcome: 6_000, welcomes: 10))
    }
}
