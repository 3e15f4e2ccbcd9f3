import Testing
@testable import SIMPClient

/// What `setUpIdentity` does from what the data directory and the server hold. Pure.
@Suite struct IdentitySetupTests {
    let mine: [UInt8] = Array(repeating: 1, count: 32)
    let other: [UInt8] = Array(repeating: 2, count: 32)

    @Test func theFirstDeviceMakesTheIdentity() {
        #expect(IdentitySetup.next(stored: nil, onServer: nil, newIdentity: false) == .create)
    }

    @Test func aFurtherDeviceWithoutTheIdentityMustBeLinked() {
        #expect(IdentitySetup.next(stored: nil, onServer: other, newIdentity: false) == .needsLinking)
    }

    @Test func aDeviceWithTheIdentityPublishesItUntilTheServerHasIt() {
        #expect(IdentitySetup.next(stored: (mine, false), onServer: nil, newIdentity: false) == .publish)
        #expect(IdentitySetup.next(stored: (mine, false), onServer: mine, newIdentity: false) == .publish)
        #expect(IdentitySetup.next(stored: (mine, true), onServer: mine, newIdentity: false) == .ready)
        #expect(IdentitySetup.next(stored: (mine, true), onServer: nil, newIdentity: false) == .publish, "the server lost it")
    }

    @Test func anotherIdentityOnTheServerIsNeverOverwrittenUnlessAskedTo() {
        #expect(IdentitySetup.next(stored: (mine, true), onServer: other, newIdentity: false) == .needsLinking)
        #expect(IdentitySetup.next(stored: (mine, true), onServer: other, newIdentity: true) == .create)
        #expect(IdentitySetup.next(stored: nil, onServer: other, newIdentity: true) == .create)
    }
}
