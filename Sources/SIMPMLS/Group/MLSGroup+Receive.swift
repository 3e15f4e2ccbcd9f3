/// Receiving: another member's commit (RFC 9420 section 12.4.2) and application messages
/// (sections 6.3, 15).
extension MLSGroup {
    /// What a received message did.
    public enum Received: Sendable, Equatable {
        /// Application data from the member at `sender`.
        case application(sender: LeafIndex, data: [UInt8], authenticatedData: [UInt8])
        /// A proposal, cached for this epoch's commit under its `ProposalRef`.
        case proposal(reference: [UInt8])
        /// A commit moved the group to `epoch`.
        case newEpoch(UInt64)
        /// A commit removed this member: the state stays at the old epoch and should be dropped.
        case removed
    }

    /// Processes a message of the current epoch: a PublicMessage carrying another member's
    /// proposal (cached) or commit, or a PrivateMessage carrying application data. On any error the state is
    /// unchanged; a message of another epoch is ``MessageProtectionError/wrongEpoch(expected:got:)``
    /// and a replayed one a ``SecretTreeError``.
    public mutating func process(_ message: MLSMessage) throws -> Received {
        switch message {
        case .publicMessage(let m): return try processCommit(m)
        case .privateMessage(let m): return try decryptApplication(m)
        default: throw MLSGroupError.unsupportedContent
        }
    }

    /// The signature key of the member at `leaf` in this epoch's tree.
    func signatureKey(_ leaf: LeafIndex) throws -> SignaturePublicKey {
        guard let node = tree.leaf(leaf) else { throw MLSGroupError.unknownSender(leaf: leaf.value) }
        return try node.signatureKey.validate(for: suite)
    }

    /// Section 12.4.2: the commit's membership tag and signature verify (the sender a member,
    /// not this member); its proposals validate and apply; a path is present where required and
    /// processed with TreeKEM; the new epoch's confirmation tag is the commit's.
    mutating func processCommit(_ message: PublicMessage) throws -> Received {
        guard case .member(let index) = message.content.sender else { throw MLSGroupError.unsupportedContent }
        let sender = LeafIndex(index)
        if case .proposal = message.content.content { return try receiveProposal(message, from: sender) }
        guard case .commit(let commit) = message.content.content else { throw MLSGroupError.unsupportedContent }
        guard sender != myLeaf else { throw MLSGroupError.ownCommit }
        let verified = try protection.unprotect(message, signatureKey: try signatureKey(sender))
        let applied = try apply(commit.proposals, committer: sender)
        if applied.removed.contains(myLeaf) { return .removed }
        guard commit.path != nil || !applied.pathRequired else { throw MLSGroupError.pathRequired }

        var provisional = try provisionalContext(tree: applied.tree)
        var tree = applied.tree
        var keys = privateKeys
        if applied.updated.contains(myLeaf) {
            guard let key = pendingUpdateKey else { throw MLSGroupError.invalidUpdate(leaf: myLeaf.value) }
            keys.set(key, for: try tree.nodeIndex(myLeaf))
        }
        keys.forget(keys.nodes.filter { tree.node($0) == nil })
        var commitSecret: SecretBytes?
        if let path = commit.path {
            let processed = try tree.processing(
                path, from: sender, groupContext: provisional, excluding: Set(applied.added.map(\.leaf)), privateKeys: keys)
            (tree, provisional, keys, commitSecret) = (processed.tree, processed.groupContext, processed.privateKeys, processed.commitSecret)
        }
        let next = try nextEpoch(commit: verified.authenticatedContent, provisional: provisional, commitSecret: commitSecret)
        guard let tag = verified.authenticatedContent.auth.confirmationTag,
              next.secrets.verifyConfirmationTag(tag, confirmedTranscriptHash: next.context.confirmedTranscriptHash)
        else { throw MLSGroupError.invalidConfirmationTag }
        self = try MLSGroup(
            suite: suite, groupContext: next.context, tree: tree, myLeaf: myLeaf, signer: signer, privateKeys: keys,
            epochSecrets: next.secrets, interimTranscriptHash: next.interim)
        return .newEpoch(epoch)
    }

    /// An application message of this epoch (section 6.3): its sender's key deleted once it
    /// decrypts, so a replay is refused.
    mutating func decryptApplication(_ message: PrivateMessage) throws -> Received {
        guard message.contentType == .application else { throw MLSGroupError.unsupportedContent }
        let tree = self.tree
        let suite = self.suite
        let verified = try protection.unprotect(message) { leaf in
            guard let node = tree.leaf(leaf) else { throw MLSGroupError.unknownSender(leaf: leaf.value) }
            return try node.signatureKey.validate(for: suite)
        }
        guard case .member(let index) = verified.sender, case .application(let data) = verified.content.content else {
            throw MLSGroupError.unsupportedContent
        }
        return .application(sender: LeafIndex(index), data: data, authenticatedData: verified.content.authenticatedData)
    }

    /// Application data as a PrivateMessage of this epoch from this member (sections 6.3, 15):
    /// signed, encrypted with the next key of its application ratchet (then deleted), with
    /// `paddingLength` zero bytes of padding and a fresh reuse guard.
    public mutating func encrypt(
        _ data: [UInt8], authenticatedData: [UInt8] = [], paddingLength: Int = 0, randomness: (Int) throws -> [UInt8]
    ) throws -> PrivateMessage {
        let framed = FramedContent(
            groupID: groupID, epoch: epoch, sender: .member(leafIndex: myLeaf.value), authenticatedData: authenticatedData,
            content: .application(data))
        let content = try AuthenticatedContent(
            signing: framed, wireFormat: .privateMessage, context: groupContext, signer: signer, suite: suite, confirmationTag: nil)
        return try protection.protect(
            content, paddingLength: paddingLength, reuseGuard: try randomness(MessageProtection.reuseGuardLength))
    }
}
