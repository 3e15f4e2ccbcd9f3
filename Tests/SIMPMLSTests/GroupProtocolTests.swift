import Foundation
@testable import SIMPMLS
import Testing

/// The group state machine's protocol beyond Adds, Updates and Removes (issue 42; RFC 9420
/// sections 6.3, 8.3, 8.4, 12.1-12.4.3.2): handshake messages as PrivateMessages, PSKs,
/// GroupContextExtensions, external commits, commits without a path, late messages of the
/// previous epoch, and a committer leaving out cached proposals it may not commit.
@Suite struct GroupProtocolTests {
    typealias G = GroupTests
    static let random = GroupTests.random

    /// Every member in `members` processes `message` into `epoch`, and all agree with `committer`.
    static func deliver(_ message: MLSMessage, to members: inout [MLSGroup], epoch: UInt64, committer: MLSGroup,
                        psk: (PreSharedKeyID) throws -> SecretBytes = MLSGroup.noExternalPSK) throws {
        for i in members.indices {
            #expect(try members[i].process(message, psk: psk) == .newEpoch(epoch))
            #expect(members[i].epochAuthenticator == committer.epochAuthenticator)
        }
    }

    @Test func proposalsAndCommitsTravelAsPrivateMessages() throws {
        var (alice, bob, carol) = try G.threeMembers()
        alice.policy.handshakeWireFormat = .privateMessage
        bob.policy.handshakeWireFormat = .privateMessage
        let update = try bob.proposeUpdate(randomness: Self.random)
        guard case .privateMessage = update else { Issue.record("an Update sent in public"); return }
        guard case .proposal = try alice.process(update) else { Issue.record("not cached"); return }
        _ = try carol.process(update)
        #expect(throws: MLSGroupError.ownMessage) { try bob.process(update) }

        let commit = try alice.commit(randomness: Self.random)
        guard case .privateMessage = commit.message else { Issue.record("a commit sent in public"); return }
        #expect(throws: MLSGroupError.ownCommit) { try alice.process(commit.message) }
        alice = commit.group
        var others = [bob, carol]
        try Self.deliver(commit.message, to: &others, epoch: 3, committer: alice)
        (bob, carol) = (others[0], others[1])
        var rest = [alice, carol]
        try G.send("bob, updated in private", from: &bob, to: &rest)

        // A member whose policy takes public handshake messages only refuses it, unchanged.
        (alice, carol) = (rest[0], rest[1])
        carol.policy.acceptedHandshakeWireFormats = [.publicMessage]
        let next = try alice.commit(randomness: Self.random)
        #expect(throws: MLSGroupError.wireFormatNotAllowed(.privateMessage)) { try carol.process(next.message) }
        #expect(carol.epoch == 3)
        #expect(try bob.process(next.message) == .newEpoch(4))
    }

    /// Members that take external commits, as an application that allows them makes them.
    static func open(_ groups: inout [MLSGroup]) {
        for i in groups.indices { groups[i].policy.acceptsExternalCommits = true }
    }

    @Test func anExternalCommitJoinsTheGroup() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let info = try alice.groupInfo(externalPub: true)
        let daveSigner = try G.signer()
        let joined = try MLSGroup.joinByExternalCommit(
            groupInfo: info, credential: .basic(identity: Array("dave".utf8)), capabilities: MessageFixtures.capabilities,
            signer: daveSigner, randomness: Self.random)
        var dave = joined.group
        guard case .publicMessage(let message) = joined.message, message.content.sender == .newMemberCommit else {
            Issue.record("not a new member's commit"); return
        }
        // By default a member takes no external commit, unchanged.
        var closed = bob
        #expect(throws: MLSGroupError.newMemberNotAccepted) { try closed.process(joined.message) }
        #expect(closed.epoch == bob.epoch)
        var members = [alice, bob, carol]
        Self.open(&members)
        try Self.deliver(joined.message, to: &members, epoch: 3, committer: dave)
        (alice, bob, carol) = (members[0], members[1], members[2])
        #expect(alice.members.count == 4 && dave.myLeaf == LeafIndex(3))
        var others = [alice, bob, carol]
        try G.send("hi, I let myself in", from: &dave, to: &others)
        var daveOnly = [dave]
        try G.send("welcome dave", from: &others[0], to: &daveOnly)

