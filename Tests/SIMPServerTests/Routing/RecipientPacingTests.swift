import NIOCore
import Testing
@testable import SIMPServer

/// New recipients per user and window (`RecipientPacing`), with injected time.
struct RecipientPacingTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// What each write in turn came to.
    static func admitted(_ pacing: inout RecipientPacing, _ writes: [(user: String, to: String)], at now: NIODeadline) -> [Bool] {
        writes.map { pacing.admits($0.user, writingTo: $0.to, now: now) }
    }

    @Test func newRecipientsPastTheLimitAreRefusedKnownOnesNever() {
        var pacing = RecipientPacing(limit: 3, window: .hours(1))
        let writes = [("alice", "bob"), ("alice", "carol"), ("alice", "ghost"), ("alice", "dave"), ("alice", "ghost2"),
                      ("alice", "bob"), ("mallory", "dave")]
        // dave exists and ghost2 does not: refused alike; bob was written to before; mallory is counted apart.
        #expect(Self.admitted(&pacing, writes, at: start) == [true, true, true, false, false, true, true])
    }

    @Test func aNewWindowCountsAfresh() {
        var pacing = RecipientPacing(limit: 1, window: .hours(1))
        #expect(Self.admitted(&pacing, [("alice", "bob")], at: start) == [true])
        #expect(Self.admitted(&pacing, [("alice", "carol")], at: start + .minutes(59)) == [false])
        // A new window; bob is remembered across it.
        #expect(Self.admitted(&pacing, [("alice", "carol"), ("alice", "bob")], at: start + .minutes(60)) == [true, true])
    }

    @Test func theOldestHalfIsForgottenPastWhatIsRemembered() {
        let count = RecipientPacing.remembered + 1
        var pacing = RecipientPacing(limit: count, window: .hours(1))
        let all = (0..<count).map { ("alice", "u\($0)") }
        #expect(Self.admitted(&pacing, all, at: start).allSatisfy { $0 })
        // u0 was forgotten, so it is new again, and the window is spent; the newest is remembered.
        #expect(Self.admitted(&pacing, [("alice", "u0"), ("alice", "u\(count - 1)")], at: start) == [false, true])
    }
}
