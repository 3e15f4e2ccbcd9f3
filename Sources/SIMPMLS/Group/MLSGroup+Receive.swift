/// Receiving: proposals, commits (RFC 9420 section 12.4.2, external ones 12.4.3.2) and
/// application messages (sections 6.3, 15), as PublicMessages or PrivateMessages.
extension MLSGroup {
    /// What a received message did.
    public enum Received: Sendable, Equatable {
        /// Application data from the member at `sender` (its leaf in `epoch`), sent in `epoch`:
        /// the current epoch, or a kept past one (a late message, section 12.4.2).
        case application(sender: LeafIndex, data: [UInt8], authenticatedData: [UInt8], epoch: UInt64)
        /// A proposal, cached for this epoch's commit under its `ProposalRef`.
        case proposal(reference: [UInt8])
        /// A commit moved the group to `epoch`.
        case newEpoch(UInt64)
        /// A commit removed this member: the state stays at the old epoch and should be dropped.
        case removed
    }

    /// Processes a message: a proposal (validated and cached) or a commit of the current epoch
    /// from another member, an external sender or a new member, as a PublicMessage or (from a
    /// member) a PrivateMessage the policy accepts; or application data in a PrivateMessage of
    /// this epoch or of a past one the policy keeps. `psk` gives the value of a PSK a commit
    /// injects that is not a resumption PSK of this group (section 8.4).
    ///
    /// On any error the state is unchanged; an application message of an earlier epoch whose
    /// keys are not kept is ``MLSGroupError/pastEpochNotKept(epoch:)``, any other message of
    /// another epoch ``MessageProtectionError/wrongEpoch(expected:got:)``, and a replayed one a
    /// ``SecretTreeError``.
    public mutating func process(
        _ message: MLSMessage, psk: (PreSharedKeyID) throws -> SecretBytes = MLSGroup.noExternalPSK
    ) throws -> Received {
        var next = self
        let verified: VerifiedAuthenticatedContent
        switch message {
        case .publicMessage(let m): verified = try next.unprotect(m)
        case .privateMessage(let m):
            if m.epoch < epoch, m.groupID == groupID, m.contentType == .application { return try decryptLate(m) }
            verified = try next.unprotect(m)
        default: throw MLSGroupError.unsupportedContent
        }
        // Section 12.4.2: a group a ReInit ended takes no more proposals or commits.
        if reInit != nil, verified.content.contentType != .application { throw MLSGroupError.groupReinitialized }
        let received: Received
        switch verified.content.content {
        case .application(let data):
            guard case .member(let index) = verified.sender else { throw MLSGroupError.unsupportedContent }
            received = .application(
                sender: LeafIndex(index), data: data, authenticatedData: verified.content.authenticatedData, epoch: epoch)
        case .proposal: received = try next.receiveProposal(verified)
        case .commit(let commit): received = try next.processCommit(verified, commit, psk: psk)
        }
        if received != .removed { self = next }
        return received
    }

    /// Section 6.2: a PublicMessage of this group and epoch, its sender's signature key found
    /// (a member's leaf, an external sender, the new member's key package or path leaf), its
    /// membership tag (a member's) and signature checked.
    mutating func unprotect(_ message: PublicMessage) throws -> VerifiedAuthenticatedContent {
        let content = message.content
        try protection.checkGroupAndEpoch(groupID: content.groupID, epoch: content.epoch)
        switch content.sender {
        case .member(let index):
            guard LeafIndex(index) != myLeaf else { throw content.contentType == .commit ? MLSGroupError.ownCommit : .ownMessage }
            try checkIncomingHandshakeFormat(.publicMessage)
        case .newMemberCommit: guard policy.acceptsExternalCommits else { throw MLSGroupError.newMemberNotAccepted }
        case .newMemberProposal: guard policy.acceptsNewMemberProposals else { throw MLSGroupError.newMemberNotAccepted }
        case .external: break
        }
        return try protection.unprotect(message, signatureKey: try signatureKey(of: content))
    }

    /// Section 6.3: a PrivateMessage of this group and epoch from another member; a proposal or
    /// commit only if the policy accepts private handshake messages.
    mutating func unprotect(_ message: PrivateMessage) throws -> VerifiedAuthenticatedContent {
        try protection.checkGroupAndEpoch(groupID: message.groupID, epoch: message.epoch)
        if message.contentType != .application { try checkIncomingHandshakeFormat(.privateMessage) }
        let (tree, suite, me, type) = (self.tree, self.suite, myLeaf, message.contentType)
        return try protection.unprotect(message) { leaf in
            guard leaf != me else { throw type == .commit ? MLSGroupError.ownCommit : .ownMessage }
            guard let node = tree.leaf(leaf) else { throw MLSGroupError.unknownSender(leaf: leaf.value) }
            return try node.signatureKey.validate(for: suite)
        }
    }

