import Foundation
@testable import SIMPMLS
import Testing

/// What a group keeps and whom it asks (issue 42, from the review; RFC 9420 sections 8, 8.4,
/// 9.2, 12.1.7, 12.2, 12.4.2, 12.4.3.1): no `joiner_secret` once the epoch is set up, past
/// epochs reduced to what late application messages need and forgettable, the application's
/// approval of committed proposals with their senders, an Update checked against the
/// extensions of its own commit, and the `psk_nonce` length of a Welcome.
@Suite struct GroupRetentionTests {
    typealias G = GroupTests
    static let random = GroupTests.random

    /// Whether `bytes` contains `needle` anywhere.
    static func contains(_ bytes: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= bytes.count else { return false }
        return (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    // MARK: 1. joiner_secret (sections 8, 9.2)

    @Test func theSavedStateHoldsNoJoinerSecret() throws {
        var alice = try G.create()
        let bobBundle = try G.bundle("bob")
        let commit = try alice.commit(adding: [bobBundle.keyPackage], randomness: Self.random)
        let welcome = try #require(commit.welcome)
        // The epoch's joiner_secret and welcome_secret, as the new member reads them.
        let decrypted = try welcome.decrypt(for: bobBundle.keyPackage, initPrivateKey: bobBundle.initPrivateKey, psk: MLSGroup.noExternalPSK)
        let joinerSecret = decrypted.groupSecrets.joinerSecret
        let welcomeSecret = try KeySchedule.welcomeSecret(suite: G.suite, joinerSecret: SecretBytes(joinerSecret), pskSecret: nil)
        #expect(joinerSecret.count == 32)
        let bob = try MLSGroup(joining: welcome, with: bobBundle)
        for state in [commit.group, bob] {
            let saved = try state.savedState()
            #expect(!Self.contains(saved, joinerSecret))
            #expect(!Self.contains(saved, welcomeSecret.bytes))
            // What the next epoch needs is kept: its init_secret.
            #expect(Self.contains(saved, state.epochSecrets.initSecret.bytes))
        }
        // The saved states still move on together.
        alice = try MLSGroup(savedState: try commit.group.savedState(), credentialValidator: nil, proposalApprover: nil)
        var restoredBob = try MLSGroup(savedState: try bob.savedState(), credentialValidator: nil, proposalApprover: nil)
        #expect(alice.epochAuthenticator == restoredBob.epochAuthenticator)
        let update = try alice.commit(randomness: Self.random)
        #expect(try restoredBob.process(update.message) == .newEpoch(2))
        #expect(update.group.epochAuthenticator == restoredBob.epochAuthenticator)
    }

    // MARK: 2. past epochs (sections 9.2, 12.4.2)

    @Test func lateMessagesReportTheirEpochUntilThePastIsForgotten() throws {
        var (alice, bob, carol) = try G.threeMembers()
        bob.policy.pastEpochsKept = 2
        let inEpoch2 = try alice.encrypt(Array("epoch 2".utf8), randomness: Self.random)
        let alsoInEpoch2 = try alice.encrypt(Array("epoch 2 again".utf8), randomness: Self.random)
        let membershipKey2 = bob.protection.membershipKey.bytes
        let first = try alice.commit(randomness: Self.random)
        alice = first.group
        #expect(try bob.process(first.message) == .newEpoch(3))
        _ = try carol.process(first.message)
        let inEpoch3 = try alice.encrypt(Array("epoch 3".utf8), randomness: Self.random)
        let second = try alice.commit(randomness: Self.random)
        alice = second.group
        #expect(try bob.process(second.message) == .newEpoch(4))
        #expect(bob.keptPastEpochs == [3, 2])
        // A past epoch keeps no membership key (only private application messages are late).
        #expect(!Self.contains(try bob.savedState(), membershipKey2))

        #expect(try bob.process(.privateMessage(inEpoch3)) == .application(
            sender: alice.myLeaf, data: Array("epoch 3".utf8), authenticatedData: [], epoch: 3))
        #expect(try bob.process(.privateMessage(inEpoch2)) == .application(
            sender: alice.myLeaf, data: Array("epoch 2".utf8), authenticatedData: [], epoch: 2))
        let current = try alice.encrypt(Array("epoch 4".utf8), randomness: Self.random)
        #expect(try bob.process(.privateMessage(current)) == .application(
            sender: alice.myLeaf, data: Array("epoch 4".utf8), authenticatedData: [], epoch: 4))

        bob.forgetPastEpochs()
        #expect(bob.keptPastEpochs.isEmpty)
        #expect(throws: MLSGroupError.pastEpochNotKept(epoch: 2)) { try bob.process(.privateMessage(alsoInEpoch2)) }
        // The policy stays: the next commit's ending epoch is kept again.
        let third = try alice.commit(randomness: Self.random)
        #expect(try bob.process(third.message) == .newEpoch(5))
        #expect(bob.keptPastEpochs == [4])
    }

    // MARK: 3. the application approves committed proposals (sections 12.1.8, 12.2)

    /// Records every proposal it is asked about and refuses those `refuses` says.
    final class Approver: MLSProposalApprover, @unchecked Sendable {
        let refuses: @Sendable (MLSCommittedProposal) -> Bool
        private let lock = NSLock()
        private var asked: [(MLSCommittedProposal, Sender)] = []

        init(refuses: @escaping @Sendable (MLSCommittedProposal) -> Bool = { _ in false }) { self.refuses = refuses }

        var seen: [(MLSCommittedProposal, Sender)] { lock.withLock { asked } }

        struct Refused: Error {}

        func approve(_ proposal: MLSCommittedProposal, committer: Sender) throws {
            lock.withLock { asked.append((proposal, committer)) }
            if refuses(proposal) { throw Refused() }
        }
    }

    @Test func theApplicationLearnsEachCommittedProposalsSenderAndMayRefuse() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let dave = try G.bundle("dave")
        let add = try carol.proposeAdd(dave.keyPackage, randomness: Self.random)
        guard case .proposal(let reference) = try alice.process(add) else { Issue.record("not cached"); return }
        _ = try bob.process(add)
        let commit = try alice.commit(removing: [carol.myLeaf], randomness: Self.random)
        #expect(commit.dropped.isEmpty)

        // Refused: Bob's application takes no Add proposed by Carol; the state is unchanged.
        let carolsLeaf = carol.myLeaf.value
        let refusing = Approver { $0.sender == .member(leafIndex: carolsLeaf) && $0.proposal.proposalType == .add }
        bob.proposalApprover = refusing
        #expect(throws: MLSGroupError.proposalRefused(.add, sender: .member(leafIndex: carol.myLeaf.value))) {
            try bob.process(commit.message)
        }
        #expect(bob.epoch == 2)

        // Accepted: each proposal is reported with its sender and how it came.
        let accepting = Approver()
        bob.proposalApprover = accepting
        #expect(try bob.process(commit.message) == .newEpoch(3))
        let seen = accepting.seen
        #expect(seen.count == 2)
        #expect(seen.allSatisfy { $0.1 == .member(leafIndex: alice.myLeaf.value) })
        let byReference = try #require(seen.first { $0.0.reference != nil })
        #expect(byReference.0.reference == reference && byReference.0.sender == .member(leafIndex: carol.myLeaf.value))
        guard case .add = byReference.0.proposal else { Issue.record("not the Add"); return }
        let byValue = try #require(seen.first { $0.0.reference == nil })
        #expect(byValue.0.sender == .member(leafIndex: alice.myLeaf.value)
            && byValue.0.proposal == .remove(RemoveProposal(removed: carol.myLeaf.value)))
        // The approver is carried into the next epoch.
        #expect(bob.proposalApprover != nil)

        // A committer whose application refuses a cached proposal leaves it out.
        alice.proposalApprover = refusing
        let dropping = try alice.commit(randomness: Self.random)
        #expect(dropping.dropped == [reference])
        guard case .publicMessage(let m) = dropping.message, case .commit(let c) = m.content.content else {
            Issue.record("unexpected message"); return
        }
        #expect(c.proposals.isEmpty && dropping.welcome == nil)
    }

    // MARK: 4. an Update against the extensions of its commit (sections 12.1.7, 12.2)

    static let extensionType: UInt16 = 0xff01

    /// Alice, Bob and Carol, whose leaves all support extension `extensionType`, at epoch 1.
    static func membersSupportingTheExtension() throws -> (alice: MLSGroup, bob: MLSGroup, carol: MLSGroup) {
        var capabilities = MessageFixtures.capabilities
        capabilities.extensions = [extensionType]
        func bundle(_ name: String) throws -> MLSKeyPackageBundle {
            try MLSKeyPackageBundle(
                suite: G.suite, credential: .basic(identity: Array(name.utf8)), capabilities: capabilities, lifetime: G.lifetime,
                signer: try G.signer(), randomness: random)
        }
        var alice = try MLSGroup.create(
            groupID: random(16), suite: G.suite, credential: .basic(identity: Array("alice".utf8)), capabilities: capabilities,
            lifetime: G.lifetime, signer: try G.signer(), randomness: random)
        let (bobBundle, carolBundle) = (try bundle("bob"), try bundle("carol"))
        let commit = try alice.commit(adding: [bobBundle.keyPackage, carolBundle.keyPackage], randomness: random)
        let welcome = try #require(commit.welcome)
        return (commit.group, try MLSGroup(joining: welcome, with: bobBundle), try MLSGroup(joining: welcome, with: carolBundle))
    }

    @Test func anUpdateMustSupportTheExtensionsItsCommitSets() throws {
        var (alice, bob, carol) = try Self.membersSupportingTheExtension()
        // Bob's Update drops the extension from his capabilities: valid in the current epoch,
        // which does not use it.
        var narrower = MessageFixtures.capabilities
        narrower.extensions = []
        let update = try bob.proposeUpdate(capabilities: narrower, randomness: Self.random)
        guard case .proposal(let reference) = try alice.process(update) else { Issue.record("not cached"); return }
        _ = try carol.process(update)
        let extensions = GroupContextExtensionsProposal(extensions: [Extension(extensionType: Self.extensionType, extensionData: [])])

        // A receiver refuses a commit with both: Bob would not support the new extension.
        let gce = Proposal.groupContextExtensions(extensions)
        let cached = try #require(carol.proposalCache.first { $0.reference == reference })
        let list = [
            try carol.resolved(cached),
            MLSGroup.ResolvedProposal(proposal: gce, sender: .member(leafIndex: 0), proposalOrRef: .proposal(gce), keyPackage: nil),
        ]
        #expect(throws: MLSGroupError.unsupportedCapabilities) { try carol.checkList(list, committer: .member(leafIndex: 0)) }
        // Without the extensions proposal the same Update is fine.
        try carol.checkList([list[0]], committer: .member(leafIndex: 0))

        // The committer leaves the Update out and keeps its extensions.
        let commit = try alice.commit(proposals: [gce], randomness: Self.random)
        #expect(commit.dropped == [reference])
        alice = commit.group
        #expect(try carol.process(commit.message) == .newEpoch(2))
        #expect(try bob.process(commit.message) == .newEpoch(2))
        #expect(carol.groupContext.extensions == extensions.extensions && bob.epochAuthenticator == alice.epochAuthenticator)
    }
}
