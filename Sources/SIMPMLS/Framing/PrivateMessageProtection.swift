/// RFC 9420 section 6.3: encrypting signed content as a PrivateMessage, and decrypting one.
extension MessageProtection {
    /// Bytes of randomness ``protect(_:paddingLength:reuseGuard:)`` takes: the reuse guard.
    public static let reuseGuardLength = 4

    /// The PrivateMessage of `content`, which must be signed for `mls_private_message`, of this
    /// group and epoch, and from a member (section 6.3.2). Its content is sealed under the next
    /// generation of the sender's handshake (proposal, commit) or application ratchet, with the
    /// ratchet's nonce XORed with `reuseGuard` (4 fresh random bytes, section 6.3.1), and
    /// followed by `paddingLength` zero bytes; the sender data is sealed under the key and nonce
    /// of the ciphertext's sample (6.3.2). The generation is used up only if this succeeds.
    public mutating func protect(_ content: AuthenticatedContent, paddingLength: Int, reuseGuard: [UInt8]) throws -> PrivateMessage {
        guard content.wireFormat == .privateMessage else {
            throw MessageProtectionError.wrongWireFormat(expected: .privateMessage, got: content.wireFormat)
        }
        guard reuseGuard.count == Self.reuseGuardLength else {
            throw MLSCryptoError.invalidRandomness(expected: Self.reuseGuardLength, got: reuseGuard.count)
        }
        guard paddingLength >= 0 else { throw MessageProtectionError.invalidPaddingLength(paddingLength) }
        let framed = content.content
        try checkGroupAndEpoch(groupID: framed.groupID, epoch: framed.epoch)
        guard case .member(let leaf) = framed.sender else {
            throw MessageProtectionError.senderNotAllowed(framed.sender.senderType, framed.contentType)
        }
        let plaintext = try PrivateMessageContent(content: framed.content, auth: content.auth, paddingLength: paddingLength).encoded()

        var tree = self.tree
        let key = try tree.nextKey(leaf: LeafIndex(leaf), type: RatchetType(framed.contentType))
        let ciphertext = try suite.seal(
            key: key.key.bytes, nonce: Self.guardedNonce(key.nonce, reuseGuard),
            aad: try PrivateContentAAD(framed).mlsEncoded(), plaintext: plaintext)

        let senderData = try SenderData(leafIndex: leaf, generation: key.generation, reuseGuard: reuseGuard).mlsEncoded()
        let senderDataKey = try suite.senderDataKeyAndNonce(senderDataSecret: senderDataSecret, ciphertext: ciphertext)
        let aad = try SenderDataAAD(groupID: framed.groupID, epoch: framed.epoch, contentType: framed.contentType).mlsEncoded()
        let encryptedSenderData = try suite.seal(
            key: senderDataKey.key.bytes, nonce: senderDataKey.nonce.bytes, aad: aad, plaintext: senderData)

        self.tree = tree
        return PrivateMessage(
            groupID: framed.groupID, epoch: framed.epoch, contentType: framed.contentType,
            authenticatedData: framed.authenticatedData, encryptedSenderData: encryptedSenderData, ciphertext: ciphertext)
    }

    /// The content of `message`, decrypted and checked in the order of RFC 9420 section 6.3:
    ///
    /// 1. its group and epoch are these keys';
    /// 2. the sender data opens under the key and nonce of the ciphertext's sample, with the
    ///    message's group, epoch and content type as AAD (6.3.2);
    /// 3. `signatureKey` resolves the sender's leaf to its signature key, and must throw for a
    ///    leaf that is blank or outside the tree ("the recipient MUST verify that the leaf index
    ///    ... identifies a non-blank node");
    /// 4. the secret tree gives the key of the sender's generation (within the ratchet window;
    ///    a used generation is ``SecretTreeError/generationAlreadyUsed(_:)``);
    /// 5. the content opens under that key and the nonce XORed with the reuse guard (6.3.1);
    /// 6. the plaintext decodes as a PrivateMessageContent whose padding is all zeros;
    /// 7. the signature over the rebuilt FramedContent verifies (6.1).
    ///
    /// Only then is the generation's key deleted from the secret tree: a refused message changes
    /// nothing.
    public mutating func unprotect(
        _ message: PrivateMessage, signatureKey: (LeafIndex) throws -> SignaturePublicKey
    ) throws -> VerifiedAuthenticatedContent {
        try checkGroupAndEpoch(groupID: message.groupID, epoch: message.epoch)
        return try Self.unprotect(
            message, suite: suite, groupContext: groupContext, senderDataSecret: senderDataSecret, tree: &tree,
            signatureKey: signatureKey)
    }

