/// Ratchet tree validation as a joiner runs it (RFC 9420 section 12.4.3.1, "Verify the
/// integrity of the ratchet tree"), and as a member may after a commit.
extension PublicRatchetTree {
    /// The extension types every client supports without listing them (section 7.2):
    /// `application_id`, `ratchet_tree`, `required_capabilities`, `external_pub`, `external_senders`.
    static let defaultExtensionTypes: Set<UInt16> = [1, 2, 3, 4, 5]

    /// Checks, in this order:
    /// - the tree hash is `expectedTreeHash` (the GroupInfo's `tree_hash`), if given;
    /// - every non-blank parent node is parent-hash valid (section 7.9.2);
    /// - every `unmerged_leaves` is sorted without repeats (section 7.1), names non-blank leaves
    ///   under the node, each also unmerged at every non-blank node between it and the node;
    /// - every non-blank leaf (section 7.3): its keys are keys of the suite, its signature
    ///   verifies (for the group and its leaf index unless its source is `key_package`), its
    ///   credential type and non-default extension types are in its capabilities, every member
    ///   supports its credential type, and if `time` is given, a `key_package` leaf's lifetime
    ///   contains it;
    /// - no `encryption_key` appears in two nodes and no `signature_key` in two leaves, and
    ///   every parent's `encryption_key` is a key of the suite.
    ///
    /// Left to the caller: credentials (a ``CredentialValidator``), the GroupContext's
    /// `required_capabilities`, and any maximum lifetime of the application.
    public func validate(groupID: [UInt8], expectedTreeHash: [UInt8]? = nil, time: UInt64? = nil) throws {
        if let expectedTreeHash, try treeHash() != expectedTreeHash { throw MLSTreeError.treeHashMismatch }
        try verifyParentHashes()
        try verifyUnmergedLeaves()
        try verifyLeaves(groupID: groupID, time: time)
        try verifyUniqueKeys()
    }

    /// Section 7.1 and 12.4.3.1's checks of `unmerged_leaves`.
    func verifyUnmergedLeaves() throws {
        for i in stride(from: 1, to: nodes.count, by: 2) {
            let p = NodeIndex(UInt32(i))
            guard let parent = parent(p) else { continue }
            let unmerged = parent.unmergedLeaves
            guard zip(unmerged, unmerged.dropFirst()).allSatisfy({ $0 < $1 }) else {
                throw MLSTreeError.unmergedLeavesInvalid(node: p.value)
            }
            for u in unmerged {
                let leaf = LeafIndex(u)
                guard u < size.leafCount, self.leaf(leaf) != nil, let x = leaf.nodeIndex, TreeMath.isInSubtree(x, of: p),
                      let path = TreeMath.directPath(x, in: size)
                else { throw MLSTreeError.unmergedLeavesInvalid(node: p.value) }
                for between in path.prefix(while: { $0 != p }) {
                    if let node = self.parent(between), !node.unmergedLeaves.contains(u) {
                        throw MLSTreeError.unmergedLeavesInvalid(node: p.value)
                    }
                }
            }
        }
    }

    /// Section 7.3's checks of every non-blank leaf that need neither the application nor the
    /// group's other state.
    func verifyLeaves(groupID: [UInt8], time: UInt64?) throws {
        let members = memberLeaves.compactMap { index in leaf(index).map { (index, $0) } }
        let credentialTypes = Set(members.map { $0.1.credential.credentialType })
        for (index, leaf) in members {
            _ = try leaf.encryptionKey.validate(for: suite)
            let group = leaf.source == .keyPackage ? nil : LeafNodeTBS.Group(groupID: groupID, leafIndex: index.value)
            try leaf.verifySignature(suite: suite, group: group)
            let supported = Set(leaf.capabilities.credentials)
            let extensions = Set(leaf.extensions.map(\.extensionType)).subtracting(Self.defaultExtensionTypes)
            guard credentialTypes.isSubset(of: supported), extensions.isSubset(of: Set(leaf.capabilities.extensions)) else {
                throw MLSTreeError.unsupportedCapability(leaf: index.value)
            }
            if let time, case .keyPackage(let lifetime) = leaf.sourceFields, !lifetime.contains(time) {
                throw MLSTreeError.lifetimeInvalid(leaf: index.value)
            }
        }
    }

    /// Sections 7.3 and 12.4.3.1: encryption keys unique among all nodes, signature keys among
    /// the leaves; parents' keys are keys of the suite.
    func verifyUniqueKeys() throws {
        var encryptionKeys = Set<KeyBytes>(minimumCapacity: nodes.count)
        var signatureKeys = Set<KeyBytes>(minimumCapacity: Int(size.leafCount))
        // Through the buffer, so that each node is read in place rather than copied out.
        try nodes.withUnsafeBufferPointer { nodes in
            for i in nodes.indices {
                switch nodes[i] {
                case .leaf(let leaf)?:
                    guard encryptionKeys.insert(KeyBytes(leaf.encryptionKey.bytes)).inserted else {
                        throw MLSTreeError.duplicateEncryptionKey(node: UInt32(i))
                    }
                    guard signatureKeys.insert(KeyBytes(leaf.signatureKey.bytes)).inserted else {
                        throw MLSTreeError.duplicateSignatureKey(leaf: UInt32(i / 2))
                    }
                case .parent(let parent)?:
                    _ = try parent.encryptionKey.validate(for: suite)
                    guard encryptionKeys.insert(KeyBytes(parent.encryptionKey.bytes)).inserted else {
                        throw MLSTreeError.duplicateEncryptionKey(node: UInt32(i))
                    }
                case nil:
                    break
                }
            }
        }
    }
}

/// A public key's bytes as a set element that hashes fast: a 32-byte key (X25519, Ed25519) as
/// four words, any other length as its bytes. Keys of different lengths are different.
enum KeyBytes: Hashable {
    case words(UInt64, UInt64, UInt64, UInt64)
    case bytes([UInt8])

    init(_ bytes: [UInt8]) {
        guard bytes.count == 32 else {
            self = .bytes(bytes)
            return
        }
        self = bytes.withUnsafeBytes { raw in
            .words(
                raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
        }
    }
}
