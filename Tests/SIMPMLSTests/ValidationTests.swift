import SIMPMLS
import Testing

/// Decoded values become usable only through their checks: `KeyPackageIn.validate` (RFC 9420
/// 10.1), leaf node signatures (7.3), `GroupInfoIn.verify` (12.4.3.1), membership tags (6.2),
/// transcript hashes (8.2).
@Suite struct ValidationTests {
    let suite = MessageFixtures.suite

    @Test func aSignedKeyPackageValidates() throws {
        let wire = try MessageFixtures.keyPackage()
        let package = try wire.validate(suite: suite)
        #expect(package.signatureKey == (try MessageFixtures.signer(1)).publicKey)
        #expect(package.initKey == (try MessageFixtures.hpkeKey(2)).publicKey)
        #expect(package.encryptionKey == (try MessageFixtures.hpkeKey(3)).publicKey)
        #expect(try package.mlsEncoded() == (try wire.mlsEncoded()))
        #expect(try package.reference().count == 32)
        #expect(package.credential == .basic(identity: Array("alice".utf8)))
        // As a message on the wire, and back.
        let message = try MLSMessage.keyPackage(wire).mlsEncoded()
        #expect(try MLSMessage(mlsDecoding: message) == .keyPackage(wire))
    }

    @Test func aKeyPackageWithAChangedSignatureOrFieldDoesNotValidate() throws {
        let wire = try MessageFixtures.keyPackage()
        var badSignature = wire
        badSignature.signature[0] ^= 1
        #expect(throws: MLSCryptoError.invalidSignature) { try badSignature.validate(suite: suite) }
        var changedExtension = wire
        changedExtension.extensions = [Extension(extensionType: 0xF000, extensionData: [])]
        #expect(throws: MLSCryptoError.invalidSignature) { try changedExtension.validate(suite: suite) }
        var badLeaf = wire
        badLeaf.leafNode.signature[5] ^= 0x80
        #expect(throws: MLSCryptoError.invalidSignature) { try badLeaf.validate(suite: suite) }
        var otherIdentity = wire
        otherIdentity.leafNode.credential = .basic(identity: Array("mallory".utf8))
        #expect(throws: MLSCryptoError.invalidSignature) { try otherIdentity.validate(suite: suite) }
    }

    @Test func aKeyPackageSignedByAnotherKeyThanItsLeafsDoesNotValidate() throws {
        let leaf = try MessageFixtures.leafNode(signer: try MessageFixtures.signer(1), encryptionKey: try MessageFixtures.hpkeKey(3).publicKey)
        let package = try MessageFixtures.keyPackage(
            signer: try MessageFixtures.signer(9), initKey: try MessageFixtures.hpkeKey(2).publicKey, leafNode: leaf)
        #expect(throws: MLSCryptoError.invalidSignature) { try package.validate(suite: suite) }
    }

