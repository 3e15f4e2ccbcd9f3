/// The group's choices a member applies to what it sends and accepts (RFC 9420 sections 6,
/// 12.4.1, 15): the wire format of its proposals and commits, the wire formats it accepts for
/// other members' proposals and commits, and how much of the past it keeps.
public struct MLSGroupPolicy: Sendable, Equatable {
    /// The wire format of this member's proposals and commits: `publicMessage` (the default) or
    /// `privateMessage` (section 6.3, handshake ratchet). Any other value makes sending throw.
    public var handshakeWireFormat: WireFormat
    /// The wire formats accepted for another member's proposals and commits. Messages from
    /// non-members (external senders, new members) are PublicMessages always (sections 6.2,
    /// 12.1.8, 12.4.3.2) and are not affected.
    public var acceptedHandshakeWireFormats: Set<WireFormat>
    /// How many past epochs' secret trees are kept, for application messages that arrive after
    /// the commit that ended their epoch (section 12.4.2: "A client might keep the secret tree
    /// for a short time to decrypt late messages in the previous epoch"). 0, the default, keeps
    /// none: every key of an epoch is dropped with it (forward secrecy). With 1, a message of the
    /// previous epoch still decrypts (each generation once), one of two epochs ago does not.
    public var pastEpochsKept: Int
    /// How many past epochs' `resumption_psk` are kept for PreSharedKey proposals that name
    /// this group (section 8.6); the current epoch's is always available.
    public var resumptionPSKsKept: Int
    /// Whether external commits (section 12.4.3.2) are processed. Off by default: an external
    /// commit is signed only by a key its sender chose, so anyone holding a GroupInfo with
    /// `external_pub` could join, and section 12.1.8 leaves it to the application to authorize
    /// such joins. An application that turns it on also sets a ``MLSGroup/credentialValidator``.
    public var acceptsExternalCommits: Bool
    /// Whether Add proposals from `new_member_proposal` senders (section 12.1.8) are cached.
    /// Off by default: cached proposals are committed by the next commit, and such a proposal
    /// is signed only by its own key package.
    public var acceptsNewMemberProposals: Bool

    public init(
        handshakeWireFormat: WireFormat = .publicMessage,
        acceptedHandshakeWireFormats: Set<WireFormat> = [.publicMessage, .privateMessage],
        pastEpochsKept: Int = 0, resumptionPSKsKept: Int = 4,
        acceptsExternalCommits: Bool = false, acceptsNewMemberProposals: Bool = false
    ) {
        self.handshakeWireFormat = handshakeWireFormat
        self.acceptedHandshakeWireFormats = acceptedHandshakeWireFormats
        self.pastEpochsKept = pastEpochsKept
        self.resumptionPSKsKept = resumptionPSKsKept
        self.acceptsExternalCommits = acceptsExternalCommits
        self.acceptsNewMemberProposals = acceptsNewMemberProposals
    }

    /// Everything a passive client of the official test vectors must take.
    public static let acceptingEverything = MLSGroupPolicy(acceptsExternalCommits: true, acceptsNewMemberProposals: true)
}

