/// Joining from a Welcome (RFC 9420 section 12.4.3.1).
extension MLSGroup {
    /// Joins the group a Welcome names `bundle`'s key package in: decrypts it; takes the tree
    /// from the GroupInfo's `ratchet_tree` extension (section 12.4.3.3); verifies the GroupInfo's
    /// signature under its signer's leaf and the confirmation tag; validates the tree against the
    /// GroupInfo's tree hash (and, if `time` is given, the key package lifetimes); finds the
    /// joiner's leaf; and sets the private keys of the path secret's node and the nodes above it
    /// on the signer's filtered direct path.
    ///
    /// `ratchetTree` is the group's tree obtained out of band, used when the GroupInfo carries
    /// none; `psk` gives the value of each PSK the GroupSecrets name (section 8.4). With a
    /// `credentialValidator`, every member's credential must pass it (section 5.3.1); it is kept
    /// with `policy` for later epochs.
    public init(
        joining welcome: Welcome, with bundle: MLSKeyPackageBundle, ratchetTree external: RatchetTree? = nil,
        time: UInt64? = nil, policy: MLSGroupPolicy = MLSGroupPolicy(), credentialValidator: (any CredentialValidator)? = nil,
        psk: (PreSharedKeyID) throws -> SecretBytes = MLSGroup.noExternalPSK
    ) throws {
        let decrypted = try welcome.decrypt(for: bundle.keyPackage, initPrivateKey: bundle.initPrivateKey, psk: psk)
        let suite = decrypted.suite
        guard let ratchetTree = try decrypted.groupInfo.ratchetTree() ?? external else { throw MLSGroupError.missingRatchetTree }
        let tree = try PublicRatchetTree(suite: suite, ratchetTree: ratchetTree)
        let signer = LeafIndex(decrypted.groupInfo.signer)
        guard let signerLeaf = tree.leaf(signer) else { throw MLSGroupError.unknownSigner(leaf: signer.value) }
        let joined = try decrypted.verify(signerKey: try signerLeaf.signatureKey.validate(for: suite))
        let context = joined.groupContext
        try tree.validate(groupID: context.groupID, expectedTreeHash: context.treeHash, time: time)
        try tree.checkCredentials(with: credentialValidator)
        guard let me = tree.memberLeaves.first(where: { tree.leaf($0) == bundle.keyPackage.leafNode }) else {
            throw MLSGroupError.joinerNotInTree
        }
        var keys = TreeKEMPrivateKeys(leaf: me, encryptionKey: bundle.encryptionPrivateKey)
        if let pathSecret = joined.pathSecret {
            let path = try tree.filteredDirectPath(signer).map(\.node)
            let mine = try tree.nodeIndex(me)
            guard let i = path.firstIndex(where: { TreeMath.isInSubtree(mine, of: $0) }) else { throw MLSTreeError.noDecryptionKey }
            _ = try keys.setPathSecret(SecretBytes(pathSecret.pathSecret), along: Array(path[i...]), suite: suite)
        }
        try keys.checkConsistent(with: tree)
        try self.init(
            suite: suite, groupContext: context, tree: tree, myLeaf: me, signer: bundle.signer, privateKeys: keys,
            epochSecrets: joined.epochSecrets, interimTranscriptHash: joined.interimTranscriptHash,
            confirmationTag: joined.groupInfo.wire.confirmationTag)
        self.policy = policy
        self.credentialValidator = credentialValidator
    }
}

extension PublicRatchetTree {
    /// Section 5.3.1 for a tree received on joining: every member's credential passes
    /// `validator` (nothing is checked without one).
    func checkCredentials(with validator: (any CredentialValidator)?) throws {
        guard let validator else { return }
        for index in memberLeaves {
            guard let leaf = leaf(index) else { continue }
            try validator.validate(leaf.credential, signatureKey: try leaf.signatureKey.validate(for: suite))
        }
    }
}
