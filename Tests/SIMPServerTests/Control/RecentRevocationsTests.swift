import NIOCore
import Testing
@testable import SIMPServer

/// Which logins a revocation ends, and the revocations a node remembers for logins still on
/// their way to its table (issue 46, finding 1's two races). Time is passed in.
struct RecentRevocationsTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func at(_ seconds: Int64) -> NIODeadline { start + .seconds(seconds) }

    @Test func aRevocationEndsTokensIssuedAtOrBeforeIt() {
        #expect(RecentRevocations.ends(tokenIssued: 99, revokedAt: 100))
        #expect(RecentRevocations.ends(tokenIssued: 100, revokedAt: 100), "the same ms: as Redis refuses it")
        #expect(!RecentRevocations.ends(tokenIssued: 101, revokedAt: 100), "a login after the revocation outlives it")
        #expect(RecentRevocations.ends(tokenIssued: .max, revokedAt: nil), "an announcement without a time ends every login")
    }

    /// Race (a): a login whose token the revocation ends, joining after the closes ran.
    @Test func aLoginFromBeforeARememberedRevocationIsRefused() {
        var memory = RecentRevocations()
        memory.heard(user: "alice", device: "phone", revokedAt: 100, now: Self.at(0))
        #expect(memory.refuses(user: "alice", device: "phone", tokenIssued: 100, now: Self.at(1)))
        #expect(memory.refuses(user: "alice", device: "phone", tokenIssued: 50, now: Self.at(1)))
        #expect(!memory.refuses(user: "alice", device: "phone", tokenIssued: 101, now: Self.at(1)), "a new login")
        #expect(!memory.refuses(user: "alice", device: "laptop", tokenIssued: 50, now: Self.at(1)), "another device")
        #expect(!memory.refuses(user: "bob", device: "phone", tokenIssued: 50, now: Self.at(1)), "another user")
    }

    @Test func aRevocationIsForgottenAfterItsWhile() {
        var memory = RecentRevocations(keepFor: .seconds(60))
        memory.heard(user: "alice", device: "phone", revokedAt: 100, now: Self.at(0))
        #expect(memory.refuses(user: "alice", device: "phone", tokenIssued: 50, now: Self.at(59)))
        #expect(!memory.refuses(user: "alice", device: "phone", tokenIssued: 50, now: Self.at(60)))
        memory.heard(user: "alice", device: "laptop", revokedAt: 100, now: Self.at(60))
        #expect(memory.count == 1, "the next hearing dropped it")
    }

    /// Heard again (the node's own echo, another node's announcement): the latest time counts,
    /// and the while starts again.
    @Test func hearingADeviceAgainKeepsTheLatestTimeAndTheLatestWhile() {
        var memory = RecentRevocations(keepFor: .seconds(60))
        memory.heard(user: "alice", device: "phone", revokedAt: 200, now: Self.at(0))
        memory.heard(user: "alice", device: "phone", revokedAt: 100, now: Self.at(30))
        #expect(memory.refuses(user: "alice", device: "phone", tokenIssued: 150, now: Self.at(31)), "an older echo lowers nothing")
        memory.heard(user: "alice", device: "laptop", revokedAt: 100, now: Self.at(60))
        #expect(memory.count == 2, "the first hearing's end dropped nothing")
        #expect(memory.refuses(user: "alice", device: "phone", tokenIssued: 150, now: Self.at(89)))
        #expect(!memory.refuses(user: "alice", device: "phone", tokenIssued: 150, now: Self.at(90)))
        memory.heard(user: "alice", device: "tablet", revokedAt: 100, now: Self.at(90))
        #expect(memory.count == 2, "the phone went with its last hearing, the laptop stays")
    }

    @Test func atMostSoManyAreRememberedTheOldestGoFirst() {
        var memory = RecentRevocations(keepFor: .seconds(60), most: 3)
        for device in ["a", "b", "c", "d"] {
            memory.heard(user: "alice", device: device, revokedAt: 100, now: Self.at(0))
        }
        #expect(memory.count == 3)
        #expect(!memory.refuses(user: "alice", device: "a", tokenIssued: 50, now: Self.at(0)), "the oldest went")
        for device in ["b", "c", "d"] {
            #expect(memory.refuses(user: "alice", device: device, tokenIssued: 50, now: Self.at(0)))
        }
    }

    /// A device heard twice takes two places in the order, and leaves only with its last.
    @Test func aDeviceHeardTwiceLeavesWithItsLastHearing() {
        var memory = RecentRevocations(keepFor: .seconds(60), most: 3)
        memory.heard(user: "alice", device: "a", revokedAt: 100, now: Self.at(0))
        memory.heard(user: "alice", device: "a", revokedAt: 100, now: Self.at(0))
        memory.heard(user: "alice", device: "b", revokedAt: 100, now: Self.at(0))
        memory.heard(user: "alice", device: "c", revokedAt: 100, now: Self.at(0))
        #expect(memory.refuses(user: "alice", device: "a", tokenIssued: 50, now: Self.at(0)), "its second hearing is still in")
        memory.heard(user: "alice", device: "d", revokedAt: 100, now: Self.at(0))
        #expect(!memory.refuses(user: "alice", device: "a", tokenIssued: 50, now: Self.at(0)))
        #expect(memory.count == 3)
    }
}
