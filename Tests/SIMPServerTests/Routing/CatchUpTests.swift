import NIOCore
import Testing
@testable import SIMPServer

/// A session's catch-up reads: one at a time, one more when asked meanwhile, a failed one
/// again after a second, and early pushes held while a doubt is not covered.
@Suite struct CatchUpTests {
    @Test func oneReadAtATimeAndOneMoreWhenAskedMeanwhile() {
        var catchUp = CatchUp()
        let first = catchUp.want()
        #expect(first == 0)
        #expect(catchUp.want() == nil, "in flight: asked again after it")
        #expect(catchUp.want() == nil)
        #expect(catchUp.finished(covering: 0, succeeded: true) == .zero, "one more read, at once")
        #expect(catchUp.want() == 0)
        #expect(catchUp.finished(covering: 0, succeeded: true) == nil, "nothing asked meanwhile")
    }

    @Test func aFailedReadIsTriedAgainAfterASecond() {
        var catchUp = CatchUp()
        _ = catchUp.want()
        #expect(catchUp.finished(covering: 0, succeeded: false) == CatchUp.retryAfterFailure)
    }

    /// A doubt (a store answer that left a seq maybe unpushed) holds early pushes until a read
    /// issued after it came back; a read issued before it does not count.
    @Test func aDoubtIsCoveredOnlyByAReadIssuedAfterIt() {
        var catchUp = CatchUp()
        #expect(!catchUp.mayMissPushes)
        let before = catchUp.want()!
        catchUp.doubt()
        #expect(catchUp.mayMissPushes)
        _ = catchUp.finished(covering: before, succeeded: true)
        #expect(catchUp.mayMissPushes, "that read was issued before the doubt")
        let after = catchUp.want()!
        #expect(catchUp.mayMissPushes, "reading")
        _ = catchUp.finished(covering: after, succeeded: false)
        #expect(catchUp.mayMissPushes, "a failed read covers nothing")
        let again = catchUp.want()!
        _ = catchUp.finished(covering: again, succeeded: true)
        #expect(!catchUp.mayMissPushes)
    }
}
