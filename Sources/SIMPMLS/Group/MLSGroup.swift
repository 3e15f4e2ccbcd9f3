/// One member's state of an MLS group in one epoch (RFC 9420 sections 8, 11, 12): the
/// GroupContext, the public ratchet tree, the member's leaf, signature key and TreeKEM private
/// keys, the epoch's secrets, the interim transcript hash, and the keys protecting the epoch's
/// messages.
///
/// A value, and pure: randomness comes in as a closure (`randomness(n)` returns `n` fresh random
/// bytes), there is no clock, and a method that throws leaves the state unchanged. Only the
/// current epoch is kept: messages of earlier epochs are refused
/// (``MessageProtectionError/wrongEpoch(expected:got:)``).
///
/// Holds secrets: its description shows the epoch and leaf only.
public struct MLSGroup: Sendable, CustomStringConvertible, CustomReflectable {
    public let suite: MLSCipherSuite
    public internal(set) var groupContext: GroupContext
    public internal(set) var tree: PublicRatchetTree
    /// This member's leaf (it keeps its leaf index for as long as it is a member).
    public let myLeaf: LeafIndex
    let signer: SignaturePrivateKey
    var privateKeys: TreeKEMPrivateKeys
    var epochSecrets: EpochSecrets
    /// The epoch's `psk_secret` (nil: no PSK), kept so a saved state derives the same secrets.
    var pskSecret: SecretBytes?
    /// `interim_transcript_hash` of the epoch (section 8.2).
    var interimTranscriptHash: [UInt8]
    /// The epoch's message keys, with the generations used so far deleted.
    var protection: MessageProtection
    /// Proposals of this epoch received or sent on their own, by reference (section 12.2); a
    /// new epoch starts with none.
    var proposalCache: [CachedProposal] = []
    /// The private key of this member's Update proposal of this epoch, if it sent one.
    var pendingUpdateKey: HPKEPrivateKey?

    /// A proposal sent on its own in this epoch, by its `ProposalRef`.
    struct CachedProposal: Sendable {
        let reference: [UInt8]
        let proposal: Proposal
        let sender: LeafIndex
    }

    public var groupID: [UInt8] { groupContext.groupID }
    public var epoch: UInt64 { groupContext.epoch }
    /// `epoch_authenticator` (section 8.7): members of the same epoch agree on it.
    public var epochAuthenticator: SecretBytes { epochSecrets.epochAuthenticator }

    /// The state of an epoch; the message keys are derived from `epochSecrets`.
    init(
        suite: MLSCipherSuite, groupContext: GroupContext, tree: PublicRatchetTree, myLeaf: LeafIndex,
        signer: SignaturePrivateKey, privateKeys: TreeKEMPrivateKeys, epochSecrets: EpochSecrets, interimTranscriptHash: [UInt8],
        pskSecret: SecretBytes? = nil
    ) throws {
        self.suite = suite
        self.groupContext = groupContext
        self.tree = tree
        self.myLeaf = myLeaf
        self.signer = signer
        self.privateKeys = privateKeys
        self.epochSecrets = epochSecrets
        self.pskSecret = pskSecret
        self.interimTranscriptHash = interimTranscriptHash
        protection = try MessageProtection(epochSecrets: epochSecrets, groupContext: groupContext, treeSize: tree.size)
    }

    /// Creates a one-member group at epoch 0 (section 11): the creator's leaf (source
    /// `key_package`, its encryption key from `randomness`) alone in the tree; a GroupContext with
    /// an empty confirmed transcript hash; and the epoch's secrets from a fresh random secret.
    ///
    /// The RFC draws a random `epoch_secret`; here a random `joiner_secret` (with no PSK) is
    /// expanded into it with the GroupContext, which is as unpredictable. The confirmation tag
    /// of epoch 0 is `MAC(confirmation_key, "")` and the interim transcript hash follows from it.
    public static func create(
        groupID: [UInt8], suite: MLSCipherSuite, credential: Credential, capabilities: Capabilities, lifetime: Lifetime,
        signer: SignaturePrivateKey, randomness: (Int) throws -> [UInt8]
    ) throws -> MLSGroup {
        let encryptionKey = try suite.deriveHPKEKeyPair(ikm: try randomness(suite.hashLength))
        let leaf = try LeafNode.signed(
            suite: suite, encryptionKey: encryptionKey.publicKey, credential: credential, capabilities: capabilities,
            source: .keyPackage(lifetime: lifetime), signer: signer, group: nil)
        let tree = PublicRatchetTree(suite: suite, creator: leaf)
        let context = GroupContext(
            cipherSuite: suite.id, groupID: groupID, epoch: 0, treeHash: try tree.treeHash(), confirmedTranscriptHash: [],
            extensions: [])
        let secrets = try EpochSecrets(
            suite: suite, joinerSecret: SecretBytes(try randomness(suite.hashLength)), pskSecret: nil, groupContext: context)
        let tag = secrets.confirmationTag(confirmedTranscriptHash: [])
        let me = LeafIndex(0)
        return try MLSGroup(
            suite: suite, groupContext: context, tree: tree, myLeaf: me, signer: signer,
            privateKeys: TreeKEMPrivateKeys(leaf: me, encryptionKey: encryptionKey), epochSecrets: secrets,
            interimTranscriptHash: try TranscriptHashes.interim(confirmed: [], confirmationTag: tag, suite: suite))
    }

    /// The leaves of the members, in order.
    public var members: [LeafIndex] { tree.memberLeaves }

    public var description: String { "MLSGroup(suite \(suite.id), epoch \(epoch), \(myLeaf), redacted)" }
    public var customMirror: Mirror { Mirror(self, children: ["epoch": epoch, "leaf": myLeaf.value], displayStyle: .struct) }
}
