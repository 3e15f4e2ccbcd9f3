/// Joining by external commit (RFC 9420 section 12.4.3.2): a new member commits itself into
/// the group's epoch a GroupInfo with `external_pub` describes. The members' side is
/// ``MLSGroup/process(_:psk:)``.
extension MLSGroup {
    /// What ``joinByExternalCommit(groupInfo:ratchetTree:credential:capabilities:signer:resyncing:resyncingOwnLeaf:psks:psk:time:policy:credentialValidator:randomness:)`` makes.
    public struct ExternalCommitOutput: Sendable {
        /// The external commit, a PublicMessage from `new_member_commit`, for every member.
        public let message: MLSMessage
        /// The new member's state in the epoch the commit begins, to be kept once the delivery
        /// service has accepted the commit.
        public let group: MLSGroup
    }

    /// Joins the group of `groupInfo` by an external commit (sections 8.3, 12.4.1, 12.4.3.2):
    ///
    /// 1. the GroupInfo's signature verifies under its signer's leaf of the tree (its
    ///    `ratchet_tree` extension or `ratchetTree`), and the tree validates against its hash;
    /// 2. `kem_output` and `init_secret` come from `SetupBaseS(external_pub, "")` and its export
    ///    `"MLS 1.0 external init secret"`;
    /// 3. the commit carries, by value, the ExternalInit, a Remove of `resyncing` (the joiner's
    ///    own old leaf, for a resync; with `resyncingOwnLeaf`, the leaf of the verified tree
    ///    whose credential is `credential`, if any) and a PreSharedKey proposal per id of `psks`;
    /// 4. the joiner takes the leftmost blank leaf (the tree extended if none) and sends a path
    ///    from it, its leaf node made of `credential`, `capabilities` and `signer`'s key;
    /// 5. the commit is signed as `new_member_commit` over the GroupInfo's GroupContext, and the
    ///    new epoch's secrets, confirmation tag and transcript hashes follow from it.
    public static func joinByExternalCommit(
        groupInfo: GroupInfoIn, ratchetTree externalTree: RatchetTree? = nil, credential: Credential, capabilities: Capabilities,
        signer: SignaturePrivateKey, resyncing oldLeaf: LeafIndex? = nil, resyncingOwnLeaf: Bool = false, psks: [PreSharedKeyID] = [],
        psk: (PreSharedKeyID) throws -> SecretBytes = MLSGroup.noExternalPSK, time: UInt64? = nil,
        policy: MLSGroupPolicy = MLSGroupPolicy(), credentialValidator: (any CredentialValidator)? = nil,
        randomness: (Int) throws -> [UInt8]
    ) throws -> ExternalCommitOutput {
        let (suite, context, verifiedTree) = try verifiedGroupInfo(
            groupInfo, ratchetTree: externalTree, time: time, credentialValidator: credentialValidator)
        var tree = verifiedTree
        guard let pub = try Extension.decoded(ExternalPub.extensionType, in: groupInfo.extensions, as: ExternalPub.self) else {
            throw MLSGroupError.missingExternalPub
        }
        let external = try suite.externalInit(
            externalPub: try pub.externalPub.validate(for: suite), randomness: try randomness(MLSCipherSuite.encapsulationRandomnessLength))
        var proposals: [Proposal] = [.externalInit(ExternalInitProposal(kemOutput: external.kemOutput))]
        // Section 12.4.3.2: a client that lost its state removes its old leaf, the one that
        // holds its own credential.
        let own = resyncingOwnLeaf ? tree.memberLeaves.first { tree.leaf($0)?.credential == credential } : nil
        if let oldLeaf = oldLeaf ?? own {
            try tree.remove(oldLeaf)
            proposals.append(.remove(RemoveProposal(removed: oldLeaf.value)))
        }
        for id in psks {
            guard id.nonce.count == suite.hashLength else { throw MLSGroupError.invalidPSK }
            proposals.append(.preSharedKey(PreSharedKeyProposal(psk: id)))
        }
        let me = try tree.reserveBlankLeaf()
        guard context.epoch < UInt64.max else { throw MLSGroupError.epochExhausted }
        var provisional = context
        provisional.epoch += 1
        let template = LeafNode(
            encryptionKey: HPKEPublicKeyIn(bytes: []), signatureKey: SignaturePublicKeyIn(bytes: signer.publicKey.rawRepresentation),
            credential: credential, capabilities: capabilities, sourceFields: .commit(parentHash: []), extensions: [], signature: [])
        let path = try tree.createUpdatePath(
            from: me, leafSecret: SecretBytes(try randomness(suite.hashLength)), signer: signer, leafNode: template,
            groupContext: provisional, randomness: randomness)

        let framed = FramedContent(
            groupID: context.groupID, epoch: context.epoch, sender: .newMemberCommit, authenticatedData: [],
            content: .commit(Commit(proposals: proposals.map { .proposal($0) }, path: path.updatePath)))
        var content = try AuthenticatedContent(
            signing: framed, wireFormat: .publicMessage, context: context, signer: signer, suite: suite, confirmationTag: [])
        let interim = try TranscriptHashes.interim(
            confirmed: context.confirmedTranscriptHash, confirmationTag: groupInfo.confirmationTag, suite: suite)
        let pskSecret = psks.isEmpty ? nil : try suite.pskSecret(try psks.map { PreSharedKey(id: $0, secret: try psk($0)) })
        let next = try NextEpoch(
            suite: suite, commit: content, provisional: path.groupContext, interimBefore: interim, initSecret: external.initSecret,
            commitSecret: path.commitSecret, pskSecret: pskSecret)
        content.auth.confirmationTag = next.confirmationTag
        var group = try MLSGroup(
            suite: suite, groupContext: next.context, tree: path.tree, myLeaf: me, signer: signer, privateKeys: path.privateKeys,
            epochSecrets: next.secrets, interimTranscriptHash: next.interim, confirmationTag: next.confirmationTag)
        group.policy = policy
        group.credentialValidator = credentialValidator
        let message = PublicMessage(content: content.content, auth: content.auth, membershipTag: nil)
        return ExternalCommitOutput(message: .publicMessage(message), group: group)
    }

