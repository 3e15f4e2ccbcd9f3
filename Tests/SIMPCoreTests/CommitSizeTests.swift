import SIMPCore
import Testing

/// What one `SubmitCommit` carries (`CommitRules.submitFits`): a commit, its one Welcome and the
/// devices it adds; a client splits a large group's adds into commits that each fit, and
/// refuses, saying why, a device that fits none.
@Suite struct CommitSizeTests {
    @Test func aCommitFitsWithinEachLimitAndOneFrame() {
        #expect(CommitRules.submitFits(commit: 2_000, welcome: 1_500, added: 32))
        #expect(CommitRules.submitFits(commit: CommitRules.maxCommitBytes, welcome: 0, added: 0))
        #expect(CommitRules.submitFits(commit: CommitRules.maxCommitBytes, welcome: CommitRules.maxWelcomeBytes, added: 0),
                "the largest commit with the largest Welcome is one request")
    }

    @Test func moreDevicesThanACommitAddsDoNotFit() {
        #expect(CommitRules.submitFits(commit: 100, welcome: 100, added: CommitRules.maxAddedDevices))
        #expect(!CommitRules.submitFits(commit: 100, welcome: 100, added: CommitRules.maxAddedDevices + 1))
    }

    @Test func aCommitOrWelcomeOverItsLimitDoesNotFit() {
        #expect(!CommitRules.submitFits(commit: CommitRules.maxCommitBytes + 1, welcome: 0, added: 0))
        #expect(!CommitRules.submitFits(commit: 100, welcome: CommitRules.maxWelcomeBytes + 1, added: 1))
    }

    /// The Welcome is sent once however many devices it adds: a 100-device group's (about
    /// 16,500 bytes, which no longer fitted when it was repeated per device) fits with a commit
    /// adding many, and a 250-device group's (about 41,000) with a commit adding a few.
    @Test func oneWelcomeForManyDevicesFitsAndOnlyTheSumIsBoundByTheFrame() {
        #expect(CommitRules.submitFits(commit: 12_000, welcome: 16_500 + 40 * 160, added: 40))
        #expect(CommitRules.submitFits(commit: 4_000, welcome: 41_000, added: 10))
        #expect(!CommitRules.submitFits(commit: 16_000, welcome: 45_000, added: 10), "together over one frame")
    }
}