    /// Steps 2 to 7 of ``unprotect(_:signatureKey:)`` with the keys given (those of this epoch,
    /// or what a group keeps of a past one: section 12.4.2's late messages need no membership
    /// key). `groupContext` is the epoch's, which member senders signed (6.1). `tree` changes
    /// only if every step passes.
    static func unprotect(
        _ message: PrivateMessage, suite: MLSCipherSuite, groupContext: GroupContext, senderDataSecret: SecretBytes,
        tree secretTree: inout SecretTree, signatureKey: (LeafIndex) throws -> SignaturePublicKey
    ) throws -> VerifiedAuthenticatedContent {
        let senderData = try decryptSenderData(message, suite: suite, senderDataSecret: senderDataSecret)
        let leaf = LeafIndex(senderData.leafIndex)
        let key = try signatureKey(leaf)

        var tree = secretTree
        let ratchetKey = try tree.key(leaf: leaf, type: RatchetType(message.contentType), generation: senderData.generation)
        let plaintext: [UInt8]
        do {
            plaintext = try suite.open(
                key: ratchetKey.key.bytes, nonce: Self.guardedNonce(ratchetKey.nonce, senderData.reuseGuard),
                aad: try PrivateContentAAD(message).mlsEncoded(), ciphertext: message.ciphertext)
        } catch {
            throw MessageProtectionError.contentDecryptionFailed
        }
        let decrypted = try PrivateMessageContent(decoding: plaintext, contentType: message.contentType)
        let framed = FramedContent(
            groupID: message.groupID, epoch: message.epoch, sender: .member(leafIndex: senderData.leafIndex),
            authenticatedData: message.authenticatedData, content: decrypted.content)
        let content = AuthenticatedContent(wireFormat: .privateMessage, content: framed, auth: decrypted.auth)
        let verified = try VerifiedAuthenticatedContent.verifying(content, context: groupContext, signatureKey: key, suite: suite)
        secretTree = tree
        return verified
    }

    /// Step 2 of ``unprotect(_:signatureKey:)``: the SenderData of `message` (section 6.3.2).
    static func decryptSenderData(_ message: PrivateMessage, suite: MLSCipherSuite, senderDataSecret: SecretBytes) throws -> SenderData {
        let senderDataKey = try suite.senderDataKeyAndNonce(senderDataSecret: senderDataSecret, ciphertext: message.ciphertext)
        let aad = try SenderDataAAD(groupID: message.groupID, epoch: message.epoch, contentType: message.contentType).mlsEncoded()
        do {
            let plaintext = try suite.open(
                key: senderDataKey.key.bytes, nonce: senderDataKey.nonce.bytes, aad: aad, ciphertext: message.encryptedSenderData)
            return try SenderData(mlsDecoding: plaintext)
        } catch {
            throw MessageProtectionError.senderDataDecryptionFailed
        }
    }

    /// The ratchet's nonce with its first four bytes XORed with the reuse guard (section 6.3.1).
    static func guardedNonce(_ nonce: SecretBytes, _ reuseGuard: [UInt8]) -> [UInt8] {
        var guarded = nonce.bytes
        for (i, byte) in reuseGuard.prefix(min(reuseGuardLength, guarded.count)).enumerated() { guarded[i] ^= byte }
        return guarded
    }
}

/// RFC 9420 section 6.3.1, the AAD of a PrivateMessage's content:
///
///     struct {
///         opaque group_id<V>;
///         uint64 epoch;
///         ContentType content_type;
///         opaque authenticated_data<V>;
///     } PrivateContentAAD;
struct PrivateContentAAD: MLSEncodable {
    let groupID: [UInt8]
    let epoch: UInt64
    let contentType: ContentType
    let authenticatedData: [UInt8]

    init(_ content: FramedContent) {
        (groupID, epoch, contentType, authenticatedData) = (content.groupID, content.epoch, content.contentType, content.authenticatedData)
    }

    init(_ message: PrivateMessage) {
        (groupID, epoch, contentType, authenticatedData) = (message.groupID, message.epoch, message.contentType, message.authenticatedData)
    }

    func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(groupID)
        writer.writeUInt64(epoch)
        try contentType.encode(to: &writer)
        try writer.writeOpaque(authenticatedData)
    }
}

/// RFC 9420 section 6.3.2, the AAD of a PrivateMessage's sender data, its first three fields:
///
///     struct {
///         opaque group_id<V>;
///         uint64 epoch;
///         ContentType content_type;
///     } SenderDataAAD;
struct SenderDataAAD: MLSEncodable {
    let groupID: [UInt8]
    let epoch: UInt64
    let contentType: ContentType

    func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(groupID)
        writer.writeUInt64(epoch)
        try contentType.encode(to: &writer)
    }
}
