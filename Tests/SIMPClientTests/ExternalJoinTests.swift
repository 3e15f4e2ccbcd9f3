import SIMPMLS
import Testing

@testable import SIMPClient

/// Which external commits (a device rejoining, docs/E2EE.md Part 8) a member takes while it
/// catches up (`ConversationKeys.externalJoinProblem`): only one whose joiner's path leaf is a
/// device its user certifies now, under the key certified now. A revoked or replaced key, which
/// catching up admits for a member's commit made before the revocation, is refused here: an
/// external commit is signed by its joiner alone.
@Suite struct ExternalJoinTests {
    static func random(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }

    /// alice's phone's group at epoch 0, and bob's phone's external commit into it under `signer`.
    static func join(_ signer: SignaturePrivateKey) throws -> (member: MLSMessage, external: MLSMessage) {
        var group = try MLSGroup.create(
            groupID: random(16), suite: ConversationKeys.suite, credential: .basic(identity: Array("alice/phone".utf8)),
            capabilities: ConversationKeys.capabilities, lifetime: Lifetime(notBefore: 0, notAfter: .max),
            signer: try SignaturePrivateKey(rawRepresentation: random(32)), randomness: random)
        let joined = try MLSGroup.joinByExternalCommit(
            groupInfo: try group.groupInfo(externalPub: true), credential: .basic(identity: Array("bob/phone".utf8)),
            capabilities: ConversationKeys.capabilities, signer: signer, randomness: random)
        let update = try group.commit(randomness: random)
        return (update.message, joined.message)
    }

    @Test func anExternalCommitIsTakenOnlyUnderTheKeyCertifiedNow() throws {
        let bob = try SignaturePrivateKey(rawRepresentation: Self.random(32))
        let (member, external) = try Self.join(bob)
        let certified = [Array("bob/phone".utf8): Array(bob.publicKey.rawRepresentation)]
        #expect(ConversationKeys.externalJoinProblem(external, current: certified) == nil)
        // A key revoked since (another one certified under the name now), or a device with none.
        let replaced = [Array("bob/phone".utf8): Array(try SignaturePrivateKey(rawRepresentation: Self.random(32)).publicKey.rawRepresentation)]
        #expect(ConversationKeys.externalJoinProblem(external, current: replaced)?.contains("does not certify now") == true)
        #expect(ConversationKeys.externalJoinProblem(external, current: [:])?.contains("bob/phone") == true)
        // A member's commit is not judged here (MLS and the leaf checks judge it).
        #expect(ConversationKeys.externalJoinProblem(member, current: [:]) == nil)
    }
}
