/// Proposals sent on their own (RFC 9420 sections 12.1, 12.2): made, received and cached for
/// the epoch's commit, which names them by reference.
extension MLSGroup {
    /// An Add of `keyPackage`'s member (section 12.1.1).
    public mutating func proposeAdd(_ keyPackage: KeyPackage, randomness: (Int) throws -> [UInt8]) throws -> MLSMessage {
        try propose(.add(AddProposal(keyPackage: keyPackage.wire)), randomness: randomness)
    }

    /// A Remove of the member at `leaf` (section 12.1.3).
    public mutating func proposeRemove(_ leaf: LeafIndex, randomness: (Int) throws -> [UInt8]) throws -> MLSMessage {
        try propose(.remove(RemoveProposal(removed: leaf.value)), randomness: randomness)
    }

    /// A PreSharedKey proposal (section 12.1.4) of `psk`, which must be known to every member
    /// (an external PSK) or be a resumption PSK of usage `application`.
    public mutating func proposePSK(_ psk: PreSharedKeyID, randomness: (Int) throws -> [UInt8]) throws -> MLSMessage {
        try propose(.preSharedKey(PreSharedKeyProposal(psk: psk)), randomness: randomness)
    }

    /// A GroupContextExtensions proposal (section 12.1.7): the new epoch's extensions replace
    /// the current ones wholesale.
    public mutating func proposeGroupContextExtensions(
        _ extensions: [Extension], randomness: (Int) throws -> [UInt8]
    ) throws -> MLSMessage {
        try propose(.groupContextExtensions(GroupContextExtensionsProposal(extensions: extensions)), randomness: randomness)
    }

    /// A ReInit proposal (section 12.1.5): once committed, the group sends nothing more.
    public mutating func proposeReInit(_ reInit: ReInitProposal, randomness: (Int) throws -> [UInt8]) throws -> MLSMessage {
        try propose(.reInit(reInit), randomness: randomness)
    }

    /// The id of a new PSK of this group's epoch `epoch` (usage `application`, section 8.6), or
    /// of an external PSK named `name`, with a fresh `KDF.Nh`-byte nonce.
    public func resumptionPSKID(epoch pskEpoch: UInt64, randomness: (Int) throws -> [UInt8]) throws -> PreSharedKeyID {
        PreSharedKeyID(kind: .resumption(usage: .application, groupID: groupID, epoch: pskEpoch), nonce: try randomness(suite.hashLength))
    }

    public func externalPSKID(_ name: [UInt8], randomness: (Int) throws -> [UInt8]) throws -> PreSharedKeyID {
        PreSharedKeyID(kind: .external(pskID: name), nonce: try randomness(suite.hashLength))
    }

    /// An Update of this member's leaf (section 12.1.2): a fresh encryption key from
    /// `randomness`, source `update`, `capabilities` if given (else the leaf's), signed for the
    /// group and leaf. Its private key is kept until a commit of this epoch applies it (another
    /// member must commit it).
    public mutating func proposeUpdate(
        capabilities: Capabilities? = nil, randomness: (Int) throws -> [UInt8]
    ) throws -> MLSMessage {
        let key = try suite.deriveHPKEKeyPair(ikm: try randomness(suite.hashLength))
        var leaf = try tree.requireLeaf(myLeaf)
        leaf.encryptionKey = key.publicKey.wire
        if let capabilities { leaf.capabilities = capabilities }
        leaf.sourceFields = .update
        leaf.signature = try suite.signWithLabel(
            signer, label: LeafNodeTBS.label,
            content: try leaf.toBeSigned(group: LeafNodeTBS.Group(groupID: groupID, leafIndex: myLeaf.value)).mlsEncoded())
        var next = self
        let message = try next.propose(.update(UpdateProposal(leafNode: leaf)), randomness: randomness)
        next.pendingUpdateKey = key
        self = next
        return message
    }

