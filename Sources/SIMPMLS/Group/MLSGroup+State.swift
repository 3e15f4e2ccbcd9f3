/// Saving and restoring a member's state as bytes.
extension MLSGroup {
    /// The version of ``savedState()``'s layout.
    static let savedStateVersion: UInt8 = 3

    /// The whole state as bytes, to restore with ``init(savedState:credentialValidator:proposalApprover:)``.
    ///
    /// **The bytes are secret**: they hold the member's signature private key, its TreeKEM
    /// private keys (and an unapplied Update's), the epoch's kept secrets (``KeptEpochSecrets``:
    /// `init_secret` for the next epoch, the exporter, external and resumption secrets and the
    /// epoch authenticator; never `joiner_secret`, `welcome_secret` or `psk_secret`, section 9.2),
    /// `membership_key`, `sender_data_secret`, the secret tree's unused keys, the kept past epochs' keys and `resumption_psk`s. Store them encrypted, never log them, and do not keep
    /// old copies: restoring an old copy brings back deleted keys (replays of its epoch's
    /// messages would decrypt again) and loses forward secrecy.
    ///
    /// Layout (TLS presentation language): `uint8 version = 3; GroupContext context;
    /// RatchetTree tree; uint32 my_leaf; opaque signature_private_key<V>; TreeKEMPrivateKeys keys;
    /// opaque exporter_secret<V>; opaque external_secret<V>; opaque resumption_psk<V>; opaque
    /// epoch_authenticator<V>; opaque init_secret<V>; opaque membership_key<V>; opaque
    /// sender_data_secret<V>; opaque interim_transcript_hash<V>;
    /// opaque confirmation_tag<V>; SecretTree secret_tree; (opaque ref<V>, Proposal proposal,
    /// Sender sender) proposals<V>; optional<opaque> pending_update_private_key; WireFormat
    /// handshake_wire_format; WireFormat accepted<V>; uint32 past_epochs_kept; uint32
    /// resumption_psks_kept; uint8 accepts_external_commits; uint8 accepts_new_member_proposals;
    /// (GroupContext context, opaque sender_data_secret<V>, uint32 leaf_count, SecretTree secret_tree, (uint32 leaf, opaque
    /// signature_key<V>) keys<V>) past_epochs<V>; (uint64 epoch, opaque psk<V>) resumption_psks<V>;
    /// optional<ReInit> reinit;`. The credential validator and proposal approver are not saved.
    public func savedState() throws -> [UInt8] {
        var w = TLSWriter()
        w.writeUInt8(Self.savedStateVersion)
        try groupContext.encode(to: &w)
        try tree.ratchetTree().encode(to: &w)
        w.writeUInt32(myLeaf.value)
        try w.writeOpaque(Array(signer.key.rawRepresentation))
        try privateKeys.encodeState(to: &w)
        try epochSecrets.encodeState(to: &w)
        try w.writeOpaque(protection.membershipKey.bytes)
        try w.writeOpaque(protection.senderDataSecret.bytes)
        try w.writeOpaque(interimTranscriptHash)
        try w.writeOpaque(confirmationTag)
        try protection.secretTree.encodeState(to: &w)
        try w.writeVector { v in
            for cached in proposalCache {
                try v.writeOpaque(cached.reference)
                try cached.proposal.encode(to: &v)
                try cached.sender.encode(to: &v)
            }
        }
        try w.writeOptional(pendingUpdateKey) { try $0.writeOpaque(Array($1.key.rawRepresentation)) }
        try encodePolicy(to: &w)
        try w.writeVector { v in for past in pastEpochs { try past.encodeState(to: &v) } }
        try w.writeVector { v in
            for kept in resumptionPSKs {
                v.writeUInt64(kept.epoch)
                try v.writeOpaque(kept.secret.bytes)
            }
        }
        try w.writeOptional(reInit) { try $1.encode(to: &$0) }
        return w.bytes
    }

    func encodePolicy(to w: inout TLSWriter) throws {
        try policy.handshakeWireFormat.encode(to: &w)
        try w.writeVector(policy.acceptedHandshakeWireFormats.sorted { $0.rawValue < $1.rawValue })
        w.writeUInt32(UInt32(clamping: max(0, policy.pastEpochsKept)))
        w.writeUInt32(UInt32(clamping: max(0, policy.resumptionPSKsKept)))
        w.writeUInt8(policy.acceptsExternalCommits ? 1 : 0)
        w.writeUInt8(policy.acceptsNewMemberProposals ? 1 : 0)
    }

    static func decodePolicy(from r: inout TLSReader) throws -> MLSGroupPolicy {
        MLSGroupPolicy(
            handshakeWireFormat: try r.readEnum(WireFormat.self),
            acceptedHandshakeWireFormats: Set(try r.readVector { try $0.readEnum(WireFormat.self) }),
            pastEpochsKept: Int(try r.readUInt32()), resumptionPSKsKept: Int(try r.readUInt32()),
            acceptsExternalCommits: try readFlag(&r), acceptsNewMemberProposals: try readFlag(&r))
    }

