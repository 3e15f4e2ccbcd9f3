/// The keys of one epoch that protect and unprotect its messages (RFC 9420 section 6): the
/// GroupContext, `membership_key` (6.2), `sender_data_secret` (6.3.2) and the secret tree (9).
///
/// A value: ``protect(_:paddingLength:reuseGuard:)`` and ``unprotect(_:signatureKey:)`` on a
/// PrivateMessage change only its secret tree, and only when they succeed (a refused message,
/// even one carrying a real generation, deletes no key). Public messages use no state.
///
/// Messages must be of this epoch and group; one of another epoch is
/// ``MessageProtectionError/wrongEpoch(expected:got:)``, to be handed to that epoch's keys if
/// the application kept them. Nothing here prints a secret.
public struct MessageProtection: Sendable, CustomStringConvertible, CustomReflectable {
    public let suite: MLSCipherSuite
    public let groupContext: GroupContext
    let membershipKey: SecretBytes
    let senderDataSecret: SecretBytes
    /// The epoch's secret tree, with the generations used so far deleted: changed only by
    /// protecting and unprotecting private messages.
    var tree: SecretTree
    public var secretTree: SecretTree { tree }

    /// The keys of the epoch of `groupContext`. The context, the tree and the suite must agree,
    /// and the secrets must be `KDF.Nh` bytes long.
    public init(
        suite: MLSCipherSuite, groupContext: GroupContext, membershipKey: SecretBytes, senderDataSecret: SecretBytes,
        secretTree: SecretTree
    ) throws {
        try EpochSecrets.checkSuite(suite, groupContext)
        guard secretTree.suite == suite else {
            throw MLSValidationError.cipherSuiteMismatch(expected: suite.id, got: secretTree.suite.id)
        }
        try KeySchedule.checkLength(membershipKey, "membership_key", suite)
        try KeySchedule.checkLength(senderDataSecret, "sender_data_secret", suite)
        self.suite = suite
        self.groupContext = groupContext
        self.membershipKey = membershipKey
        self.senderDataSecret = senderDataSecret
        tree = secretTree
    }

    /// The keys of an epoch from its secrets and the size of its ratchet tree.
    public init(epochSecrets: EpochSecrets, groupContext: GroupContext, treeSize: TreeSize, window: RatchetWindow = .default) throws {
        guard epochSecrets.epoch == groupContext.epoch else {
            throw MessageProtectionError.wrongEpoch(expected: groupContext.epoch, got: epochSecrets.epoch)
        }
        try self.init(
            suite: epochSecrets.suite, groupContext: groupContext, membershipKey: epochSecrets.membershipKey,
            senderDataSecret: epochSecrets.senderDataSecret,
            secretTree: try SecretTree(suite: epochSecrets.suite, encryptionSecret: epochSecrets.encryptionSecret, size: treeSize, window: window))
    }

    /// Throws unless `groupID` and `epoch` are this group's and epoch's.
    func checkGroupAndEpoch(groupID: [UInt8], epoch: UInt64) throws {
        guard groupID == groupContext.groupID else { throw MessageProtectionError.wrongGroup }
        guard epoch == groupContext.epoch else { throw MessageProtectionError.wrongEpoch(expected: groupContext.epoch, got: epoch) }
    }

    public var description: String { "MessageProtection(suite \(suite.id), epoch \(groupContext.epoch), redacted)" }
    public var customMirror: Mirror { Mirror(self, children: ["epoch": groupContext.epoch], displayStyle: .struct) }
}
