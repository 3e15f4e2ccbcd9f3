/// Why a decoded structure is not acceptable although it decoded and its signatures may verify:
/// RFC 9420's validation rules (sections 7.3, 10.1, 12.4.3 ...). Signature failures are
/// ``MLSCryptoError/invalidSignature``.
public enum MLSValidationError: Error, Equatable, Sendable {
    /// The structure names a cipher suite other than the one it is checked for.
    case cipherSuiteMismatch(expected: CipherSuiteID, got: CipherSuiteID)
    /// A leaf node whose `leaf_node_source` is not the one its place requires (section 7.3).
    case wrongLeafNodeSource(expected: LeafNodeSource, got: LeafNodeSource)
    /// A leaf node of source `update` or `commit` is signed over its group and leaf index,
    /// which the check was not given (section 7.2).
    case leafNodeNeedsGroup
    /// A leaf node of source `key_package` checked as the leaf of a group member (an Update or
    /// a commit's path, section 7.3), where `update` or `commit` is required.
    case keyPackageLeafInGroup
    /// A key package whose `init_key` equals its leaf node's `encryption_key` (section 10.1).
    case initKeyIsEncryptionKey
    /// Content that must be a commit (for the transcript hashes, section 8.2) is not one.
    case notACommit
    /// A public message's membership tag is missing, or present for a sender who is not a
    /// member, or does not verify (section 6.2).
    case invalidMembershipTag
}
