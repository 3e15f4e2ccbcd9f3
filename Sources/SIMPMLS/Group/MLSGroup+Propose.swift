/// Proposals sent on their own (RFC 9420 sections 12.1, 12.2): made, received and cached for
/// the epoch's commit, which names them by reference.
extension MLSGroup {
    /// An Add of `keyPackage`'s member (section 12.1.1).
    public mutating func proposeAdd(_ keyPackage: KeyPackage) throws -> PublicMessage {
        try propose(.add(AddProposal(keyPackage: keyPackage.wire)))
    }

    /// A Remove of the member at `leaf` (section 12.1.3).
    public mutating func proposeRemove(_ leaf: LeafIndex) throws -> PublicMessage {
        try propose(.remove(RemoveProposal(removed: leaf.value)))
    }

    /// An Update of this member's leaf (section 12.1.2): a fresh encryption key from
    /// `randomness`, source `update`, signed for the group and leaf. Its private key is kept
    /// until a commit of this epoch applies it (another member must commit it).
    public mutating func proposeUpdate(randomness: (Int) throws -> [UInt8]) throws -> PublicMessage {
        let key = try suite.deriveHPKEKeyPair(ikm: try randomness(suite.hashLength))
        var leaf = try tree.requireLeaf(myLeaf)
        leaf.encryptionKey = key.publicKey.wire
        leaf.sourceFields = .update
        leaf.signature = try suite.signWithLabel(
            signer, label: LeafNodeTBS.label,
            content: try leaf.toBeSigned(group: LeafNodeTBS.Group(groupID: groupID, leafIndex: myLeaf.value)).mlsEncoded())
        var next = self
        let message = try next.propose(.update(UpdateProposal(leafNode: leaf)))
        next.pendingUpdateKey = key
        self = next
        return message
    }

    /// Signs `proposal` as a PublicMessage of this epoch and caches it (the sender commits or
    /// sees committed its own proposals too).
    mutating func propose(_ proposal: Proposal) throws -> PublicMessage {
        try validate(proposal, from: myLeaf)
        let framed = FramedContent(
            groupID: groupID, epoch: epoch, sender: .member(leafIndex: myLeaf.value), authenticatedData: [],
            content: .proposal(proposal))
        let content = try AuthenticatedContent(
            signing: framed, wireFormat: .publicMessage, context: groupContext, signer: signer, suite: suite, confirmationTag: nil)
        let message = try protection.protect(content)
        proposalCache.append(CachedProposal(reference: try content.proposalReference(suite: suite), proposal: proposal, sender: myLeaf))
        return message
    }

    /// A proposal from another member, verified (membership tag, signature), validated and cached.
    mutating func receiveProposal(_ message: PublicMessage, from sender: LeafIndex) throws -> Received {
        let verified = try protection.unprotect(message, signatureKey: try signatureKey(sender))
        guard case .proposal(let proposal) = verified.content.content else { throw MLSGroupError.unsupportedContent }
        try validate(proposal, from: sender)
        let reference = try verified.authenticatedContent.proposalReference(suite: suite)
        // A proposal delivered twice is cached once.
        guard !proposalCache.contains(where: { $0.reference == reference }) else { return .proposal(reference: reference) }
        proposalCache.append(CachedProposal(reference: reference, proposal: proposal, sender: sender))
        return .proposal(reference: reference)
    }

    /// The checks of a proposal on its own (section 12.2): an Add's key package validates; a
    /// Remove names a member; an Update's leaf node is of source `update`, signed for the group
    /// and the sender's leaf, with a new encryption key of the suite and the same signature key
    /// (changing the signature key by Update is not supported yet).
    func validate(_ proposal: Proposal, from sender: LeafIndex) throws {
        switch proposal {
        case .add(let add): _ = try add.keyPackage.validate(suite: suite)
        case .remove(let remove):
            guard tree.leaf(LeafIndex(remove.removed)) != nil else { throw MLSGroupError.invalidRemove(leaf: remove.removed) }
        case .update(let update):
            let leaf = update.leafNode
            guard leaf.source == .update, let old = tree.leaf(sender), old.encryptionKey != leaf.encryptionKey,
                  old.signatureKey == leaf.signatureKey
            else { throw MLSGroupError.invalidUpdate(leaf: sender.value) }
            try leaf.verifySignature(suite: suite, group: LeafNodeTBS.Group(groupID: groupID, leafIndex: sender.value))
            _ = try leaf.encryptionKey.validate(for: suite)
        default: throw MLSGroupError.unsupportedProposal(proposal.proposalType)
        }
    }
}
