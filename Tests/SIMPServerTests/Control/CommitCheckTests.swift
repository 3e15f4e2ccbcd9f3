import Foundation
@testable import SIMPServer
import SIMPCore
import SIMPMLS
import SIMPTestSupport
import Testing

/// What the server reads of a submitted commit (`UncheckedCommit`; docs/E2EE.md, Part 3, "What
/// the server reads of a commit"), on real SIMPMLS messages: a member's public commit framed on
/// the epoch it is submitted for passes, with Welcomes that decode; everything else is
/// `INVALID_COMMIT`. The framing fields are changed on a real commit where SIMPMLS would not make
/// such a one: the server cannot check a signature, so it does not need one to hold.
@Suite struct CommitCheckTests {
    static let suite = KeyFixtures.suite

    /// A group of alice's phone at epoch 0, and a commit on it adding `adding` (bob's desk), with its Welcome.
    struct Made {
        var group: MLSGroup
        let groupID: [UInt8]
        let commit: [UInt8]
        let welcome: [UInt8]
    }

    static func made(policy: MLSGroupPolicy = MLSGroupPolicy(), adding: [String] = ["bob/desk"]) throws -> Made {
        let groupID = KeyFixtures.random(16)
        var group = try MLSGroup.create(groupID: groupID, suite: suite, credential: .basic(identity: Array("alice/phone".utf8)),
                                        capabilities: KeyFixtures.capabilities, lifetime: Lifetime(notBefore: 0, notAfter: .max),
                                        signer: try KeyFixtures.deviceSigner(), randomness: KeyFixtures.random)
        group.policy = policy
        let packages = try adding.map { device in
            try MLSKeyPackageBundle(suite: suite, credential: .basic(identity: Array(device.utf8)),
                                    capabilities: KeyFixtures.capabilities, lifetime: Lifetime(notBefore: 0, notAfter: .max),
                                    signer: try KeyFixtures.deviceSigner(), randomness: KeyFixtures.random).keyPackage
        }
        let output = try group.commit(adding: packages, randomness: KeyFixtures.random)
        return Made(group: group, groupID: groupID, commit: try output.message.mlsEncoded(),
                    welcome: try MLSMessage.welcome(try #require(output.welcome)).mlsEncoded())
    }

    /// `added`: how many devices the submit lists; by default one with a Welcome, none without.
    func check(_ commit: [UInt8], epoch: UInt64 = 0, welcome: [UInt8]? = nil, added: Int? = nil) -> Result<CommitFraming, UncheckedCommit.Problem> {
        let listed = added ?? (welcome == nil ? 0 : 1)
        return Result { () throws(UncheckedCommit.Problem) in try UncheckedCommit(commit: commit, welcome: welcome, added: listed).checked(epoch: epoch) }
    }

    func reason(_ result: Result<CommitFraming, UncheckedCommit.Problem>) -> String? {
        if case .failure(let problem) = result { problem.reason } else { nil }
    }

    /// The real commit with its framing changed (its signature then no longer holds).
    func reframed(_ commit: [UInt8], _ change: (inout PublicMessage) -> Void) throws -> [UInt8] {
        guard case .publicMessage(var message) = try MLSMessage(mlsDecoding: commit) else { throw UncheckedCommit.Problem(reason: "not public") }
        change(&message)
        return try MLSMessage.publicMessage(message).mlsEncoded()
    }

    @Test func aMembersPublicCommitOnItsEpochWithItsWelcomeIsTakenWithItsGroup() throws {
        let made = try Self.made()
        let framing = try check(made.commit, epoch: 0, welcome: made.welcome).get()
        #expect(framing.groupID == made.groupID && framing.epoch == 0 && framing.leaf == 0)
        // The hand-made framing the integration tests and conformance checks use passes too.
        let handMade = try check(MLSFraming.commit(group: made.groupID, epoch: 7, leaf: 3), epoch: 7, welcome: MLSFraming.welcome()).get()
        #expect(handMade.groupID == made.groupID && handMade.epoch == 7 && handMade.leaf == 3)
    }

    @Test func aCommitFramedOnAnotherEpochIsRefused() throws {
        let made = try Self.made()
        let problem = try #require(reason(check(made.commit, epoch: 1)))
        #expect(problem.contains("framed on epoch 0") && problem.contains("epoch 1"), "\(problem)")
        let later = try reframed(made.commit) { $0.content.epoch = 5 }
        #expect(reason(check(later, epoch: 0)) != nil)
        #expect((try? check(later, epoch: 5).get())?.epoch == 5)
    }

    @Test func whatIsNotAPublicMessageIsRefused() throws {
        var made = try Self.made()
        // A commit as a PrivateMessage (a policy SIMP's client does not use).
        let secret = try Self.made(policy: MLSGroupPolicy(handshakeWireFormat: .privateMessage))
        #expect(reason(check(secret.commit))?.contains("mls_private_message") == true)
        // An application message, a Welcome, a KeyPackage, a GroupInfo.
        let application = try MLSMessage.privateMessage(try made.group.encrypt(Array("hi".utf8), randomness: KeyFixtures.random)).mlsEncoded()
        #expect(reason(check(application))?.contains("mls_private_message") == true)
        #expect(reason(check(made.welcome))?.contains("mls_welcome") == true)
        let package = try MLSKeyPackageBundle(suite: Self.suite, credential: .basic(identity: Array("bob/desk".utf8)),
                                              capabilities: KeyFixtures.capabilities, lifetime: Lifetime(notBefore: 0, notAfter: .max),
                                              signer: try KeyFixtures.deviceSigner(), randomness: KeyFixtures.random)
        #expect(reason(check(try MLSMessage.keyPackage(package.keyPackage.wire).mlsEncoded()))?.contains("mls_key_package") == true)
        #expect(reason(check(try MLSMessage.groupInfo(try made.group.groupInfo()).mlsEncoded()))?.contains("mls_group_info") == true)
        // Bytes that are no MLSMessage, one cut short, one with a byte more.
        for bytes in [[1, 2, 3], Array(made.commit.dropLast()), made.commit + [0]] as [[UInt8]] {
            #expect(reason(check(bytes))?.contains("does not decode") == true)
        }
    }

    @Test func aPublicMessageThatIsNoCommitIsRefused() throws {
        var made = try Self.made()
        let carol = try MLSKeyPackageBundle(suite: Self.suite, credential: .basic(identity: Array("carol/desk".utf8)),
                                            capabilities: KeyFixtures.capabilities, lifetime: Lifetime(notBefore: 0, notAfter: .max),
                                            signer: try KeyFixtures.deviceSigner(), randomness: KeyFixtures.random)
        let proposal = try made.group.proposeAdd(carol.keyPackage, randomness: KeyFixtures.random)
        guard case .publicMessage = proposal else { Issue.record("the proposal is not public"); return }
        let encoded = try proposal.mlsEncoded()
        #expect(reason(check(encoded))?.contains("content type is proposal") == true)
        let application = try reframed(made.commit) { message in
            message.content.content = .application(Array("hi".utf8))
            message.auth.confirmationTag = nil
        }
        #expect(reason(check(application))?.contains("content type is application") == true)
    }

    @Test func aCommitFromAnyoneButAMemberOrAnExternalJoinerIsRefused() throws {
        let made = try Self.made()
        // A new member's commit without a path is no external commit (RFC 9420 section 12.4.3.2).
        let pathless = try reframed(MLSFraming.commit(group: made.groupID, epoch: 0)) { message in
            message.content.sender = .newMemberCommit
            message.membershipTag = nil
        }
        #expect(reason(check(pathless))?.contains("external commit has a path") == true)
        let bySender = try reframed(made.commit) { message in
            message.content.sender = .external(senderIndex: 0)
            message.membershipTag = nil
        }
        #expect(reason(check(bySender))?.contains("not member or new_member_commit") == true)
        // A member's leaf the server cannot check (it has no tree): any index passes a commit
        // without a path; one with a path was signed for its own leaf (LeafNodeTBS), so moved to
        // another index its leaf no longer verifies.
        let farLeaf = MLSFraming.commit(group: made.groupID, epoch: 0, leaf: 40_000)
        #expect((try? check(farLeaf).get())?.leaf == 40_000)
        let moved = try reframed(made.commit) { $0.content.sender = .member(leafIndex: 40_000) }
        #expect(reason(check(moved))?.contains("path leaf signature") == true)
    }

    /// A device rejoining by external commit (docs/E2EE.md, Part 8): its commit names no leaf (it
    /// takes the leftmost blank one, which only a member's tree shows), and its path leaf is read
    /// for the flow to compare with the device's certificate. The GroupInfo a commit carries is
    /// of the commit's group, at the epoch the commit leads to.
    @Test func anExternalCommitIsTakenWithItsPathLeafAndAGroupInfoMustBeOfTheNextEpoch() throws {
        let made = try Self.made()
        let carol = try KeyFixtures.deviceSigner()
        let joined = try MLSGroup.joinByExternalCommit(
            groupInfo: try made.group.groupInfo(externalPub: true), credential: .basic(identity: Array("carol/desk".utf8)),
            capabilities: KeyFixtures.capabilities, signer: carol, randomness: KeyFixtures.random)
        let commit = try joined.message.mlsEncoded()
        let epoch = made.group.epoch
        let framing = try check(commit, epoch: epoch).get()
        #expect(framing.leaf == nil && framing.groupID == made.groupID)
        #expect(framing.pathLeaf == .init(identity: Array("carol/desk".utf8), signatureKey: Array(carol.publicKey.rawRepresentation)))

        func withInfo(_ info: [UInt8]) -> Result<CommitFraming, UncheckedCommit.Problem> {
            Result { () throws(UncheckedCommit.Problem) in
                try UncheckedCommit(commit: commit, welcome: nil, added: 0, groupInfo: info).checked(epoch: epoch)
            }
        }
        let next = try MLSMessage.groupInfo(try joined.group.groupInfo(externalPub: true)).mlsEncoded()
        #expect((try? withInfo(next).get()) != nil, "the GroupInfo of the epoch the commit leads to")
        let same = try MLSMessage.groupInfo(try made.group.groupInfo(externalPub: true)).mlsEncoded()
        #expect(reason(withInfo(same))?.contains("not the epoch the commit leads to") == true)
        #expect(reason(withInfo(commit))?.contains("mls_group_info") == true)
        #expect(reason(withInfo(Array(next.dropLast())))?.contains("mls_group_info") == true)
    }

    @Test func aWelcomeThatDoesNotDecodeIsRefused() throws {
        let made = try Self.made()
        #expect(reason(check(made.commit, welcome: [0, 1, 0, 3, 0]))?.contains("the Welcome") == true)
        #expect(reason(check(made.commit, welcome: made.commit))?.contains("the Welcome") == true, "a commit is no Welcome")
        #expect(reason(check(made.commit, welcome: Array(made.welcome.dropLast()))) != nil)
    }

    /// A Welcome holds one EncryptedGroupSecrets per new member (RFC 9420 section 12.4.3.1):
    /// one whose count differs from the devices listed is refused (stored, it would replace
    /// their pending Welcomes with one some cannot join from).
    @Test func aWelcomeWhoseSecretsAreNotOnePerAddedDeviceIsRefused() throws {
        let two = try Self.made(adding: ["bob/desk", "carol/laptop"])
        #expect((try? check(two.commit, welcome: two.welcome, added: 2).get()) != nil)
        for listed in [1, 3, 128] {
            let problem = try #require(reason(check(two.commit, welcome: two.welcome, added: listed)), "\(listed)")
            #expect(problem.contains("holds 2 EncryptedGroupSecrets for \(listed) added devices"), "\(problem)")
        }
        // Hand-made: none for one device, one for three; three for three passes.
        let commit = MLSFraming.commit(group: two.groupID, epoch: 0)
        #expect(reason(check(commit, welcome: MLSFraming.welcome(secrets: 0), added: 1))?.contains("holds 0") == true)
        #expect(reason(check(commit, welcome: MLSFraming.welcome(), added: 3))?.contains("holds 1") == true)
        #expect((try? check(commit, welcome: MLSFraming.welcome(secrets: 3), added: 3).get()) != nil)
    }

    @Test func theCodeIsInvalidCommit() {
        #expect(UncheckedCommit.Problem(reason: "x").code == .invalidCommit)
        #expect(Simp_ErrorCode.invalidCommit.rawValue == 47)
    }
}
