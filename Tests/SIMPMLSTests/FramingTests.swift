import Foundation
import SIMPMLS
import Testing

/// Message protection (RFC 9420 section 6): what is accepted, and each refusal with its own
/// error, leaving the secret tree as it was.
@Suite struct FramingTests {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
    static let context = MessageFixtures.groupContext
    static let reuseGuard: [UInt8] = [1, 2, 3, 4]

    /// The keys of `context`'s epoch for a group of 4 leaves, nothing used yet.
    static func keys(_ context: GroupContext = context) throws -> MessageProtection {
        let tree = try SecretTree(
            suite: suite, encryptionSecret: SecretBytes([UInt8](repeating: 0x33, count: 32)), size: try #require(TreeSize(leafCount: 4)))
        return try MessageProtection(
            suite: suite, groupContext: context, membershipKey: SecretBytes([UInt8](repeating: 0x11, count: 32)),
            senderDataSecret: SecretBytes([UInt8](repeating: 0x22, count: 32)), secretTree: tree)
    }

    /// Leaf `i`'s signature key (seed `i`); leaves 1 and 2 are members.
    static func signer(_ leaf: UInt32) throws -> SignaturePrivateKey { try MessageFixtures.signer(UInt8(leaf)) }

    static func resolve(_ leaf: LeafIndex) throws -> SignaturePublicKey {
        guard leaf.value == 1 || leaf.value == 2 else { throw TestError.blankLeaf(leaf.value) }
        return try signer(leaf.value).publicKey
    }

    enum TestError: Error, Equatable { case blankLeaf(UInt32) }

    static func signed(
        _ content: MessageContent = .application(Array("hello".utf8)), from leaf: UInt32 = 1, wireFormat: WireFormat = .privateMessage,
        context: GroupContext = context, authenticatedData: [UInt8] = [9]
    ) throws -> AuthenticatedContent {
        let framed = FramedContent(
            groupID: context.groupID, epoch: context.epoch, sender: .member(leafIndex: leaf), authenticatedData: authenticatedData,
            content: content)
        return try AuthenticatedContent(
            signing: framed, wireFormat: wireFormat, context: context, signer: try signer(leaf), suite: suite,
            confirmationTag: content.contentType == .commit ? [UInt8](repeating: 7, count: 32) : nil)
    }

    static let remove = MessageContent.proposal(.remove(RemoveProposal(removed: 2)))

    // MARK: PrivateMessage

    @Test func aPrivateMessageUnprotectsToWhatWasSigned() throws {
        for suite in MLSCipherSuite.allCases {
            var context = Self.context
            context.cipherSuite = suite.id
            let tree = try SecretTree(suite: suite, encryptionSecret: SecretBytes([UInt8](repeating: 5, count: 32)), size: try #require(TreeSize(leafCount: 2)))
            var sender = try MessageProtection(
                suite: suite, groupContext: context, membershipKey: SecretBytes([UInt8](repeating: 6, count: 32)),
                senderDataSecret: SecretBytes([UInt8](repeating: 7, count: 32)), secretTree: tree)
            var receiver = sender
            for content in [MessageContent.application([1, 2, 3]), Self.remove] {
                let framed = FramedContent(groupID: context.groupID, epoch: context.epoch, sender: .member(leafIndex: 1), authenticatedData: [], content: content)
                let signed = try AuthenticatedContent(
                    signing: framed, wireFormat: .privateMessage, context: context, signer: try Self.signer(1), suite: suite, confirmationTag: nil)
                let message = try sender.protect(signed, paddingLength: 3, reuseGuard: Self.reuseGuard)
                let verified = try receiver.unprotect(message, signatureKey: Self.resolve)
                #expect(verified.authenticatedContent == signed)
            }
        }
    }

    @Test func ourSealingIsTheRFCsByHand() throws {
        // Section 6.3.1 and 6.3.2 step by step with the public primitives: the same bytes.
        var keys = try Self.keys()
        let signed = try Self.signed()
        let message = try keys.protect(signed, paddingLength: 5, reuseGuard: Self.reuseGuard)

        var tree = try Self.keys().secretTree
        let ratchet = try tree.nextKey(leaf: LeafIndex(1), type: .application)
        var nonce = ratchet.nonce.bytes
        for i in 0..<4 { nonce[i] ^= Self.reuseGuard[i] }
        var aad = TLSWriter()
        try aad.writeOpaque(Self.context.groupID)
        aad.writeUInt64(Self.context.epoch)
        try ContentType.application.encode(to: &aad)
        try aad.writeOpaque([9])
        let plaintext = try PrivateMessageContent(content: signed.content.content, auth: signed.auth, paddingLength: 5).encoded()
        let ciphertext = try Self.suite.seal(key: ratchet.key.bytes, nonce: nonce, aad: aad.bytes, plaintext: plaintext)
        #expect(message.ciphertext == ciphertext)

        let senderDataKey = try Self.suite.senderDataKeyAndNonce(
            senderDataSecret: SecretBytes([UInt8](repeating: 0x22, count: 32)), ciphertext: ciphertext)
        var senderAAD = TLSWriter()
        try senderAAD.writeOpaque(Self.context.groupID)
        senderAAD.writeUInt64(Self.context.epoch)
        try ContentType.application.encode(to: &senderAAD)
        let senderData = try Self.suite.open(
            key: senderDataKey.key.bytes, nonce: senderDataKey.nonce.bytes, aad: senderAAD.bytes, ciphertext: message.encryptedSenderData)
        #expect(try SenderData(mlsDecoding: senderData) == SenderData(leafIndex: 1, generation: 0, reuseGuard: Self.reuseGuard))
    }

    /// `message` with one byte of `field` changed.
    static func flipping(_ message: PrivateMessage, _ field: WritableKeyPath<PrivateMessage, [UInt8]>, at index: Int = -1) -> PrivateMessage {
        var changed = message
        let i = index >= 0 ? index : changed[keyPath: field].count - 1
        changed[keyPath: field][i] ^= 0x01
        return changed
    }

    @Test func aTamperedCiphertextIsRefusedAndBurnsNoKey() throws {
        var sender = try Self.keys()
        var receiver = try Self.keys()
        let message = try sender.protect(try Self.signed(), paddingLength: 0, reuseGuard: Self.reuseGuard)
        // The last byte is the AEAD tag's: the sample, so the sender data, is unchanged.
        #expect(throws: MessageProtectionError.contentDecryptionFailed) {
            try receiver.unprotect(Self.flipping(message, \.ciphertext), signatureKey: Self.resolve)
        }
        #expect(throws: MessageProtectionError.contentDecryptionFailed) {
            var other = message
            other.authenticatedData = [8]
            return try receiver.unprotect(other, signatureKey: Self.resolve)
        }
        // The genuine message still opens: the forged ones deleted nothing.
        #expect(try receiver.unprotect(message, signatureKey: Self.resolve).content.content == .application(Array("hello".utf8)))
    }

