/// Making a commit (RFC 9420 section 12.4.1) and the Welcome of the members it adds (12.4.3).
extension MLSGroup {
    /// What ``commit(adding:removing:randomness:)`` makes.
    public struct CommitOutput: Sendable {
        /// The commit, as a PublicMessage of the current epoch, for every member.
        public let message: PublicMessage
        /// The Welcome for the added members; nil when none are added.
        public let welcome: Welcome?
        /// The committer's state in the new epoch, to be kept once the delivery service has
        /// accepted the commit (until then the current state stays valid).
        public let group: MLSGroup
    }

    /// A commit of this epoch's cached proposals (by reference; this member's own Updates left
    /// out, its path replacing them) and of Adds of `adding` and Removes of `removing` by value,
    /// with a path (always sent: it refreshes the committer's keys, and is required for Updates,
    /// Removes and an empty commit, a self-update). The current state is unchanged.
    public func commit(
        adding: [KeyPackage] = [], removing: [LeafIndex] = [], randomness: (Int) throws -> [UInt8]
    ) throws -> CommitOutput {
        let proposals = proposalCache.filter { !($0.sender == myLeaf && $0.proposal.proposalType == .update) }
            .map { ProposalOrRef.reference($0.reference) }
            + removing.map { ProposalOrRef.proposal(.remove(RemoveProposal(removed: $0.value))) }
            + adding.map { ProposalOrRef.proposal(.add(AddProposal(keyPackage: $0.wire))) }
        let applied = try apply(proposals, committer: myLeaf)
        let path = try applied.tree.createUpdatePath(
            from: myLeaf, leafSecret: SecretBytes(try randomness(suite.hashLength)), signer: signer,
            groupContext: try provisionalContext(tree: applied.tree), excluding: Set(applied.added.map(\.leaf)),
            randomness: randomness)
        let framed = FramedContent(
            groupID: groupID, epoch: epoch, sender: .member(leafIndex: myLeaf.value), authenticatedData: [],
            content: .commit(Commit(proposals: proposals, path: path.updatePath)))
        var content = try AuthenticatedContent(
            signing: framed, wireFormat: .publicMessage, context: groupContext, signer: signer, suite: suite, confirmationTag: [])
        let next = try nextEpoch(commit: content, provisional: path.groupContext, commitSecret: path.commitSecret)
        content.auth.confirmationTag = next.confirmationTag
        let group = try MLSGroup(
            suite: suite, groupContext: next.context, tree: path.tree, myLeaf: myLeaf, signer: signer,
            privateKeys: path.privateKeys, epochSecrets: next.secrets, interimTranscriptHash: next.interim)
        let welcome = applied.added.isEmpty ? nil : try group.welcome(
            confirmationTag: next.confirmationTag, added: applied.added, pathSecrets: path.pathSecrets, randomness: randomness)
        return CommitOutput(message: try protection.protect(content), welcome: welcome, group: group)
    }

    /// The Welcome to this (new) epoch for `added` (section 12.4.3.1): a GroupInfo with the
    /// `ratchet_tree` extension signed by this member, and for each new member the epoch's
    /// `joiner_secret` and the path secret of the lowest node of the committer's filtered direct
    /// path above it.
    func welcome(
        confirmationTag: [UInt8], added: [(leaf: LeafIndex, keyPackage: KeyPackage)],
        pathSecrets: [(node: NodeIndex, secret: SecretBytes)], randomness: (Int) throws -> [UInt8]
    ) throws -> Welcome {
        let ratchetTree = Extension(extensionType: RatchetTree.extensionType, extensionData: try tree.ratchetTree().mlsEncoded())
        var info = GroupInfoIn(
            groupContext: groupContext, extensions: [ratchetTree], confirmationTag: confirmationTag, signer: myLeaf.value,
            signature: [])
        info.signature = try suite.signWithLabel(signer, label: GroupInfoTBS.label, content: try info.toBeSigned.mlsEncoded())
        let members = try added.map { member in
            let joiner = try tree.nodeIndex(member.leaf)
            let pathSecret = pathSecrets.first { TreeMath.isInSubtree(joiner, of: $0.node) }.map { PathSecret(pathSecret: $0.secret.bytes) }
            let secrets = GroupSecrets(joinerSecret: epochSecrets.joinerSecret.bytes, pathSecret: pathSecret, psks: [])
            return (member.keyPackage, secrets, try randomness(MLSCipherSuite.encapsulationRandomnessLength))
        }
        return try Welcome(sealing: info, epochSecrets: epochSecrets, newMembers: members)
    }
}
