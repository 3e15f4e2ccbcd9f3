/// TreeKEM (RFC 9420 sections 7.4-7.6): a committer's UpdatePath, made and received.
extension PublicRatchetTree {
    /// `EncryptWithLabel`'s label for path secrets (section 7.6).
    public static let updatePathNodeLabel = Array("UpdatePathNode".utf8)

    /// A committer's UpdatePath and what it leaves the committer with.
    public struct CreatedUpdatePath: Sendable {
        public let updatePath: UpdatePath
        /// The tree with the path merged.
        public let tree: PublicRatchetTree
        /// The provisional GroupContext given, with the new tree's hash: the context the path
        /// secrets were encrypted under.
        public let groupContext: GroupContext
        /// The committer's private keys: its new leaf key and one per filtered direct path node.
        public let privateKeys: TreeKEMPrivateKeys
        /// Each filtered direct path node's path secret, from the leaf up: a Welcome gives a new
        /// member the one of the lowest node above it (section 12.4.3.1).
        public let pathSecrets: [(node: NodeIndex, secret: SecretBytes)]
        /// `DeriveSecret(path_secret[n], "path")` of the root's path secret (section 8).
        public let commitSecret: SecretBytes
    }

    /// Makes an UpdatePath from the member at `leaf` (sections 7.4, 7.5, 7.6), on this tree with
    /// the commit's proposals applied:
    /// - the direct path is blanked; from `leafSecret` (`Nh` fresh random bytes) come the leaf's
    ///   key pair, `DeriveKeyPair(DeriveSecret(leaf_secret, "node"))`, and
    ///   `path_secret[0] = DeriveSecret(leaf_secret, "path")` (section 7.4's figure);
    /// - each filtered direct path node gets the key pair of its path secret, then parent hashes
    ///   are set from the root down, and the leaf node (`leafNode`, by default the current one,
    ///   with the new encryption key, source `commit` and the parent hash) is signed by `signer`
    ///   for the group and leaf;
    /// - each path secret is encrypted with `EncryptWithLabel(., "UpdatePathNode",
    ///   group_context)` to every node of the copath child's resolution but the leaves in
    ///   `newLeaves` (the members this commit adds), `group_context` being `groupContext` (the
    ///   provisional one) with the new tree hash. `randomness(32)` is called once per ciphertext
    ///   for its ephemeral key and must return fresh random bytes.
    public func createUpdatePath(
        from leaf: LeafIndex, leafSecret: SecretBytes, signer: SignaturePrivateKey, leafNode: LeafNode? = nil,
        groupContext: GroupContext, excluding newLeaves: Set<LeafIndex> = [], randomness: (Int) throws -> [UInt8]
    ) throws -> CreatedUpdatePath {
        let merged = try mergingOwnPath(from: leaf, leafSecret: leafSecret, signer: signer, leafNode: leafNode, groupID: groupContext.groupID)
        let (tree, path, keys, pathSecrets, secret) = (merged.tree, merged.path, merged.privateKeys, merged.pathSecrets, merged.commitSecret)
        let newLeaf = merged.leafNode

        var context = groupContext
        context.treeHash = try tree.treeHash()
        let encodedContext = try context.mlsEncoded()
        let nodes = try zip(path, pathSecrets).map { step, pathSecret in
            let ciphertexts = try tree.resolution(of: step.copathChild, excluding: newLeaves).map { x in
                guard let key = tree.encryptionKey(x) else { throw MLSTreeError.privateStateInconsistent(node: x.value) }
                return try suite.encryptWithLabel(
                    try key.validate(for: suite), label: Self.updatePathNodeLabel, context: encodedContext,
                    plaintext: pathSecret.secret.bytes, randomness: try randomness(MLSCipherSuite.encapsulationRandomnessLength))
            }
            return UpdatePathNode(encryptionKey: try keys.publicKey(for: step.node), encryptedPathSecret: ciphertexts)
        }
        return CreatedUpdatePath(
            updatePath: UpdatePath(leafNode: newLeaf, nodes: nodes), tree: tree, groupContext: context,
            privateKeys: keys, pathSecrets: pathSecrets, commitSecret: secret)
    }