        // A GroupInfo without external_pub does not allow it; a tampered commit is refused.
        #expect(throws: MLSGroupError.missingExternalPub) {
            try MLSGroup.joinByExternalCommit(
                groupInfo: try others[0].groupInfo(externalPub: false), credential: .basic(identity: Array("eve".utf8)),
                capabilities: MessageFixtures.capabilities, signer: try G.signer(), randomness: Self.random)
        }
        let eve = try MLSGroup.joinByExternalCommit(
            groupInfo: try others[0].groupInfo(externalPub: true), credential: .basic(identity: Array("eve".utf8)),
            capabilities: MessageFixtures.capabilities, signer: try G.signer(), randomness: Self.random)
        guard case .publicMessage(var forged) = eve.message else { Issue.record("unexpected message"); return }
        forged.auth.confirmationTag = [UInt8](repeating: 1, count: 32)
        #expect(throws: (any Error).self) { try others[1].process(.publicMessage(forged)) }
        #expect(try others[1].process(eve.message) == .newEpoch(4))
    }

    @Test func aResyncExternalCommitReplacesTheOldLeaf() throws {
        var (alice, bob, carol) = try G.threeMembers()
        // Bob lost his state and comes back with the same identity.
        let joined = try MLSGroup.joinByExternalCommit(
            groupInfo: try alice.groupInfo(externalPub: true), credential: .basic(identity: Array("bob".utf8)),
            capabilities: MessageFixtures.capabilities, signer: try G.signer(), resyncing: bob.myLeaf, randomness: Self.random)
        var members = [alice, carol, bob]
        Self.open(&members)
        // Eve, holding the same GroupInfo, cannot take Carol's place: the removed leaf must be
        // the joiner's own (same credential). Carol is not told she was removed.
        let eve = try MLSGroup.joinByExternalCommit(
            groupInfo: try alice.groupInfo(externalPub: true), credential: .basic(identity: Array("eve".utf8)),
            capabilities: MessageFixtures.capabilities, signer: try G.signer(), resyncing: carol.myLeaf, randomness: Self.random)
        #expect(throws: MLSGroupError.invalidResync(leaf: carol.myLeaf.value)) { try members[0].process(eve.message) }
        #expect(throws: MLSGroupError.invalidResync(leaf: carol.myLeaf.value)) { try members[1].process(eve.message) }
        bob = members.removeLast()
        try Self.deliver(joined.message, to: &members, epoch: 3, committer: joined.group)
        (alice, carol) = (members[0], members[1])
        #expect(alice.members.count == 3 && joined.group.myLeaf == bob.myLeaf)
        #expect(try bob.process(joined.message) == .removed)
    }

    @Test func aPSKProposalInjectsItsKeyAtEveryMember() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let name = Array("shared out of band".utf8)
        let value = SecretBytes(Self.random(32))
        let psk: (PreSharedKeyID) throws -> SecretBytes = { id in
            guard case .external(name) = id.kind else { throw MLSGroupError.unknownPSK }
            return value
        }
        let proposal = try bob.proposePSK(try bob.externalPSKID(name, randomness: Self.random), randomness: Self.random)
        _ = try alice.process(proposal)
        _ = try carol.process(proposal)
        // A member without the PSK cannot commit it: it is dropped.
        #expect(try alice.commit(randomness: Self.random).dropped.count == 1)
        let commit = try alice.commit(psk: psk, randomness: Self.random)
        #expect(commit.dropped.isEmpty)
        #expect(throws: MLSGroupError.unknownPSK) { try carol.process(commit.message) }
        alice = commit.group
        var others = [bob, carol]
        try Self.deliver(commit.message, to: &others, epoch: 3, committer: alice, psk: psk)

        // A resumption PSK of the previous epoch, by value, without a path.
        let resumption = try alice.resumptionPSKID(epoch: 2, randomness: Self.random)
        let second = try alice.commit(proposals: [.preSharedKey(PreSharedKeyProposal(psk: resumption))], includingPath: false, randomness: Self.random)
        guard case .publicMessage(let message) = second.message, case .commit(let c) = message.content.content else { Issue.record("unexpected message"); return }
        #expect(c.path == nil)
        try Self.deliver(second.message, to: &others, epoch: 4, committer: second.group)
        // A nonce of the wrong length is invalid.
        let short = PreSharedKeyID(kind: .external(pskID: name), nonce: [1, 2, 3])
        #expect(throws: MLSGroupError.invalidPSK) { try others[0].proposePSK(short, randomness: Self.random) }
    }

    @Test func aGroupContextExtensionsProposalReplacesTheExtensions() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let required = try RequiredCapabilities(extensionTypes: [], proposalTypes: [], credentialTypes: [.basic]).asExtension
        let proposal = try carol.proposeGroupContextExtensions([required], randomness: Self.random)
        _ = try alice.process(proposal)
        _ = try bob.process(proposal)
        let commit = try alice.commit(randomness: Self.random)
        alice = commit.group
        var others = [bob, carol]
        try Self.deliver(commit.message, to: &others, epoch: 3, committer: alice)
        #expect(alice.groupContext.extensions == [required] && others[1].groupContext.extensions == [required])

        // Extensions a member does not support are refused, by value and when proposed.
        let unknown = Extension(extensionType: 0xff01, extensionData: [])
        #expect(throws: MLSGroupError.unsupportedCapabilities) {
            try alice.commit(proposals: [.groupContextExtensions(GroupContextExtensionsProposal(extensions: [unknown]))], randomness: Self.random)
        }
        let x509 = try RequiredCapabilities(extensionTypes: [], proposalTypes: [], credentialTypes: [.x509]).asExtension
        let bad = try others[0].proposeGroupContextExtensions([x509], randomness: Self.random)
        _ = try alice.process(bad)
        #expect(try alice.commit(randomness: Self.random).dropped.count == 1)
        // Two in one commit are one too many.
        #expect(throws: MLSGroupError.multipleGroupContextExtensions) {
            try alice.commit(
                proposals: [.groupContextExtensions(GroupContextExtensionsProposal(extensions: [])),
                            .groupContextExtensions(GroupContextExtensionsProposal(extensions: [required]))],
                randomness: Self.random)
        }
    }

    @Test func aCommitWithoutAPathAddsAMember() throws {
        var (alice, bob, _) = try G.threeMembers()
        let daveBundle = try G.bundle("dave")
        let commit = try alice.commit(adding: [daveBundle.keyPackage], includingPath: false, randomness: Self.random)
        alice = commit.group
        #expect(try bob.process(commit.message) == .newEpoch(3))
        var dave = try MLSGroup(joining: try #require(commit.welcome), with: daveBundle)
        #expect(dave.epochAuthenticator == alice.epochAuthenticator && bob.epochAuthenticator == alice.epochAuthenticator)
        var others = [alice, bob]
        try G.send("joined without a path", from: &dave, to: &others)
        // A Remove needs a path: asking for none still sends one.
        let remove = try others[0].commit(removing: [dave.myLeaf], includingPath: false, randomness: Self.random)
        guard case .publicMessage(let m) = remove.message, case .commit(let c) = m.content.content else { Issue.record("unexpected message"); return }
        #expect(c.path != nil)
    }

    @Test func aLateMessageOfThePreviousEpochDecryptsWithinTheWindowOnly() throws {
        var (alice, bob, carol) = try G.threeMembers()
        bob.policy.pastEpochsKept = 1
        let late = try alice.encrypt(Array("sent in epoch 2".utf8), randomness: Self.random)
        let later = try alice.encrypt(Array("also epoch 2".utf8), randomness: Self.random)
        let first = try alice.commit(randomness: Self.random)
        alice = first.group
        #expect(try bob.process(first.message) == .newEpoch(3))
        #expect(try carol.process(first.message) == .newEpoch(3))
        // Bob keeps epoch 2's keys: the late message decrypts, once.
        #expect(try bob.process(.privateMessage(late)) == .application(
            sender: alice.myLeaf, data: Array("sent in epoch 2".utf8), authenticatedData: [], epoch: 2))
        #expect(throws: SecretTreeError.generationAlreadyUsed(0)) { try bob.process(.privateMessage(late)) }
        // Carol, with the default policy, keeps nothing.
        #expect(throws: MLSGroupError.pastEpochNotKept(epoch: 2)) { try carol.process(.privateMessage(late)) }
        // The window survives a save and restore.
        bob = try MLSGroup(savedState: try bob.savedState(), credentialValidator: nil, proposalApprover: nil)
        // One epoch later, epoch 2 is out of the window.
        let second = try alice.commit(randomness: Self.random)
        #expect(try bob.process(second.message) == .newEpoch(4))
        #expect(throws: MLSGroupError.pastEpochNotKept(epoch: 2)) { try bob.process(.privateMessage(later)) }
    }

    @Test func theCommitterDropsInvalidAndConflictingCachedProposals() throws {
        var (alice, bob, carol) = try G.threeMembers()
        // Bob proposes an Update, Carol a Remove of Bob: the Remove is preferred.
        let update = try bob.proposeUpdate(randomness: Self.random)
        let remove = try carol.proposeRemove(bob.myLeaf, randomness: Self.random)
        // Bob and Carol both propose adding Dave's one key package: one Add is kept.
        let dave = try G.bundle("dave")
        let addByBob = try bob.proposeAdd(dave.keyPackage, randomness: Self.random)
        let addByCarol = try carol.proposeAdd(dave.keyPackage, randomness: Self.random)
        var references: [[UInt8]] = []
        for message in [update, remove, addByBob, addByCarol] {
            guard case .proposal(let reference) = try alice.process(message) else { Issue.record("not a proposal"); return }
            references.append(reference)
        }
        for message in [update, addByBob] { _ = try carol.process(message) }
        _ = try bob.process(remove)
        let commit = try alice.commit(randomness: Self.random)
        #expect(commit.dropped == [references[0], references[3]])
        alice = commit.group
        #expect(try carol.process(commit.message) == .newEpoch(3))
        #expect(try bob.process(commit.message) == .removed)
        #expect(alice.epochAuthenticator == carol.epochAuthenticator && alice.members.count == 3)
        _ = try MLSGroup(joining: try #require(commit.welcome), with: dave)

        // An Add by value of a client already in the group makes the commit throw.
        #expect(throws: MLSGroupError.duplicateAdd) { try alice.commit(adding: [dave.keyPackage], randomness: Self.random) }
    }

    /// A validator accepting basic credentials whose identity is not "mallory".
    struct NoMallory: CredentialValidator {
        struct Refused: Error {}
        func validate(_ credential: Credential, signatureKey: SignaturePublicKey) throws {
            guard case .basic(let identity) = credential, identity != Array("mallory".utf8) else { throw Refused() }
        }
    }

    @Test func credentialsPassTheGroupsValidator() throws {
        var (alice, bob, _) = try G.threeMembers()
        alice.credentialValidator = NoMallory()
        bob.credentialValidator = NoMallory()
        let mallory = try G.bundle("mallory")
        #expect(throws: NoMallory.Refused.self) { try alice.commit(adding: [mallory.keyPackage], randomness: Self.random) }
        // Proposed by a member without the validator, refused on receipt by one with it.
        var permissive = try G.threeMembers()
        let proposal = try permissive.carol.proposeAdd(mallory.keyPackage, randomness: Self.random)
        permissive.alice.credentialValidator = NoMallory()
        #expect(throws: NoMallory.Refused.self) { try permissive.alice.process(proposal) }
        // An external joiner named mallory is refused too.
        let joined = try MLSGroup.joinByExternalCommit(
            groupInfo: try bob.groupInfo(externalPub: true), credential: .basic(identity: Array("mallory".utf8)),
            capabilities: MessageFixtures.capabilities, signer: try G.signer(), randomness: Self.random)
        bob.policy.acceptsExternalCommits = true
        #expect(throws: NoMallory.Refused.self) { try bob.process(joined.message) }
    }

    /// Section 12.4.2: once a ReInit is committed the group sends nothing and takes no
    /// proposal or commit: a later commit cannot undo the lock.
    @Test func aCommittedReInitEndsTheGroupForGood() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let reInit = ReInitProposal(groupID: Array("next".utf8), cipherSuite: alice.groupContext.cipherSuite, extensions: [])
        let commit = try alice.commit(proposals: [.reInit(reInit)], randomness: Self.random)
        alice = commit.group
        #expect(try bob.process(commit.message) == .newEpoch(3))
        #expect(bob.reInit == reInit)
        #expect(try carol.process(commit.message) == .newEpoch(3))
        // A member that ignores the lock (here: alice's state with it cleared) sends a commit
        // of the new epoch; bob's ended group refuses it, and keeps the lock.
        var rogue = alice
        rogue.reInit = nil
        let late = try rogue.commit(randomness: Self.random)
        #expect(throws: MLSGroupError.groupReinitialized) { try bob.process(late.message) }
        #expect(throws: MLSGroupError.groupReinitialized) { try alice.proposeUpdate(randomness: Self.random) }
        #expect(throws: MLSGroupError.groupReinitialized) { try bob.commit(randomness: Self.random) }
        #expect(bob.reInit == reInit)
    }

    @Test func anExternalSendersProposalIsCommitted() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let serverSigner = try G.signer()
        let server = ExternalSender(
            signatureKey: SignaturePublicKeyIn(bytes: serverSigner.publicKey.rawRepresentation), credential: .basic(identity: Array("server".utf8)))
        let commit = try alice.commit(
            proposals: [.groupContextExtensions(GroupContextExtensionsProposal(extensions: [try ExternalSender.extensionOf([server])]))],
            randomness: Self.random)
        alice = commit.group
        var others = [bob, carol]
        try Self.deliver(commit.message, to: &others, epoch: 3, committer: alice)
        (bob, carol) = (others[0], others[1])
        // The server proposes removing Carol; Bob commits it.
        let remove = try MLSGroup.externalProposal(
            .remove(RemoveProposal(removed: carol.myLeaf.value)), groupContext: bob.groupContext, senderIndex: 0, signer: serverSigner)
        _ = try alice.process(remove)
        _ = try bob.process(remove)
        let second = try bob.commit(randomness: Self.random)
        #expect(try alice.process(second.message) == .newEpoch(4))
        #expect(alice.members.count == 2)
        // A sender index the extension does not have is refused.
        let stranger = try MLSGroup.externalProposal(
            .remove(RemoveProposal(removed: 0)), groupContext: alice.groupContext, senderIndex: 3, signer: serverSigner)
        #expect(throws: MLSGroupError.unknownExternalSender(3)) { try alice.process(stranger) }
    }
}