    @Test func tamperedSenderDataIsRefused() throws {
        var sender = try Self.keys()
        var receiver = try Self.keys()
        let message = try sender.protect(try Self.signed(), paddingLength: 0, reuseGuard: Self.reuseGuard)
        for changed in [
            Self.flipping(message, \.encryptedSenderData),
            Self.flipping(message, \.ciphertext, at: 0),  // the sample
        ] {
            #expect(throws: MessageProtectionError.senderDataDecryptionFailed) {
                try receiver.unprotect(changed, signatureKey: Self.resolve)
            }
        }
        var proposal = message
        proposal.contentType = .proposal  // in the sender data's AAD
        #expect(throws: MessageProtectionError.senderDataDecryptionFailed) { try receiver.unprotect(proposal, signatureKey: Self.resolve) }
        _ = try receiver.unprotect(message, signatureKey: Self.resolve)
    }

    @Test func aReplayedGenerationIsRefused() throws {
        var sender = try Self.keys()
        var receiver = try Self.keys()
        let message = try sender.protect(try Self.signed(), paddingLength: 0, reuseGuard: Self.reuseGuard)
        _ = try receiver.unprotect(message, signatureKey: Self.resolve)
        #expect(throws: SecretTreeError.generationAlreadyUsed(0)) { try receiver.unprotect(message, signatureKey: Self.resolve) }
    }

    @Test func generationsArriveOutOfOrderWithinTheWindow() throws {
        var sender = try Self.keys()
        var receiver = try Self.keys()
        let messages = try (0..<4).map { i in
            try sender.protect(try Self.signed(.application([UInt8(i)])), paddingLength: i, reuseGuard: Self.reuseGuard)
        }
        for i in [3, 0, 2, 1] {
            #expect(try receiver.unprotect(messages[i], signatureKey: Self.resolve).content.content == .application([UInt8(i)]))
        }
        // Handshake and application ratchets are apart: a proposal's generation 0 is still unused.
        let proposal = try sender.protect(try Self.signed(Self.remove), paddingLength: 0, reuseGuard: Self.reuseGuard)
        #expect(try receiver.unprotect(proposal, signatureKey: Self.resolve).content.content == Self.remove)
        #expect(receiver.secretTree.ratchet(leaf: LeafIndex(1), type: .handshake)?.nextGeneration == 1)
    }

    @Test func nonZeroPaddingIsRefused() throws {
        // Sealed by hand as protect does, with one padding byte set.
        var receiver = try Self.keys()
        let signed = try Self.signed(authenticatedData: [])
        var plaintext = try PrivateMessageContent(content: signed.content.content, auth: signed.auth, paddingLength: 4).encoded()
        plaintext[plaintext.count - 2] = 1
        let message = try Self.sealByHand(plaintext, contentType: .application, leaf: 1)
        #expect(throws: MLSDecodingError.nonZeroPadding) { try receiver.unprotect(message, signatureKey: Self.resolve) }
        // The same plaintext with zeros is accepted: the key was not burnt.
        plaintext[plaintext.count - 2] = 0
        _ = try receiver.unprotect(try Self.sealByHand(plaintext, contentType: .application, leaf: 1), signatureKey: Self.resolve)
    }

    /// A PrivateMessage of epoch `context` from `leaf`'s generation 0, sealed with the public
    /// primitives (sections 6.3.1, 6.3.2).
    static func sealByHand(_ plaintext: [UInt8], contentType: ContentType, leaf: UInt32) throws -> PrivateMessage {
        var tree = try keys().secretTree
        let ratchet = try tree.nextKey(leaf: LeafIndex(leaf), type: RatchetType(contentType))
        var nonce = ratchet.nonce.bytes
        for i in 0..<4 { nonce[i] ^= reuseGuard[i] }
        var aad = TLSWriter()
        try aad.writeOpaque(context.groupID)
        aad.writeUInt64(context.epoch)
        try contentType.encode(to: &aad)
        let senderAAD = aad.bytes
        try aad.writeOpaque([])
        let ciphertext = try suite.seal(key: ratchet.key.bytes, nonce: nonce, aad: aad.bytes, plaintext: plaintext)
        let k = try suite.senderDataKeyAndNonce(senderDataSecret: SecretBytes([UInt8](repeating: 0x22, count: 32)), ciphertext: ciphertext)
        let senderData = try suite.seal(
            key: k.key.bytes, nonce: k.nonce.bytes, aad: senderAAD,
            plaintext: try SenderData(leafIndex: leaf, generation: ratchet.generation, reuseGuard: reuseGuard).mlsEncoded())
        return PrivateMessage(
            groupID: context.groupID, epoch: context.epoch, contentType: contentType, authenticatedData: [],
            encryptedSenderData: senderData, ciphertext: ciphertext)
    }

    @Test func aStaleEpochIsRefusedBeforeAnyKeyIsUsed() throws {
        var old = Self.context
        old.epoch = 6
        var sender = try Self.keys(old)
        var receiver = try Self.keys()
        let message = try sender.protect(try Self.signed(context: old), paddingLength: 0, reuseGuard: Self.reuseGuard)
        #expect(throws: MessageProtectionError.wrongEpoch(expected: 7, got: 6)) { try receiver.unprotect(message, signatureKey: Self.resolve) }
        let publicMessage = try Self.keys(old).protect(try Self.signed(Self.remove, wireFormat: .publicMessage, context: old))
        #expect(throws: MessageProtectionError.wrongEpoch(expected: 7, got: 6)) {
            try Self.keys().unprotect(publicMessage, signatureKey: try Self.signer(1).publicKey)
        }
        // Content of another epoch is not protected with these keys either.
        #expect(throws: MessageProtectionError.wrongEpoch(expected: 7, got: 6)) {
            try receiver.protect(try Self.signed(context: old), paddingLength: 0, reuseGuard: Self.reuseGuard)
        }
        #expect(receiver.secretTree.ratchet(leaf: LeafIndex(1), type: .application) == nil)
    }

    @Test func anotherGroupIsRefused() throws {
        var other = Self.context
        other.groupID = Array("other".utf8)
        var sender = try Self.keys(other)
        var receiver = try Self.keys()
        let message = try sender.protect(try Self.signed(context: other), paddingLength: 0, reuseGuard: Self.reuseGuard)
        #expect(throws: MessageProtectionError.wrongGroup) { try receiver.unprotect(message, signatureKey: Self.resolve) }
    }

    @Test func aSignatureUnderAnotherKeyIsRefusedAndBurnsNoKey() throws {
        var sender = try Self.keys()
        var receiver = try Self.keys()
        let message = try sender.protect(try Self.signed(), paddingLength: 0, reuseGuard: Self.reuseGuard)
        #expect(throws: MLSCryptoError.invalidSignature) {
            try receiver.unprotect(message, signatureKey: { _ in try Self.signer(2).publicKey })
        }
        // A leaf the caller finds blank: its error, nothing used.
        #expect(throws: TestError.blankLeaf(1)) {
            try receiver.unprotect(message, signatureKey: { throw TestError.blankLeaf($0.value) })
        }
        _ = try receiver.unprotect(message, signatureKey: Self.resolve)
    }

    @Test func protectRefusesWhatItCannotSend() throws {
        var keys = try Self.keys()
        #expect(throws: MessageProtectionError.wrongWireFormat(expected: .privateMessage, got: .publicMessage)) {
            try keys.protect(try Self.signed(wireFormat: .publicMessage), paddingLength: 0, reuseGuard: Self.reuseGuard)
        }
        #expect(throws: MLSCryptoError.invalidRandomness(expected: 4, got: 3)) {
            try keys.protect(try Self.signed(), paddingLength: 0, reuseGuard: [1, 2, 3])
        }
        #expect(throws: MessageProtectionError.invalidPaddingLength(-1)) {
            try keys.protect(try Self.signed(), paddingLength: -1, reuseGuard: Self.reuseGuard)
        }
        var external = try Self.signed(Self.remove)
        external.content.sender = .external(senderIndex: 0)
        #expect(throws: MessageProtectionError.senderNotAllowed(.external, .proposal)) {
            try keys.protect(external, paddingLength: 0, reuseGuard: Self.reuseGuard)
        }
        #expect(keys.secretTree.ratchet(leaf: LeafIndex(1), type: .application) == nil)
    }

    // MARK: PublicMessage

    @Test func aPublicMessageCarriesAMembershipTagAndUnprotects() throws {
        let keys = try Self.keys()
        let signed = try Self.signed(Self.remove, wireFormat: .publicMessage)
        let message = try keys.protect(signed)
        #expect(message.membershipTag?.count == 32)
        let verified = try keys.unprotect(try PublicMessage(mlsDecoding: try message.mlsEncoded()), signatureKey: try Self.signer(1).publicKey)
        #expect(verified.authenticatedContent == signed)
        #expect(verified.wireFormat == .publicMessage)
    }

    @Test func aWrongMembershipTagIsRefused() throws {
        let keys = try Self.keys()
        var message = try keys.protect(try Self.signed(Self.remove, wireFormat: .publicMessage))
        message.membershipTag?[0] ^= 1
        #expect(throws: MLSValidationError.invalidMembershipTag) { try keys.unprotect(message, signatureKey: try Self.signer(1).publicKey) }
        // Under another membership key (another group's members) the tag does not verify either.
        let stranger = try MessageProtection(
            suite: Self.suite, groupContext: Self.context, membershipKey: SecretBytes([UInt8](repeating: 0x12, count: 32)),
            senderDataSecret: SecretBytes([UInt8](repeating: 0x22, count: 32)), secretTree: try Self.keys().secretTree)
        let forged = try stranger.protect(try Self.signed(Self.remove, wireFormat: .publicMessage))
        #expect(throws: MLSValidationError.invalidMembershipTag) { try keys.unprotect(forged, signatureKey: try Self.signer(1).publicKey) }
    }

    @Test func aPublicMessageSignedByAnotherIsRefused() throws {
        let keys = try Self.keys()
        let message = try keys.protect(try Self.signed(Self.remove, wireFormat: .publicMessage))
        #expect(throws: MLSCryptoError.invalidSignature) { try keys.unprotect(message, signatureKey: try Self.signer(2).publicKey) }
        // Content signed for the private wire format does not verify as public.
        var relabelled = message
        relabelled.auth = try Self.signed(Self.remove, wireFormat: .privateMessage).auth
        relabelled.membershipTag = Self.suite.mac(
            key: [UInt8](repeating: 0x11, count: 32), data: try relabelled.membershipTagInput(context: Self.context))
        #expect(throws: MLSCryptoError.invalidSignature) { try keys.unprotect(relabelled, signatureKey: try Self.signer(1).publicKey) }
    }

    @Test func applicationDataIsNeverAPublicMessage() throws {
        let keys = try Self.keys()
        let signed = try Self.signed(wireFormat: .publicMessage)
        #expect(throws: MessageProtectionError.applicationDataInPublicMessage) { try keys.protect(signed) }
        var message = PublicMessage(content: signed.content, auth: signed.auth, membershipTag: nil)
        message.membershipTag = Self.suite.mac(key: [UInt8](repeating: 0x11, count: 32), data: try message.membershipTagInput(context: Self.context))
        #expect(throws: MessageProtectionError.applicationDataInPublicMessage) {
            try keys.unprotect(message, signatureKey: try Self.signer(1).publicKey)
        }
    }

    @Test func nonMembersSendOnlyWhatSection6_1Allows() throws {
        let keys = try Self.keys()
        let external = try Self.signer(9)
        func signedBy(_ sender: Sender, _ content: MessageContent) throws -> AuthenticatedContent {
            let framed = FramedContent(groupID: Self.context.groupID, epoch: Self.context.epoch, sender: sender, authenticatedData: [], content: content)
            return try AuthenticatedContent(
                signing: framed, wireFormat: .publicMessage, context: Self.context, signer: external, suite: Self.suite,
                confirmationTag: content.contentType == .commit ? [UInt8](repeating: 7, count: 32) : nil)
        }
        // An external proposal: no membership tag, signed without the group context.
        let proposal = try keys.protect(try signedBy(.external(senderIndex: 0), Self.remove))
        #expect(proposal.membershipTag == nil)
        _ = try keys.unprotect(proposal, signatureKey: external.publicKey)
        let commit = MessageContent.commit(Commit(proposals: [], path: nil))
        #expect(throws: MessageProtectionError.senderNotAllowed(.external, .commit)) {
            try keys.protect(try signedBy(.external(senderIndex: 0), commit))
        }
        #expect(throws: MessageProtectionError.senderNotAllowed(.newMemberCommit, .proposal)) {
            try keys.protect(try signedBy(.newMemberCommit, Self.remove))
        }
        _ = try keys.unprotect(try keys.protect(try signedBy(.newMemberCommit, commit)), signatureKey: external.publicKey)
    }

    @Test func nothingPrintsASecret() throws {
        let keys = try Self.keys()
        let text = String(describing: keys) + String(reflecting: keys)
        var dumped = ""
        dump(keys, to: &dumped)
        #expect(!dumped.contains("17") && !dumped.contains("0x11"))
        #expect(text == "MessageProtection(suite 0x1, epoch 7, redacted)MessageProtection(suite 0x1, epoch 7, redacted)")
    }
}