    /// A committer's path merged into this tree, before anything is encrypted (sections 7.4,
    /// 7.5, 7.9): the direct path blanked, the filtered direct path's nodes set to the key pairs
    /// of the path secrets from `leafSecret`, parent hashes set from the root down, and the leaf
    /// node (`leafNode`, by default the current one) given the new encryption key, source
    /// `commit` with the parent hash, and signed by `signer` for `groupID` and the leaf.
    func mergingOwnPath(
        from leaf: LeafIndex, leafSecret: SecretBytes, signer: SignaturePrivateKey, leafNode: LeafNode?, groupID: [UInt8]
    ) throws -> (
        tree: PublicRatchetTree, path: [PathStep], leafNode: LeafNode, privateKeys: TreeKEMPrivateKeys,
        pathSecrets: [(node: NodeIndex, secret: SecretBytes)], commitSecret: SecretBytes
    ) {
        guard leafSecret.count == suite.hashLength else {
            throw MLSCryptoError.invalidRandomness(expected: suite.hashLength, got: leafSecret.count)
        }
        var newLeaf = try leafNode ?? requireLeaf(leaf)
        guard signer.publicKey.rawRepresentation == newLeaf.signatureKey.bytes else { throw MLSTreeError.signerMismatch }
        var tree = self
        try tree.blankDirectPath(leaf)
        let path = try tree.filteredDirectPath(leaf)

        let leafKey = try suite.nodeKeyPair(pathSecret: leafSecret)
        var keys = TreeKEMPrivateKeys(leaf: leaf, encryptionKey: leafKey)
        var pathSecrets: [(node: NodeIndex, secret: SecretBytes)] = []
        var secret = try suite.nextPathSecret(leafSecret)
        for step in path {
            let key = try suite.nodeKeyPair(pathSecret: secret)
            keys.set(key, for: step.node)
            tree.set(step.node, .parent(ParentNode(encryptionKey: key.publicKey.wire, parentHash: [], unmergedLeaves: [])))
            pathSecrets.append((step.node, secret))
            secret = try suite.nextPathSecret(secret)
        }

        newLeaf.encryptionKey = leafKey.publicKey.wire
        newLeaf.sourceFields = .commit(parentHash: try tree.setParentHashes(along: path))
        let group = LeafNodeTBS.Group(groupID: groupID, leafIndex: leaf.value)
        newLeaf.signature = try suite.signWithLabel(
            signer, label: LeafNodeTBS.label, content: try newLeaf.toBeSigned(group: group).mlsEncoded())
        tree.set(try nodeIndex(leaf), .leaf(newLeaf))
        try tree.updateTreeHashes()
        return (tree, path, newLeaf, keys, pathSecrets, secret)
    }

    /// Merges the UpdatePath of the member at `sender` into the tree (sections 7.5, 7.9.2): its
    /// leaf node must be of source `commit`, signed for `groupID` and the leaf, with an
    /// encryption key other than the old one; the path has one node per node of the sender's
    /// filtered direct path, each with a key of the suite; the direct path is blanked, those
    /// nodes set (no unmerged leaves), their parent hashes set from the root down, and the leaf's
    /// `parent_hash` must be the first node's. Encryption and signature keys must stay unique.
    public func merging(_ path: UpdatePath, from sender: LeafIndex, groupID: [UInt8]) throws -> PublicRatchetTree {
        let leaf = path.leafNode
        guard case .commit(let leafParentHash) = leaf.sourceFields else {
            throw MLSTreeError.wrongLeafNodeSource(leaf: sender.value, expected: .commit, got: leaf.source)
        }
        let x = try nodeIndex(sender)
        try leaf.verifySignature(suite: suite, group: LeafNodeTBS.Group(groupID: groupID, leafIndex: sender.value))
        _ = try leaf.encryptionKey.validate(for: suite)
        if let old = self.leaf(sender), old.encryptionKey == leaf.encryptionKey {
            throw MLSTreeError.encryptionKeyNotUpdated(leaf: sender.value)
        }

        var tree = self
        try tree.blankDirectPath(sender)
        let steps = try tree.filteredDirectPath(sender)
        guard steps.count == path.nodes.count else { throw MLSTreeError.updatePathLength(expected: steps.count, got: path.nodes.count) }
        for (step, node) in zip(steps, path.nodes) {
            _ = try node.encryptionKey.validate(for: suite)
            tree.set(step.node, .parent(ParentNode(encryptionKey: node.encryptionKey, parentHash: [], unmergedLeaves: [])))
        }
        guard try tree.setParentHashes(along: steps) == leafParentHash else { throw MLSTreeError.leafParentHashMismatch }
        tree.set(x, .leaf(leaf))
        try tree.updateTreeHashes()
        try tree.verifyUniqueKeys()
        return tree
    }