    private static func readFlag(_ r: inout TLSReader) throws -> Bool {
        switch try r.readUInt8() {
        case 0: false
        case 1: true
        default: throw MLSGroupError.invalidSavedState
        }
    }

    /// The state ``savedState()`` saved. Checks that it holds together: the suite is one of
    /// this build, the tree's hash is the context's, the member's leaf is in it with the
    /// signature key's public key, and the private keys fit the tree.
    /// The credential validator and the proposal approver are not part of the state (they are
    /// the application's code), so the caller names them again, or nil on purpose: a restore
    /// never drops the checks silently.
    public init(
        savedState bytes: [UInt8], credentialValidator: (any CredentialValidator)?, proposalApprover: (any MLSProposalApprover)?
    ) throws {
        var r = TLSReader(bytes)
        guard try r.readUInt8() == Self.savedStateVersion else { throw MLSGroupError.invalidSavedState }
        let context = try GroupContext(from: &r)
        guard let suite = MLSCipherSuite(context.cipherSuite) else { throw MLSGroupError.invalidSavedState }
        let tree = try PublicRatchetTree(suite: suite, ratchetTree: try RatchetTree(from: &r))
        let me = LeafIndex(try r.readUInt32())
        let signer = try SignaturePrivateKey(rawRepresentation: try r.readOpaque())
        let keys = try TreeKEMPrivateKeys(stateFrom: &r)
        let secrets = try KeptEpochSecrets(suite: suite, epoch: context.epoch, stateFrom: &r)
        let membershipKey = SecretBytes(try r.readOpaque())
        let senderDataSecret = SecretBytes(try r.readOpaque())
        let interim = try r.readOpaque()
        let tag = try r.readOpaque()
        let secretTree = try SecretTree(suite: suite, size: tree.size, stateFrom: &r)
        let cache = try r.readVector { v in
            CachedProposal(reference: try v.readOpaque(), proposal: try Proposal(from: &v), sender: try Sender(from: &v))
        }
        let updateKey = try r.readOptional { try HPKEPrivateKey(rawRepresentation: try $0.readOpaque()) }
        let policy = try Self.decodePolicy(from: &r)
        let past = try r.readVector { try PastEpoch(suite: suite, stateFrom: &$0) }
        let psks = try r.readVector { v in (epoch: try v.readUInt64(), secret: SecretBytes(try v.readOpaque())) }
        let reInit = try r.readOptional { try ReInitProposal(from: &$0) }
        try r.finish()
        guard try tree.treeHash() == context.treeHash, keys.leaf == me,
              tree.leaf(me)?.signatureKey.bytes == signer.publicKey.rawRepresentation
        else { throw MLSGroupError.invalidSavedState }
        try keys.checkConsistent(with: tree)
        self.suite = suite
        groupContext = context
        self.tree = tree
        myLeaf = me
        self.signer = signer
        privateKeys = keys
        epochSecrets = secrets
        proposalCache = cache
        pendingUpdateKey = updateKey
        interimTranscriptHash = interim
        confirmationTag = tag
        self.policy = policy
        pastEpochs = past
        resumptionPSKs = psks
        self.reInit = reInit
        protection = try MessageProtection(
            suite: suite, groupContext: context, membershipKey: membershipKey, senderDataSecret: senderDataSecret,
            secretTree: secretTree)
        self.credentialValidator = credentialValidator
        self.proposalApprover = proposalApprover
    }
}

extension MLSGroup.PastEpoch {
    func encodeState(to w: inout TLSWriter) throws {
        try groupContext.encode(to: &w)
        try w.writeOpaque(senderDataSecret.bytes)
        w.writeUInt32(secretTree.size.leafCount)
        try secretTree.encodeState(to: &w)
        try w.writeVector { v in
            for (leaf, key) in signatureKeys.sorted(by: { $0.key < $1.key }) {
                v.writeUInt32(leaf)
                try key.encode(to: &v)
            }
        }
    }

    init(suite: MLSCipherSuite, stateFrom r: inout TLSReader) throws {
        groupContext = try GroupContext(from: &r)
        try EpochSecrets.checkSuite(suite, groupContext)
        senderDataSecret = SecretBytes(try r.readOpaque())
        try KeySchedule.checkLength(senderDataSecret, "sender_data_secret", suite)
        guard let size = TreeSize(leafCount: try r.readUInt32()) else { throw MLSGroupError.invalidSavedState }
        secretTree = try SecretTree(suite: suite, size: size, stateFrom: &r)
        let keys = try r.readVector { v in (try v.readUInt32(), try SignaturePublicKeyIn(from: &v)) }
        signatureKeys = Dictionary(keys, uniquingKeysWith: { first, _ in first })
    }
}