    /// Signs `proposal` as a message of this epoch in the policy's wire format and caches it
    /// (the sender commits or sees committed its own proposals too).
    mutating func propose(_ proposal: Proposal, randomness: (Int) throws -> [UInt8]) throws -> MLSMessage {
        guard reInit == nil else { throw MLSGroupError.groupReinitialized }
        let me = Sender.member(leafIndex: myLeaf.value)
        _ = try validate(proposal, from: me)
        let framed = FramedContent(groupID: groupID, epoch: epoch, sender: me, authenticatedData: [], content: .proposal(proposal))
        let content = try AuthenticatedContent(
            signing: framed, wireFormat: try outgoingHandshakeFormat(), context: groupContext, signer: signer, suite: suite,
            confirmationTag: nil)
        var next = self
        let message = try next.protectHandshake(content, randomness: randomness)
        next.proposalCache.append(CachedProposal(reference: try content.proposalReference(suite: suite), proposal: proposal, sender: me))
        self = next
        return message
    }

    /// ``MLSGroupPolicy/handshakeWireFormat``, which must be public or private.
    func outgoingHandshakeFormat() throws -> WireFormat {
        let format = policy.handshakeWireFormat
        guard format == .publicMessage || format == .privateMessage else { throw MLSGroupError.wireFormatNotAllowed(format) }
        return format
    }

    /// A proposal or commit of this epoch as the MLSMessage its wire format says: a PublicMessage
    /// with membership tag, or a PrivateMessage under the next generation of this member's
    /// handshake ratchet with a fresh reuse guard (sections 6.2, 6.3).
    mutating func protectHandshake(_ content: AuthenticatedContent, randomness: (Int) throws -> [UInt8]) throws -> MLSMessage {
        if content.wireFormat == .publicMessage { return .publicMessage(try protection.protect(content)) }
        return .privateMessage(try protection.protect(
            content, paddingLength: 0, reuseGuard: try randomness(MessageProtection.reuseGuardLength)))
    }

    /// A proposal from another member, an external sender or a new member, verified,
    /// validated on its own (section 12.1) and cached.
    mutating func receiveProposal(_ verified: VerifiedAuthenticatedContent) throws -> Received {
        guard case .proposal(let proposal) = verified.content.content else { throw MLSGroupError.unsupportedContent }
        _ = try validate(proposal, from: verified.sender)
        let reference = try verified.authenticatedContent.proposalReference(suite: suite)
        // A proposal delivered twice is cached once.
        guard !proposalCache.contains(where: { $0.reference == reference }) else { return .proposal(reference: reference) }
        proposalCache.append(CachedProposal(reference: reference, proposal: proposal, sender: verified.sender))
        return .proposal(reference: reference)
    }

    /// A proposal from the external sender at `senderIndex` of the group's `external_senders`
    /// extension (section 12.1.8), or from a new member proposing its own Add (`senderIndex`
    /// nil, sender `new_member_proposal`): signed by `signer` over `groupContext` as a
    /// PublicMessage (no membership tag, section 6.2).
    public static func externalProposal(
        _ proposal: Proposal, groupContext: GroupContext, senderIndex: UInt32?, signer: SignaturePrivateKey
    ) throws -> MLSMessage {
        guard let suite = MLSCipherSuite(groupContext.cipherSuite) else {
            throw MLSValidationError.cipherSuiteMismatch(expected: MLSCipherSuite.x25519AES128GCMSHA256Ed25519.id, got: groupContext.cipherSuite)
        }
        let sender: Sender = senderIndex.map { .external(senderIndex: $0) } ?? .newMemberProposal
        let framed = FramedContent(
            groupID: groupContext.groupID, epoch: groupContext.epoch, sender: sender, authenticatedData: [],
            content: .proposal(proposal))
        let content = try AuthenticatedContent(
            signing: framed, wireFormat: .publicMessage, context: groupContext, signer: signer, suite: suite, confirmationTag: nil)
        return .publicMessage(PublicMessage(content: content.content, auth: content.auth, membershipTag: nil))
    }
}
