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

    /// A device takes the identity of the device beside it only when the server names it, and,
    /// holding one of its own, only when that device made it over exactly the one held: a
    /// server answering an older identity that a stale directory beside it holds never makes a
    /// device give up its own.
    @Test func aDeviceTakesItsSiblingsIdentityOnlyOverTheOneItReplaced() {
        let (old, new, other) = ([UInt8](repeating: 1, count: 32), [UInt8](repeating: 2, count: 32), [UInt8](repeating: 3, count: 32))
        #expect(SiblingIdentity.mayTake(held: nil, onServer: new, sibling: (new, nil)), "a device without one")
        #expect(!SiblingIdentity.mayTake(held: nil, onServer: other, sibling: (new, nil)), "a stale sibling")
        #expect(!SiblingIdentity.mayTake(held: nil, onServer: nil, sibling: (new, nil)))
        #expect(SiblingIdentity.mayTake(held: old, onServer: new, sibling: (new, old)), "the -cli device after --new-identity")
        #expect(!SiblingIdentity.mayTake(held: old, onServer: new, sibling: (new, nil)), "the sibling replaced nothing")
        #expect(!SiblingIdentity.mayTake(held: old, onServer: new, sibling: (new, other)), "it replaced another one")
        #expect(!SiblingIdentity.mayTake(held: new, onServer: old, sibling: (old, nil)),
                "the new identity's own device, the server answering the old one a stale sibling holds")
        #expect(!SiblingIdentity.mayTake(held: new, onServer: new, sibling: (new, old)), "it holds the server's already")
    }
}
