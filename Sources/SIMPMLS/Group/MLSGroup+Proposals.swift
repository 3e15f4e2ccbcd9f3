/// Validating and applying a commit's proposals (RFC 9420 sections 12.1, 12.2, 12.3).
extension MLSGroup {
    /// The tree with a commit's proposals applied, and the leaves the Adds took.
    struct AppliedProposals {
        var tree: PublicRatchetTree
        var added: [(leaf: LeafIndex, keyPackage: KeyPackage)]
        var removed: Set<LeafIndex>
        /// The leaves whose members' Updates were applied.
        var updated: Set<LeafIndex>
        /// Whether the commit must carry a path: unless every proposal is an Add, PSK or ReInit
        /// (section 12.4), which includes a commit without proposals.
        var pathRequired: Bool
    }

    /// The proposals of a commit from `committer` (by value, or by reference to this epoch's
    /// cache), validated (section 12.2) and applied in the order of section 12.3: Updates,
    /// Removes, then Adds. An Update by value, or the committer's own Update, is invalid; two
    /// Updates or Removes for one leaf conflict. Each Add's key package is validated for the
    /// suite (section 10.1); its lifetime and credential are the application's to judge.
    func apply(_ proposals: [ProposalOrRef], committer: LeafIndex) throws -> AppliedProposals {
        var updates: [(LeafIndex, LeafNode)] = []
        var removes: [LeafIndex] = []
        var adds: [KeyPackage] = []
        for proposalOrRef in proposals {
            let (proposal, sender) = try resolve(proposalOrRef, committer: committer)
            switch proposal {
            case .add(let add): adds.append(try add.keyPackage.validate(suite: suite))
            case .remove(let remove): removes.append(LeafIndex(remove.removed))
            case .update(let update):
                guard sender != committer else { throw MLSGroupError.updateByValue }
                updates.append((sender, update.leafNode))
            default: throw MLSGroupError.unsupportedProposal(proposal.proposalType)
            }
        }
        var tree = self.tree
        var touched: Set<LeafIndex> = []
        for (leaf, node) in updates {
            guard touched.insert(leaf).inserted else { throw MLSGroupError.conflictingProposals(leaf: leaf.value) }
            try tree.update(node, at: leaf)
        }
        var removed: Set<LeafIndex> = []
        for leaf in removes {
            guard leaf != committer else { throw MLSGroupError.invalidRemove(leaf: leaf.value) }
            guard touched.insert(leaf).inserted else { throw MLSGroupError.conflictingProposals(leaf: leaf.value) }
            guard tree.leaf(leaf) != nil else { throw MLSGroupError.invalidRemove(leaf: leaf.value) }
            removed.insert(leaf)
            try tree.remove(leaf)
        }
        var added: [(LeafIndex, KeyPackage)] = []
        for keyPackage in adds { added.append((try tree.add(keyPackage.leafNode), keyPackage)) }
        try tree.verifyUniqueKeys()
        return AppliedProposals(
            tree: tree, added: added, removed: removed, updated: Set(updates.map(\.0)),
            pathRequired: proposals.isEmpty || !removes.isEmpty || !updates.isEmpty)
    }

    /// A proposal by value (its sender the committer) or from this epoch's cache.
    func resolve(_ proposalOrRef: ProposalOrRef, committer: LeafIndex) throws -> (Proposal, LeafIndex) {
        switch proposalOrRef {
        case .proposal(let proposal):
            if case .update = proposal { throw MLSGroupError.updateByValue }
            return (proposal, committer)
        case .reference(let reference):
            guard let cached = proposalCache.first(where: { $0.reference == reference }) else {
                throw MLSGroupError.unknownProposalReference
            }
            return (cached.proposal, cached.sender)
        }
    }

    /// The GroupContext of the next epoch before its transcript hash is known (section 12.4.1's
    /// provisional GroupContext): epoch + 1, the tree hash of `tree`.
    func provisionalContext(tree: PublicRatchetTree) throws -> GroupContext {
        guard epoch < UInt64.max else { throw MLSGroupError.epochExhausted }
        var context = groupContext
        context.epoch = epoch + 1
        context.treeHash = try tree.treeHash()
        return context
    }

    /// The next epoch from a commit (sections 8, 8.2, 12.4.1, 12.4.2): the confirmed transcript
    /// hash over the commit's content and signature, the epoch's secrets from this epoch's
    /// `init_secret` and `commitSecret` (nil: no path), the confirmation tag and the interim
    /// transcript hash. The commit's `auth.confirmationTag` is not read.
    func nextEpoch(
        commit: AuthenticatedContent, provisional: GroupContext, commitSecret: SecretBytes?
    ) throws -> (context: GroupContext, secrets: EpochSecrets, confirmationTag: [UInt8], interim: [UInt8]) {
        var context = provisional
        context.confirmedTranscriptHash = suite.hash(interimTranscriptHash + (try TranscriptHashes.confirmedInput(commit)))
        let secrets = try EpochSecrets(
            suite: suite, initSecret: epochSecrets.initSecret, commitSecret: commitSecret, pskSecret: nil, groupContext: context)
        let tag = secrets.confirmationTag(confirmedTranscriptHash: context.confirmedTranscriptHash)
        let interim = try TranscriptHashes.interim(confirmed: context.confirmedTranscriptHash, confirmationTag: tag, suite: suite)
        return (context, secrets, tag, interim)
    }
}