/// One member's state of an MLS group in one epoch (RFC 9420 sections 8, 11, 12): the
/// GroupContext, the public ratchet tree, the member's leaf, signature key and TreeKEM private
/// keys, the epoch's secrets, the interim transcript hash, and the keys protecting the epoch's
/// messages.
///
/// A value, and pure: randomness comes in as a closure (`randomness(n)` returns `n` fresh random
/// bytes), there is no clock, and a method that throws leaves the state unchanged. Messages of
/// earlier epochs are refused (``MessageProtectionError/wrongEpoch(expected:got:)``) unless
/// ``MLSGroupPolicy/pastEpochsKept`` keeps their application keys.
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
    /// What the epoch still needs of its secrets (``KeptEpochSecrets``): not `joiner_secret`,
    /// `welcome_secret` nor `psk_secret` (RFC 9420 sections 8, 9.2).
    var epochSecrets: KeptEpochSecrets
    /// `interim_transcript_hash` of the epoch (section 8.2).
    var interimTranscriptHash: [UInt8]
    /// The epoch's message keys, with the generations used so far deleted.
    var protection: MessageProtection
    /// Proposals of this epoch received or sent on their own, by reference (section 12.2); a
    /// new epoch starts with none.
    var proposalCache: [CachedProposal] = []
    /// The private key of this member's Update proposal of this epoch, if it sent one.
    var pendingUpdateKey: HPKEPrivateKey?
    /// The confirmation tag of the commit that began this epoch (a GroupInfo carries it).
    var confirmationTag: [UInt8]
    /// What this member sends and accepts; carried into later epochs.
    public var policy = MLSGroupPolicy()
    /// The application's judge of credentials (section 5.3.1): when set, the credential of every
    /// leaf a proposal or commit brings in (an Add's key package, an Update, a committer's new
    /// leaf, an external joiner) must pass it, and a joiner's tree's every leaf. When nil the
    /// application checks credentials itself (``members`` and the tree's leaves). Not saved.
    public var credentialValidator: (any CredentialValidator)?
    /// The application's approval of each proposal a commit carries, with its sender (a
    /// member, an external sender, a new member; sections 12.1.8, 12.2): see
    /// ``MLSProposalApprover``. When nil every proposal that passes the RFC's checks is taken.
    /// Not saved.
    public var proposalApprover: (any MLSProposalApprover)?
    /// The secret trees of past epochs, newest first, at most ``MLSGroupPolicy/pastEpochsKept``.
    var pastEpochs: [PastEpoch] = []
    /// `resumption_psk` of past epochs, newest first, at most ``MLSGroupPolicy/resumptionPSKsKept``.
    var resumptionPSKs: [(epoch: UInt64, secret: SecretBytes)] = []
    /// The ReInit a commit of the previous epoch carried: the group may send nothing more
    /// (section 12.4.2) and waits for the Welcome to the new group.
    public internal(set) var reInit: ReInitProposal?

    /// A proposal sent on its own in this epoch, by its `ProposalRef`.
    struct CachedProposal: Sendable {
        let reference: [UInt8]
        let proposal: Proposal
        let sender: Sender
    }

    /// What is kept of a past epoch for its late application messages (RFC 9420 section 12.4.2:
    /// "keep the secret tree for a short time"), and nothing more: the GroupContext (public; a
    /// member's signature covers it, 6.1), `sender_data_secret` (6.3.2), the secret tree with its
    /// used generations deleted (9.2), and the members' signature keys. Not the membership key,
    /// the epoch's other secrets, its ratchet tree or proposals.
    struct PastEpoch: Sendable {
        let groupContext: GroupContext
        let senderDataSecret: SecretBytes
        var secretTree: SecretTree
        let signatureKeys: [UInt32: SignaturePublicKeyIn]
        var epoch: UInt64 { groupContext.epoch }
    }

    public var groupID: [UInt8] { groupContext.groupID }
    public var epoch: UInt64 { groupContext.epoch }
    /// `epoch_authenticator` (section 8.7): members of the same epoch agree on it.
    public var epochAuthenticator: SecretBytes { epochSecrets.epochAuthenticator }

    /// The state of an epoch; the message keys are derived from `epochSecrets`, of which only
    /// ``KeptEpochSecrets`` is kept (section 9.2): the caller's copy of `epochSecrets` (a
    /// committer's, for its Welcome) is the last place `joiner_secret` lives.
    init(
        suite: MLSCipherSuite, groupContext: GroupContext, tree: PublicRatchetTree, myLeaf: LeafIndex,
        signer: SignaturePrivateKey, privateKeys: TreeKEMPrivateKeys, epochSecrets: EpochSecrets, interimTranscriptHash: [UInt8],
        confirmationTag: [UInt8]
    ) throws {
        self.suite = suite
        self.groupContext = groupContext
        self.tree = tree
        self.myLeaf = myLeaf
        self.signer = signer
        self.privateKeys = privateKeys
        self.epochSecrets = KeptEpochSecrets(epochSecrets)
        self.interimTranscriptHash = interimTranscriptHash
        self.confirmationTag = confirmationTag
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
            interimTranscriptHash: try TranscriptHashes.interim(confirmed: [], confirmationTag: tag, suite: suite),
            confirmationTag: tag)
    }

    /// The state of the epoch a commit of this epoch begins: this member's policy, validator
    /// and kept past carried over, this epoch's secret tree kept if the policy says so.
    func moving(
        to next: NextEpoch, tree: PublicRatchetTree, privateKeys: TreeKEMPrivateKeys, reInit: ReInitProposal?
    ) throws -> MLSGroup {
        var group = try MLSGroup(
            suite: suite, groupContext: next.context, tree: tree, myLeaf: myLeaf, signer: signer, privateKeys: privateKeys,
            epochSecrets: next.secrets, interimTranscriptHash: next.interim, confirmationTag: next.confirmationTag)
        group.policy = policy
        group.credentialValidator = credentialValidator
        group.proposalApprover = proposalApprover
        group.pastEpochs = policy.pastEpochsKept > 0 ? Array(([try pastEpoch()] + pastEpochs).prefix(policy.pastEpochsKept)) : []
        group.resumptionPSKs = Array(([(epoch, epochSecrets.resumptionPSK)] + resumptionPSKs).prefix(max(0, policy.resumptionPSKsKept)))
        group.reInit = reInit
        return group
    }

    /// This epoch as a past one: what decrypting its late application messages needs.
    func pastEpoch() throws -> PastEpoch {
        var keys: [UInt32: SignaturePublicKeyIn] = [:]
        for leaf in tree.memberLeaves { keys[leaf.value] = tree.leaf(leaf)?.signatureKey }
        return PastEpoch(
            groupContext: groupContext, senderDataSecret: protection.senderDataSecret, secretTree: protection.secretTree,
            signatureKeys: keys)
    }

    /// The epochs whose late application messages still decrypt (``MLSGroupPolicy/pastEpochsKept``),
    /// newest first.
    public var keptPastEpochs: [UInt64] { pastEpochs.map(\.epoch) }

    /// Drops every kept past epoch's keys at once (RFC 9420 sections 9.2, 12.4.2), for example
    /// once late messages are no longer expected: their application messages are then
    /// refused with ``MLSGroupError/pastEpochNotKept(epoch:)``. The policy is unchanged, so the
    /// next commit keeps the epoch it ends again.
    public mutating func forgetPastEpochs() {
        pastEpochs = []
    }

    /// The leaves of the members, in order.
    public var members: [LeafIndex] { tree.memberLeaves }

    /// The credential of the member at `leaf` (section 5.3): who sent an application message
    /// that ``process(_:psk:)`` names by its leaf. Nil for a blank or absent leaf.
    public func credential(at leaf: LeafIndex) -> Credential? { tree.leaf(leaf)?.credential }

    /// The signature key of the member at `leaf` (section 5.3): what its credential was checked
    /// with when the leaf came in. Nil for a blank or absent leaf.
    public func signatureKey(at leaf: LeafIndex) -> [UInt8]? { tree.leaf(leaf)?.signatureKey.bytes }

    public var description: String { "MLSGroup(suite \(suite.id), epoch \(epoch), \(myLeaf), redacted)" }
    public var customMirror: Mirror { Mirror(self, children: ["epoch": epoch, "leaf": myLeaf.value], displayStyle: .struct) }
}