    /// Section 12.4.3.1's checks of a GroupInfo a client joins from: a suite of this build, the
    /// signature under the signer's leaf, the tree's validity against the GroupInfo's tree hash,
    /// and, with a validator, every member's credential.
    static func verifiedGroupInfo(
        _ groupInfo: GroupInfoIn, ratchetTree externalTree: RatchetTree?, time: UInt64?,
        credentialValidator: (any CredentialValidator)?
    ) throws -> (MLSCipherSuite, GroupContext, PublicRatchetTree) {
        guard let suite = MLSCipherSuite(groupInfo.groupContext.cipherSuite) else {
            throw MLSValidationError.cipherSuiteMismatch(expected: MLSCipherSuite.x25519AES128GCMSHA256Ed25519.id, got: groupInfo.groupContext.cipherSuite)
        }
        guard let ratchetTree = try groupInfo.ratchetTree() ?? externalTree else { throw MLSGroupError.missingRatchetTree }
        let tree = try PublicRatchetTree(suite: suite, ratchetTree: ratchetTree)
        let signer = LeafIndex(groupInfo.signer)
        guard let signerLeaf = tree.leaf(signer) else { throw MLSGroupError.unknownSigner(leaf: signer.value) }
        let context = try groupInfo.verify(with: try signerLeaf.signatureKey.validate(for: suite), suite: suite).groupContext
        try tree.validate(groupID: context.groupID, expectedTreeHash: context.treeHash, time: time)
        try tree.checkCredentials(with: credentialValidator)
        return (suite, context, tree)
    }
}