    func checkIncomingHandshakeFormat(_ format: WireFormat) throws {
        guard policy.acceptedHandshakeWireFormats.contains(format) else { throw MLSGroupError.wireFormatNotAllowed(format) }
    }

    /// The key that signed `content` (section 6.1): a member's leaf's, the `external_senders`
    /// entry's, the key package's of a new member's Add, the path leaf's of an external commit.
    func signatureKey(of content: FramedContent) throws -> SignaturePublicKey {
        switch content.sender {
        case .member(let index): return try signatureKey(LeafIndex(index))
        case .external(let index):
            let senders = try ExternalSender.list(in: groupContext.extensions)
            guard Int(index) < senders.count else { throw MLSGroupError.unknownExternalSender(index) }
            return try senders[Int(index)].signatureKey.validate(for: suite)
        case .newMemberProposal:
            guard case .proposal(.add(let add)) = content.content else {
                throw MLSGroupError.proposalNotAllowed(ProposalType(0), sender: .newMemberProposal)
            }
            return try add.keyPackage.leafNode.signatureKey.validate(for: suite)
        case .newMemberCommit:
            guard case .commit(let commit) = content.content, let path = commit.path else { throw MLSGroupError.invalidExternalCommit }
            return try path.leafNode.signatureKey.validate(for: suite)
        }
    }

    /// The signature key of the member at `leaf` in this epoch's tree.
    func signatureKey(_ leaf: LeafIndex) throws -> SignaturePublicKey {
        guard let node = tree.leaf(leaf) else { throw MLSGroupError.unknownSender(leaf: leaf.value) }
        return try node.signatureKey.validate(for: suite)
    }

    /// Section 12.4.2 on a commit whose signature (and membership tag or AEAD) verified: its
    /// proposals are resolved, each valid, the list valid (12.2) and its PSKs available; they
    /// apply (12.3); a path is present where required and processed with TreeKEM (an external
    /// committer takes the leftmost blank leaf, 12.4.3.2); the key schedule runs from this
    /// epoch's `init_secret` (or the ExternalInit's) with `commit_secret` and `psk_secret`; the
    /// new epoch's confirmation tag is the commit's.
    mutating func processCommit(_ verified: VerifiedAuthenticatedContent, _ commit: Commit, psk: (PreSharedKeyID) throws -> SecretBytes) throws -> Received {
        let committer = verified.sender
        let list = try resolve(commit.proposals, committer: committer)
        try checkList(list, committer: committer)
        try approve(list, committer: committer)
        var applied = try apply(list)
        let pskSecret = try self.pskSecret(applied.psks, external: psk)
        guard commit.path != nil || !applied.pathRequired else { throw MLSGroupError.pathRequired }
        let sender: LeafIndex
        switch committer {
        case .member(let index): sender = LeafIndex(index)
        case .newMemberCommit:
            sender = try applied.tree.reserveBlankLeaf()
            try checkResync(list, path: commit.path)
        default: throw MLSGroupError.unsupportedContent
        }
        // A removed member cannot merge the path nor check the confirmation tag (it gets no
        // path secret): everything it can check of the commit's sender is checked first, so a
        // forged commit does not tell it that it was removed.
        if applied.removed.contains(myLeaf) {
            if let path = commit.path {
                try checkPathLeaf(path.leafNode, at: sender, extensions: applied.extensions, tree: applied.tree)
                try path.leafNode.verifySignature(suite: suite, group: LeafNodeTBS.Group(groupID: groupID, leafIndex: sender.value))
            }
            return .removed
        }

        var provisional = try provisionalContext(tree: applied.tree, extensions: applied.extensions)
        var keys = privateKeys
        if applied.updated.contains(myLeaf) {
            guard let key = pendingUpdateKey else { throw MLSGroupError.invalidUpdate(leaf: myLeaf.value) }
            keys.set(key, for: try applied.tree.nodeIndex(myLeaf))
        }
        keys.forget(keys.nodes.filter { applied.tree.node($0) == nil })
        var commitSecret: SecretBytes?
        if let path = commit.path {
            try checkPathLeaf(path.leafNode, at: sender, extensions: applied.extensions, tree: applied.tree)
            let processed = try applied.tree.processing(
                path, from: sender, groupContext: provisional, excluding: Set(applied.added.map(\.leaf)), privateKeys: keys)
            (applied.tree, provisional, keys, commitSecret) = (processed.tree, processed.groupContext, processed.privateKeys, processed.commitSecret)
        }
        let initSecret = try applied.externalInit.map {
            try suite.externalInitSecret(kemOutput: $0.kemOutput, externalPriv: try epochSecrets.externalKeyPair())
        } ?? epochSecrets.initSecret
        let next = try nextEpoch(
            commit: verified.authenticatedContent, provisional: provisional, initSecret: initSecret, commitSecret: commitSecret,
            pskSecret: pskSecret)
        guard let tag = verified.authenticatedContent.auth.confirmationTag,
              next.secrets.verifyConfirmationTag(tag, confirmedTranscriptHash: next.context.confirmedTranscriptHash)
        else { throw MLSGroupError.invalidConfirmationTag }
        self = try moving(to: next, tree: applied.tree, privateKeys: keys, reInit: applied.reInit)
        return .newEpoch(epoch)
    }