    /// What a member takes from another's UpdatePath.
    public struct ProcessedUpdatePath: Sendable {
        /// The tree with the path merged.
        public let tree: PublicRatchetTree
        /// The provisional GroupContext given, with the new tree's hash.
        public let groupContext: GroupContext
        /// The member's private keys: those of the nodes the path replaced dropped, those of the
        /// filtered direct path nodes from the decrypted one up set.
        public let privateKeys: TreeKEMPrivateKeys
        /// The node whose path secret the member decrypted: the lowest node of the sender's
        /// filtered direct path above the member.
        public let decryptedNode: NodeIndex
        public let decryptedPathSecret: SecretBytes
        public let commitSecret: SecretBytes
    }

    /// Processes the UpdatePath of the member at `sender` as the member whose keys are
    /// `privateKeys` (section 7.5): merges it (``merging(_:from:groupID:)``); checks every
    /// node's ciphertext count against its copath child's resolution without `newLeaves`;
    /// decrypts, with the provisional `groupContext` carrying the merged tree's hash, the path
    /// secret of the lowest node above the member using a key it holds in that resolution;
    /// derives the secrets of the nodes above, checking each derived public key is the path's;
    /// and derives the `commit_secret`.
    public func processing(
        _ path: UpdatePath, from sender: LeafIndex, groupContext: GroupContext, excluding newLeaves: Set<LeafIndex> = [],
        privateKeys: TreeKEMPrivateKeys
    ) throws -> ProcessedUpdatePath {
        guard sender != privateKeys.leaf else { throw MLSTreeError.noDecryptionKey }
        let tree = try merging(path, from: sender, groupID: groupContext.groupID)
        var context = groupContext
        context.treeHash = try tree.treeHash()
        let steps = try tree.filteredDirectPath(sender)
        guard steps.count == path.nodes.count else { throw MLSTreeError.updatePathLength(expected: steps.count, got: path.nodes.count) }
        let resolutions = steps.map { tree.resolution(of: $0.copathChild, excluding: newLeaves) }
        for (i, step) in steps.enumerated() where path.nodes[i].encryptedPathSecret.count != resolutions[i].count {
            throw MLSTreeError.ciphertextCount(
                node: step.node.value, expected: resolutions[i].count, got: path.nodes[i].encryptedPathSecret.count)
        }

        let me = try tree.nodeIndex(privateKeys.leaf)
        guard let i = steps.firstIndex(where: { TreeMath.isInSubtree(me, of: $0.copathChild) }),
              let j = resolutions[i].firstIndex(where: { privateKeys.privateKey(for: $0) != nil }),
              let key = privateKeys.privateKey(for: resolutions[i][j])
        else { throw MLSTreeError.noDecryptionKey }
        let pathSecret = SecretBytes(try suite.decryptWithLabel(
            key, label: Self.updatePathNodeLabel, context: try context.mlsEncoded(), ciphertext: path.nodes[i].encryptedPathSecret[j]))

        var keys = privateKeys
        keys.forget(try directPath(sender))
        var secret = pathSecret
        for k in i..<steps.count {
            let nodeKey = try suite.nodeKeyPair(pathSecret: secret)
            guard nodeKey.publicKey.rawRepresentation == path.nodes[k].encryptionKey.bytes else {
                throw MLSTreeError.publicKeyMismatch(node: steps[k].node.value)
            }
            keys.set(nodeKey, for: steps[k].node)
            secret = try suite.nextPathSecret(secret)
        }
        return ProcessedUpdatePath(
            tree: tree, groupContext: context, privateKeys: keys, decryptedNode: steps[i].node, decryptedPathSecret: pathSecret,
            commitSecret: secret)
    }
}

extension HPKEPublicKey {
    /// The key as a structure carries it.
    var wire: HPKEPublicKeyIn { HPKEPublicKeyIn(bytes: rawRepresentation) }
}

extension TreeKEMPrivateKeys {
    /// The public key of a node whose private key is held.
    func publicKey(for node: NodeIndex) throws -> HPKEPublicKeyIn {
        guard let key = privateKey(for: node) else { throw MLSTreeError.privateStateInconsistent(node: node.value) }
        return key.publicKey.wire
    }
}
