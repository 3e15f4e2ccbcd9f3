/// Why a ratchet tree, a change to it or an UpdatePath is refused (RFC 9420 sections 7, 12.1,
/// 12.4.3.1). Node and leaf indices are the tree's; no case carries key or secret bytes.
/// Signature failures are ``MLSCryptoError/invalidSignature``, keys that are not keys of the
/// suite ``MLSCryptoError/invalidKey(_:)``.
public enum MLSTreeError: Error, Equatable, Sendable {
    /// The tree would need more leaves than 32-bit node indices allow.
    case tooLarge
    /// A leaf index outside the tree.
    case noSuchLeaf(UInt32)
    /// A leaf that must hold a member is blank.
    case blankLeaf(UInt32)
    /// The tree hash is not the one expected (section 7.8, 12.4.3.1).
    case treeHashMismatch
    /// A non-blank parent node that is not parent-hash valid: not exactly one descendant's
    /// `parent_hash` links to it (section 7.9.2).
    case parentHashInvalid(node: UInt32)
    /// A committer's leaf whose `parent_hash` is not the parent hash of the first node of its
    /// filtered direct path (section 7.9.2).
    case leafParentHashMismatch
    /// A parent node's `unmerged_leaves`: not sorted and unique, naming a blank leaf or a leaf
    /// outside its subtree, or missing from a non-blank node between the leaf and the parent
    /// (sections 7.1, 12.4.3.1).
    case unmergedLeavesInvalid(node: UInt32)
    /// An `encryption_key` that appears in two nodes of the tree (sections 7.3, 12.4.3.1).
    case duplicateEncryptionKey(node: UInt32)
    /// A `signature_key` that two leaves share (section 7.3).
    case duplicateSignatureKey(leaf: UInt32)
    /// A leaf node whose credential type or non-default extension types are not in its own
    /// capabilities, or whose credential type another member does not support (section 7.3).
    case unsupportedCapability(leaf: UInt32)
    /// A leaf node of source `key_package` whose lifetime does not contain the time given (section 7.3).
    case lifetimeInvalid(leaf: UInt32)
    /// A leaf node whose `leaf_node_source` is not the one its place requires (section 7.3).
    case wrongLeafNodeSource(leaf: UInt32, expected: LeafNodeSource, got: LeafNodeSource)
    /// A leaf node replacing a member's whose `encryption_key` is the old one (sections 7.3, 7.5).
    case encryptionKeyNotUpdated(leaf: UInt32)
    /// An UpdatePath with a different number of nodes than the sender's filtered direct path (section 7.6).
    case updatePathLength(expected: Int, got: Int)
    /// An UpdatePathNode with a different number of ciphertexts than the copath node's
    /// resolution has nodes (section 7.6).
    case ciphertextCount(node: UInt32, expected: Int, got: Int)
    /// The receiver holds no private key for any node of the resolution its path secret was
    /// encrypted to, or processes its own UpdatePath.
    case noDecryptionKey
    /// A public key derived from a decrypted path secret is not the one the UpdatePath (or the
    /// tree, for private state) carries (sections 7.5, 7.4).
    case publicKeyMismatch(node: UInt32)
    /// Private state for a node that is blank in the tree or not on the leaf's direct path.
    case privateStateInconsistent(node: UInt32)
    /// The signature private key does not belong to the leaf node's `signature_key`.
    case signerMismatch
}
