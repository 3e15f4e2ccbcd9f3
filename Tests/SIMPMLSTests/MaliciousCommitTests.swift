import Foundation
@testable import SIMPMLS
import Testing

/// What a malicious delivery service can do with commits, against one member's known state
/// (issue 44, part 2; docs/E2EE.md, Part 3, "What a malicious server can do"): hand a commit
/// again, hand commits out of order, hand a second commit for an epoch the member already left,
/// or alter a commit. Each is refused by a check of RFC 9420 and leaves the state as it was
/// (section 12.4.2, "On any error the state is unchanged"): the genuine commits still process.
@Suite struct MaliciousCommitTests {
    typealias G = GroupTests

    /// `message` (a PublicMessage) with its membership tag made again by `sender`, a member of
    /// its epoch: what an insider who holds the epoch's membership key could send.
    static func retagged(_ message: PublicMessage, by sender: MLSGroup) throws -> MLSMessage {
        let content = AuthenticatedContent(wireFormat: .publicMessage, content: message.content, auth: message.auth)
        return .publicMessage(try sender.protection.protect(content))
    }

    static func publicMessage(_ message: MLSMessage) throws -> PublicMessage {
        guard case .publicMessage(let m) = message else { throw MLSGroupError.unsupportedContent }
        return m
    }

    /// Section 12.4.2: a commit's epoch must be the group's current one. A commit applied once
    /// is of the epoch before: handed again, it is refused and changes nothing.
    @Test func aCommitAppliedOnceIsRefusedWhenHandedAgain() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let update = try bob.commit(randomness: G.random)
        bob = update.group
        #expect(try alice.process(update.message) == .newEpoch(3))
        let before = alice.epochAuthenticator
        #expect(throws: MessageProtectionError.wrongEpoch(expected: 3, got: 2)) { try alice.process(update.message) }
        #expect(alice.epoch == 3 && alice.epochAuthenticator == before && before == bob.epochAuthenticator)
        // A replay with its epoch changed to the current one no longer carries a valid
        // membership tag (section 6.2: the tag covers the epoch; the server has no membership key).
        var reframed = try Self.publicMessage(update.message)
        reframed.content.epoch = 3
        #expect(throws: MLSValidationError.invalidMembershipTag) { try alice.process(.publicMessage(reframed)) }
        #expect(alice.epoch == 3 && alice.epochAuthenticator == before)
        #expect(try carol.process(update.message) == .newEpoch(3))
        var others = [alice, carol]
        try G.send("after the replay", from: &bob, to: &others)
    }

    /// Commits handed out of order: the later one is of an epoch the member is not in yet, and
    /// is refused (section 12.4.2); in order, both apply.
    @Test func commitsHandedOutOfOrderAreRefusedUntilTheirTurn() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let first = try alice.commit(randomness: G.random)
        alice = first.group
        let second = try alice.commit(randomness: G.random)
        alice = second.group
        let before = carol.epochAuthenticator
        #expect(throws: MessageProtectionError.wrongEpoch(expected: 2, got: 3)) { try carol.process(second.message) }
        #expect(carol.epoch == 2 && carol.epochAuthenticator == before)
        #expect(try carol.process(first.message) == .newEpoch(3))
        #expect(try carol.process(second.message) == .newEpoch(4))
        #expect(try bob.process(first.message) == .newEpoch(3))
        #expect(try bob.process(second.message) == .newEpoch(4))
        #expect(carol.epochAuthenticator == alice.epochAuthenticator && bob.epochAuthenticator == alice.epochAuthenticator)
        var others = [bob, carol]
        try G.send("in order", from: &alice, to: &others)
    }

    /// Two commits made on one epoch (bob's and carol's Updates on epoch 2): a member that
    /// applied one refuses the other, whoever hands it, and stays in the epoch it chose. A
    /// server that hands the two to different members splits them into two groups that read
    /// nothing of each other: a split the members see, never a silent one.
    @Test func aSecondCommitForAnEpochAlreadyLeftIsRefused() throws {
        var (alice, bob, carol) = try G.threeMembers()
        let fromBob = try bob.commit(randomness: G.random)
        let fromCarol = try carol.commit(randomness: G.random)
        #expect(try alice.process(fromBob.message) == .newEpoch(3))
        let chosen = alice.epochAuthenticator
        #expect(throws: MessageProtectionError.wrongEpoch(expected: 3, got: 2)) { try alice.process(fromCarol.message) }
        #expect(alice.epoch == 3 && alice.epochAuthenticator == chosen)
        // carol's commit lost: she takes bob's, and all three are in one epoch.
        let split = fromCarol.group
        #expect(try carol.process(fromBob.message) == .newEpoch(3))
        bob = fromBob.group
        #expect(bob.epochAuthenticator == chosen && carol.epochAuthenticator == chosen)
        var others = [bob, carol]
        try G.send("one group", from: &alice, to: &others)
        // Had the server handed carol's commit as the winner to carol alone: another epoch 3,
        // whose messages alice cannot open (their sender data does not decrypt), nor the reverse.
        #expect(split.epoch == 3 && split.epochAuthenticator != chosen)
        var branch = split
        let fromSplit = try branch.encrypt(Array("from the other branch".utf8), randomness: G.random)
        #expect(throws: MessageProtectionError.senderDataDecryptionFailed) { try alice.process(.privateMessage(fromSplit)) }
        let fromAlice = try alice.encrypt(Array("from alice".utf8), randomness: G.random)
        #expect(throws: MessageProtectionError.senderDataDecryptionFailed) { try branch.process(.privateMessage(fromAlice)) }
        #expect(alice.epochAuthenticator == chosen)
    }

    /// A commit altered in transit: its membership tag (section 6.2), its signature (6.1) or its
    /// confirmation tag (the last two by a member who can make the membership tag again,
    /// section 12.4.2: "Verify that the confirmation_tag ... is equal to the MAC"). Each is
    /// refused with its own error, before anything changes; the genuine commit then applies.
    @Test func aCommitWithAWrongTagOrSignatureIsRefused() throws {
        var (alice, bob, _) = try G.threeMembers()
        let update = try bob.commit(randomness: G.random)
        let genuine = try Self.publicMessage(update.message)
        let before = alice.epochAuthenticator

        var membership = genuine
        var tag = try #require(membership.membershipTag)
        tag[0] ^= 1
        membership.membershipTag = tag
        #expect(throws: MLSValidationError.invalidMembershipTag) { try alice.process(.publicMessage(membership)) }

        var signature = genuine
        signature.auth.signature[0] ^= 1
        #expect(throws: MLSValidationError.invalidMembershipTag) { try alice.process(.publicMessage(signature)) }
        #expect(throws: MLSCryptoError.invalidSignature) { try alice.process(try Self.retagged(signature, by: bob)) }

        var confirmation = genuine
        var confirmationTag = try #require(confirmation.auth.confirmationTag)
        confirmationTag[confirmationTag.count - 1] ^= 1
        confirmation.auth.confirmationTag = confirmationTag
        #expect(throws: MLSValidationError.invalidMembershipTag) { try alice.process(.publicMessage(confirmation)) }
        #expect(throws: MLSGroupError.invalidConfirmationTag) { try alice.process(try Self.retagged(confirmation, by: bob)) }

        #expect(alice.epoch == 2 && alice.epochAuthenticator == before)
        #expect(try alice.process(update.message) == .newEpoch(3))
        bob = update.group
        #expect(alice.epochAuthenticator == bob.epochAuthenticator)
    }
}