    /// Section 12.4.3.2 on an external commit that removes a member (a resync): the joiner's
    /// new leaf must be the removed member's, as for an Update of that leaf (section 12.2): the
    /// same credential, passing the validator, and a new encryption key.
    func checkResync(_ list: [ResolvedProposal], path: UpdatePath?) throws {
        for entry in list {
            guard case .remove(let remove) = entry.proposal else { continue }
            let leaf = LeafIndex(remove.removed)
            guard let old = tree.leaf(leaf), let new = path?.leafNode, new.credential == old.credential,
                  new.encryptionKey.bytes != old.encryptionKey.bytes
            else { throw MLSGroupError.invalidResync(leaf: leaf.value) }
        }
    }

    /// Section 7.3 on a committer's new leaf (its source and signature are checked by merging
    /// the path): its credential passes the validator and it fits the group's capabilities.
    func checkPathLeaf(_ leaf: LeafNode, at index: LeafIndex, extensions: [Extension], tree: PublicRatchetTree) throws {
        try credentialValidator?.validate(leaf.credential, signatureKey: try leaf.signatureKey.validate(for: suite))
        var group = self
        group.tree = tree
        try group.checkCapabilities(of: leaf, extensions: extensions, members: tree.memberLeaves.filter { $0 != index })
    }

    /// An application message of a past epoch the policy keeps (section 12.4.2's late
    /// messages): decrypted with that epoch's sender-data secret and secret tree (section 6.3),
    /// signed by that epoch's member over that epoch's GroupContext (6.1). An earlier epoch not
    /// kept (never, no longer, or forgotten by ``forgetPastEpochs()``) is refused.
    mutating func decryptLate(_ message: PrivateMessage) throws -> Received {
        guard let i = pastEpochs.firstIndex(where: { $0.epoch == message.epoch }) else {
            throw MLSGroupError.pastEpochNotKept(epoch: message.epoch)
        }
        let (past, suite) = (pastEpochs[i], self.suite)
        var secretTree = past.secretTree
        let verified = try MessageProtection.unprotect(
            message, suite: suite, groupContext: past.groupContext, senderDataSecret: past.senderDataSecret, tree: &secretTree
        ) { leaf in
            guard let key = past.signatureKeys[leaf.value] else { throw MLSGroupError.unknownSender(leaf: leaf.value) }
            return try key.validate(for: suite)
        }
        guard case .member(let index) = verified.sender, case .application(let data) = verified.content.content else {
            throw MLSGroupError.unsupportedContent
        }
        pastEpochs[i].secretTree = secretTree
        return .application(
            sender: LeafIndex(index), data: data, authenticatedData: verified.content.authenticatedData, epoch: past.epoch)
    }

    /// Application data as a PrivateMessage of this epoch from this member (sections 6.3, 15):
    /// signed, encrypted with the next key of its application ratchet (then deleted), with
    /// `paddingLength` zero bytes of padding and a fresh reuse guard.
    public mutating func encrypt(
        _ data: [UInt8], authenticatedData: [UInt8] = [], paddingLength: Int = 0, randomness: (Int) throws -> [UInt8]
    ) throws -> PrivateMessage {
        guard reInit == nil else { throw MLSGroupError.groupReinitialized }
        let framed = FramedContent(
            groupID: groupID, epoch: epoch, sender: .member(leafIndex: myLeaf.value), authenticatedData: authenticatedData,
            content: .application(data))
        let content = try AuthenticatedContent(
            signing: framed, wireFormat: .privateMessage, context: groupContext, signer: signer, suite: suite, confirmationTag: nil)
        return try protection.protect(
            content, paddingLength: paddingLength, reuseGuard: try randomness(MessageProtection.reuseGuardLength))
    }
}

extension PublicRatchetTree {
    /// The leaf an external committer takes (section 12.4.2): the leftmost blank leaf, or the
    /// first of the tree extended to the right; left blank for its path's leaf node.
    mutating func reserveBlankLeaf() throws -> LeafIndex {
        if let blank = (0..<size.leafCount).first(where: { self.leaf(LeafIndex($0)) == nil }) { return LeafIndex(blank) }
        let reserved = LeafIndex(size.leafCount)
        try extend()
        return reserved
    }
}
