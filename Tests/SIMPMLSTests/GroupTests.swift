import Foundation
import SIMPMLS
import Testing

/// Groups driven through the API alone (issue 42; RFC 9420 sections 11, 12): three members
/// added, updated and removed, with the epochs' secrets and message keys checked by use.
@Suite struct GroupTests {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
    static let lifetime = Lifetime(notBefore: 0, notAfter: .max)

    static func random(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255) } }

    static func signer() throws -> SignaturePrivateKey { try SignaturePrivateKey(rawRepresentation: random(32)) }

    static func bundle(_ name: String) throws -> MLSKeyPackageBundle {
        try MLSKeyPackageBundle(
            suite: suite, credential: .basic(identity: Array(name.utf8)), capabilities: MessageFixtures.capabilities,
            lifetime: lifetime, signer: try signer(), randomness: random)
    }

    static func create() throws -> MLSGroup {
        try MLSGroup.create(
            groupID: random(16), suite: suite, credential: .basic(identity: Array("alice".utf8)),
            capabilities: MessageFixtures.capabilities, lifetime: lifetime, signer: try signer(), randomness: random)
    }

    /// Alice's group with Bob and Carol, added one commit each, at epoch 2.
    static func threeMembers() throws -> (alice: MLSGroup, bob: MLSGroup, carol: MLSGroup) {
        var alice = try create()
        let bobBundle = try bundle("bob")
        let addBob = try alice.commit(adding: [bobBundle.keyPackage], randomness: random)
        alice = addBob.group
        var bob = try MLSGroup(joining: try #require(addBob.welcome), with: bobBundle)
        let carolBundle = try bundle("carol")
        let addCarol = try alice.commit(adding: [carolBundle.keyPackage], randomness: random)
        #expect(try bob.process(addCarol.message) == .newEpoch(2))
        alice = addCarol.group
        let carol = try MLSGroup(joining: try #require(addCarol.welcome), with: carolBundle)
        return (alice, bob, carol)
    }

    /// `from` sends `text`; each of `to` decrypts it as from `from`.
    static func send(_ text: String, from: inout MLSGroup, to: inout [MLSGroup]) throws {
        let message = try from.encrypt(Array(text.utf8), randomness: random)
        for i in to.indices {
            #expect(try to[i].process(.privateMessage(message)) == .application(
                sender: from.myLeaf, data: Array(text.utf8), authenticatedData: [], epoch: from.epoch))
        }
    }

    @Test func threeMembersAgreeAndTalk() throws {
        var (alice, bob, carol) = try Self.threeMembers()
        #expect(alice.epoch == 2 && bob.epoch == 2 && carol.epoch == 2)
        #expect(alice.members.count == 3)
        #expect(alice.epochAuthenticator == bob.epochAuthenticator && bob.epochAuthenticator == carol.epochAuthenticator)
        var others = [bob, carol]
        try Self.send("hi from alice", from: &alice, to: &others)
        var rest = [alice, others[1]]
        try Self.send("hi from bob", from: &others[0], to: &rest)
        _ = (bob, carol)
    }

    @Test func anUpdateCommitMovesEveryoneOn() throws {
        var (alice, bob, carol) = try Self.threeMembers()
        let update = try bob.commit(randomness: Self.random)
        bob = update.group
        #expect(try alice.process(update.message) == .newEpoch(3))
        #expect(try carol.process(update.message) == .newEpoch(3))
        #expect(alice.epochAuthenticator == bob.epochAuthenticator && carol.epochAuthenticator == bob.epochAuthenticator)
        var others = [alice, bob]
        try Self.send("after the update", from: &carol, to: &others)
    }

    @Test func aRemovedMemberCannotDecryptAfterItsRemoval() throws {
        var (alice, bob, carol) = try Self.threeMembers()
        let remove = try alice.commit(removing: [bob.myLeaf], randomness: Self.random)
        alice = remove.group
        #expect(try carol.process(remove.message) == .newEpoch(3))
        #expect(try bob.process(remove.message) == .removed)
        #expect(alice.members.count == 2)
        let message = try alice.encrypt(Array("without bob".utf8), randomness: Self.random)
        #expect(throws: (any Error).self) { try bob.process(.privateMessage(message)) }
        #expect(try carol.process(.privateMessage(message)) == .application(
            sender: alice.myLeaf, data: Array("without bob".utf8), authenticatedData: [], epoch: alice.epoch))
        // Nor can it follow a later commit.
        let update = try alice.commit(randomness: Self.random)
        #expect(throws: (any Error).self) { try bob.process(update.message) }
    }

    @Test func aMemberThatMissedACommitCannotDecryptLaterEpochs() throws {
        var (alice, bob, carol) = try Self.threeMembers()
        let first = try alice.commit(randomness: Self.random)
        alice = first.group
        #expect(try bob.process(first.message) == .newEpoch(3))
        let second = try alice.commit(randomness: Self.random)
        alice = second.group
        #expect(try bob.process(second.message) == .newEpoch(4))
        // Carol missed the first: the second is of an epoch she is not in.
        #expect(throws: MessageProtectionError.wrongEpoch(expected: 2, got: 3)) { try carol.process(second.message) }
        let message = try alice.encrypt(Array("epoch 4".utf8), randomness: Self.random)
        #expect(throws: MessageProtectionError.wrongEpoch(expected: 2, got: 4)) { try carol.process(.privateMessage(message)) }
        #expect(try bob.process(.privateMessage(message)) == .application(
            sender: alice.myLeaf, data: Array("epoch 4".utf8), authenticatedData: [], epoch: alice.epoch))
    }

    @Test func aReplayedOrStaleApplicationMessageIsRejected() throws {
        var (alice, bob, _) = try Self.threeMembers()
        let message = try alice.encrypt(Array("once".utf8), randomness: Self.random)
        _ = try bob.process(.privateMessage(message))
        #expect(throws: SecretTreeError.generationAlreadyUsed(0)) { try bob.process(.privateMessage(message)) }
        let stale = try alice.encrypt(Array("old epoch".utf8), randomness: Self.random)
        let update = try alice.commit(randomness: Self.random)
        #expect(try bob.process(update.message) == .newEpoch(3))
        #expect(throws: MLSGroupError.pastEpochNotKept(epoch: 2)) { try bob.process(.privateMessage(stale)) }
    }

    @Test func aCommitIsRefusedByItsSenderAndWhenTampered() throws {
        var (alice, bob, _) = try Self.threeMembers()
        let update = try bob.commit(randomness: Self.random)
        #expect(throws: MLSGroupError.ownCommit) { try bob.process(update.message) }
        guard case .publicMessage(var tampered) = update.message else { Issue.record("not public"); return }
        tampered.auth.confirmationTag = [UInt8](repeating: 0, count: 32)
        #expect(throws: (any Error).self) { try alice.process(.publicMessage(tampered)) }
        #expect(alice.epoch == 2)
        #expect(try alice.process(update.message) == .newEpoch(3))
    }

    @Test func stateSavedAndRestoredMidConversationContinues() throws {
        var (alice, bob, carol) = try Self.threeMembers()
        let first = try alice.encrypt(Array("before saving".utf8), randomness: Self.random)
        _ = try bob.process(.privateMessage(first))
        var restored = try MLSGroup(savedState: try bob.savedState(), credentialValidator: nil, proposalApprover: nil)
        #expect(restored.epoch == bob.epoch && restored.epochAuthenticator == bob.epochAuthenticator)
        // The used key stays deleted: the replay is still refused.
        #expect(throws: SecretTreeError.generationAlreadyUsed(0)) { try restored.process(.privateMessage(first)) }
        let second = try alice.encrypt(Array("after saving".utf8), randomness: Self.random)
        #expect(try restored.process(.privateMessage(second)) == .application(
            sender: alice.myLeaf, data: Array("after saving".utf8), authenticatedData: [], epoch: alice.epoch))
        // It follows commits and commits itself.
        let update = try alice.commit(randomness: Self.random)
        alice = update.group
        #expect(try restored.process(update.message) == .newEpoch(3))
        #expect(try carol.process(update.message) == .newEpoch(3))
        let own = try restored.commit(randomness: Self.random)
        restored = own.group
        #expect(try alice.process(own.message) == .newEpoch(4))
        #expect(try carol.process(own.message) == .newEpoch(4))
        var others = [alice, carol]
        try Self.send("restored bob", from: &restored, to: &others)
    }

    @Test func savedStateIsCheckedAndTheGroupPrintsNoSecrets() throws {
        let (alice, _, _) = try Self.threeMembers()
        var bytes = try alice.savedState()
        #expect(throws: (any Error).self) { try MLSGroup(savedState: Array(bytes.dropLast()), credentialValidator: nil, proposalApprover: nil) }
        bytes[0] = 1
        #expect(throws: MLSGroupError.invalidSavedState) { try MLSGroup(savedState: bytes, credentialValidator: nil, proposalApprover: nil) }
        #expect(String(describing: alice) == "MLSGroup(suite 0x1, epoch 2, leaf 0, redacted)")
    }

    @Test func proposalsSentOnTheirOwnAreCommittedByReference() throws {
        var (alice, bob, carol) = try Self.threeMembers()
        // Bob proposes an Update; Alice commits it.
        let update = try bob.proposeUpdate(randomness: Self.random)
        guard case .proposal = try alice.process(update) else { Issue.record("not a proposal"); return }
        _ = try carol.process(update)
        let commit = try alice.commit(randomness: Self.random)
        alice = commit.group
        #expect(try bob.process(commit.message) == .newEpoch(3))
        #expect(try carol.process(commit.message) == .newEpoch(3))
        #expect(alice.epochAuthenticator == bob.epochAuthenticator && bob.epochAuthenticator == carol.epochAuthenticator)
        var others = [alice, carol]
        try Self.send("bob, updated", from: &bob, to: &others)
        (alice, carol) = (others[0], others[1])

        // Carol proposes adding Dave and removing Bob; Alice commits both; a saved state
        // keeps the cached proposals.
        let daveBundle = try Self.bundle("dave")
        let add = try carol.proposeAdd(daveBundle.keyPackage, randomness: Self.random)
        let remove = try carol.proposeRemove(bob.myLeaf, randomness: Self.random)
        for message in [add, remove] {
            _ = try alice.process(message)
            _ = try bob.process(message)
        }
        alice = try MLSGroup(savedState: try alice.savedState(), credentialValidator: nil, proposalApprover: nil)
        let second = try alice.commit(randomness: Self.random)
        alice = second.group
        #expect(try carol.process(second.message) == .newEpoch(4))
        #expect(try bob.process(second.message) == .removed)
        var dave = try MLSGroup(joining: try #require(second.welcome), with: daveBundle)
        #expect(dave.epochAuthenticator == alice.epochAuthenticator && alice.members.count == 3)
        var rest = [alice, carol]
        try Self.send("hi from dave", from: &dave, to: &rest)
    }

    @Test func invalidProposalsAreRefused() throws {
        var (alice, bob, _) = try Self.threeMembers()
        #expect(throws: MLSGroupError.invalidRemove(leaf: 7)) { try alice.proposeRemove(LeafIndex(7), randomness: Self.random) }
        #expect(throws: MLSGroupError.invalidRemove(leaf: 0)) { try alice.commit(removing: [alice.myLeaf], randomness: Self.random) }
        // Two Removes of one leaf conflict: the cached one is dropped, the one by value kept.
        let remove = try bob.proposeRemove(LeafIndex(2), randomness: Self.random)
        guard case .proposal(let reference) = try alice.process(remove) else { Issue.record("not a proposal"); return }
        // Delivered twice, cached once.
        _ = try alice.process(remove)
        let both = try alice.commit(removing: [LeafIndex(2)], randomness: Self.random)
        #expect(both.dropped == [reference])
        #expect(both.group.members.count == 2)
        #expect(try alice.commit(randomness: Self.random).group.members.count == 2)
    }
}