    @Test func aKeyPackageOfAnotherSuiteDoesNotValidate() throws {
        let wire = try MessageFixtures.keyPackage()
        #expect(throws: MLSValidationError.cipherSuiteMismatch(expected: CipherSuiteID(3), got: CipherSuiteID(1))) {
            try wire.validate(suite: .x25519ChaCha20Poly1305SHA256Ed25519)
        }
    }

    @Test func aKeyPackagesLeafMustComeFromAKeyPackage() throws {
        let signer = try MessageFixtures.signer(1)
        let group = LeafNodeTBS.Group(groupID: [1], leafIndex: 0)
        let leaf = try MessageFixtures.leafNode(
            signer: signer, encryptionKey: try MessageFixtures.hpkeKey(3).publicKey, source: .update, group: group)
        let package = try MessageFixtures.keyPackage(signer: signer, initKey: try MessageFixtures.hpkeKey(2).publicKey, leafNode: leaf)
        #expect(throws: MLSValidationError.wrongLeafNodeSource(expected: .keyPackage, got: .update)) {
            try package.validate(suite: suite)
        }
    }

    @Test func aKeyPackagesInitKeyMustDifferFromItsEncryptionKey() throws {
        let signer = try MessageFixtures.signer(1)
        let key = try MessageFixtures.hpkeKey(3).publicKey
        let leaf = try MessageFixtures.leafNode(signer: signer, encryptionKey: key)
        let package = try MessageFixtures.keyPackage(signer: signer, initKey: key, leafNode: leaf)
        #expect(throws: MLSValidationError.initKeyIsEncryptionKey) { try package.validate(suite: suite) }
    }

    @Test func aKeyPackageWhoseKeysAreNotKeysDoesNotValidate() throws {
        let signer = try MessageFixtures.signer(1)
        var leaf = try MessageFixtures.leafNode(signer: signer, encryptionKey: try MessageFixtures.hpkeKey(3).publicKey)
        var package = try MessageFixtures.keyPackage(signer: signer, initKey: try MessageFixtures.hpkeKey(2).publicKey, leafNode: leaf)
        package.initKey = HPKEPublicKeyIn(bytes: [1, 2, 3])
        package.signature = try suite.signWithLabel(signer, label: KeyPackageTBS.label, content: try package.toBeSigned.mlsEncoded())
        #expect(throws: MLSCryptoError.self) { try package.validate(suite: suite) }
        leaf.signatureKey = SignaturePublicKeyIn(bytes: [])
        package.leafNode = leaf
        #expect(throws: MLSCryptoError.invalidKey("Ed25519 public key must be 32 bytes")) { try package.validate(suite: suite) }
    }

    @Test func anUpdateLeafIsSignedForItsGroupAndLeaf() throws {
        let signer = try MessageFixtures.signer(4)
        let group = LeafNodeTBS.Group(groupID: Array("g".utf8), leafIndex: 3)
        let leaf = try MessageFixtures.leafNode(
            signer: signer, encryptionKey: try MessageFixtures.hpkeKey(5).publicKey, source: .commit(parentHash: [7]), group: group)
        #expect(try leaf.verifySignature(suite: suite, group: group) == signer.publicKey)
        #expect(throws: MLSCryptoError.invalidSignature) {
            try leaf.verifySignature(suite: suite, group: LeafNodeTBS.Group(groupID: Array("g".utf8), leafIndex: 4))
        }
        #expect(throws: MLSCryptoError.invalidSignature) {
            try leaf.verifySignature(suite: suite, group: LeafNodeTBS.Group(groupID: Array("h".utf8), leafIndex: 3))
        }
        #expect(throws: MLSValidationError.leafNodeNeedsGroup) { try leaf.verifySignature(suite: suite, group: nil) }
        let packageLeaf = try MessageFixtures.keyPackage().leafNode
        #expect(try packageLeaf.verifySignature(suite: suite, group: nil) == (try MessageFixtures.signer(1)).publicKey)
        #expect(throws: MLSValidationError.keyPackageLeafInGroup) { try packageLeaf.verifySignature(suite: suite, group: group) }
    }

    func groupInfo(signer: SignaturePrivateKey, tree: RatchetTree?) throws -> GroupInfoIn {
        let extensions = try tree.map { [Extension(extensionType: RatchetTree.extensionType, extensionData: try $0.mlsEncoded())] } ?? []
        var info = GroupInfoIn(
            groupContext: MessageFixtures.groupContext, extensions: extensions, confirmationTag: [UInt8](repeating: 3, count: 32),
            signer: 0, signature: [])
        info.signature = try suite.signWithLabel(signer, label: GroupInfoTBS.label, content: try info.toBeSigned.mlsEncoded())
        return info
    }

    @Test func aGroupInfoVerifiesUnderItsSignersKeyOnly() throws {
        let signer = try MessageFixtures.signer(1)
        let tree = try RatchetTree(nodes: [.leaf(try MessageFixtures.keyPackage().leafNode)])
        let wire = try groupInfo(signer: signer, tree: tree)
        let info = try wire.verify(with: signer.publicKey, suite: suite)
        #expect(info.groupContext == MessageFixtures.groupContext)
        #expect(try wire.ratchetTree() == tree)
        #expect(try MLSMessage(mlsDecoding: try MLSMessage.groupInfo(wire).mlsEncoded()) == .groupInfo(wire))
        #expect(throws: MLSCryptoError.invalidSignature) { try wire.verify(with: try MessageFixtures.signer(2).publicKey, suite: suite) }
        var changed = wire
        changed.signer = 1
        #expect(throws: MLSCryptoError.invalidSignature) { try changed.verify(with: signer.publicKey, suite: suite) }
        #expect(throws: MLSValidationError.self) { try wire.verify(with: signer.publicKey, suite: .x25519ChaCha20Poly1305SHA256Ed25519) }
        #expect(try groupInfo(signer: signer, tree: nil).ratchetTree() == nil)
        var twoTrees = wire
        twoTrees.extensions += wire.extensions
        #expect(throws: MLSDecodingError.self) { try twoTrees.ratchetTree() }
    }

    @Test func theMembershipTagIsTheMACOfTheContentWithItsContext() throws {
        let content = FramedContent(groupID: MessageFixtures.groupContext.groupID, epoch: 7, sender: .member(leafIndex: 2),
                                    authenticatedData: [1], content: .proposal(.remove(RemoveProposal(removed: 1))))
        var message = PublicMessage(content: content, auth: FramedContentAuthData(signature: [9], confirmationTag: nil), membershipTag: nil)
        let key = [UInt8](repeating: 0x11, count: 32)
        message.membershipTag = suite.mac(key: key, data: try message.membershipTagInput(context: MessageFixtures.groupContext))
        try message.verifyMembershipTag(membershipKey: key, context: MessageFixtures.groupContext, suite: suite)
        #expect(throws: MLSValidationError.invalidMembershipTag) {
            try message.verifyMembershipTag(membershipKey: [UInt8](repeating: 0x12, count: 32), context: MessageFixtures.groupContext, suite: suite)
        }
        var otherContext = MessageFixtures.groupContext
        otherContext.epoch += 1
        #expect(throws: MLSValidationError.invalidMembershipTag) {
            try message.verifyMembershipTag(membershipKey: key, context: otherContext, suite: suite)
        }
    }

    @Test func framedContentIsSignedWithTheContextExactlyForMembersAndNewMemberCommits() throws {
        let signer = try MessageFixtures.signer(6)
        let content = FramedContent(groupID: [1], epoch: 7, sender: .member(leafIndex: 0), authenticatedData: [],
                                    content: .application([5]))
        let authenticated = AuthenticatedContent(wireFormat: .privateMessage, content: content,
                                                 auth: FramedContentAuthData(signature: [], confirmationTag: nil))
        var signed = authenticated
        let tbs = FramedContentTBS(wireFormat: .privateMessage, content: content, context: MessageFixtures.groupContext)
        signed.auth.signature = try suite.signWithLabel(signer, label: FramedContentTBS.label, content: try tbs.mlsEncoded())
        _ = try signed.signedContent(context: MessageFixtures.groupContext).verify(with: signer.publicKey, suite: suite)
        #expect(throws: MLSEncodingError.self) { try signed.signedContent(context: nil) }
        var external = signed
        external.content.sender = .external(senderIndex: 0)
        #expect(throws: MLSEncodingError.self) { try external.signedContent(context: MessageFixtures.groupContext) }
        #expect(throws: MLSCryptoError.invalidSignature) {
            try external.signedContent(context: nil).verify(with: signer.publicKey, suite: suite)
        }
        #expect(try signed.proposalReference(suite: suite).count == 32)
    }

    @Test func transcriptHashesNeedACommit() throws {
        let content = FramedContent(groupID: [1], epoch: 7, sender: .member(leafIndex: 0), authenticatedData: [], content: .application([5]))
        let notACommit = AuthenticatedContent(wireFormat: .publicMessage, content: content,
                                              auth: FramedContentAuthData(signature: [], confirmationTag: nil))
        #expect(throws: MLSValidationError.notACommit) { try TranscriptHashes.after(notACommit, interimBefore: [], suite: suite) }
    }
}
