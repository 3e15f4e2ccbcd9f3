/// Saving and restoring a member's state as bytes.
extension MLSGroup {
    /// The version of ``savedState()``'s layout.
    static let savedStateVersion: UInt8 = 1

    /// The whole state as bytes, to restore with ``init(savedState:)``.
    ///
    /// **The bytes are secret**: they hold the member's signature private key, its TreeKEM
    /// private keys (and an unapplied Update's), the epoch's `joiner_secret` (from which every secret of the epoch derives)
    /// and the secret tree's unused keys. Store them encrypted, never log them, and do not keep
    /// old copies: restoring an old copy brings back deleted keys (replays of its epoch's
    /// messages would decrypt again) and loses forward secrecy.
    ///
    /// Layout (TLS presentation language): `uint8 version = 1; GroupContext context;
    /// RatchetTree tree; uint32 my_leaf; opaque signature_private_key<V>; TreeKEMPrivateKeys keys;
    /// opaque joiner_secret<V>; optional<opaque> psk_secret; opaque interim_transcript_hash<V>;
    /// SecretTree secret_tree; (opaque ref<V>, Proposal proposal, uint32 sender) proposals<V>;
    /// optional<opaque> pending_update_private_key;`. The epoch's secrets are derived again from `joiner_secret` and
    /// `psk_secret`.
    public func savedState() throws -> [UInt8] {
        var w = TLSWriter()
        w.writeUInt8(Self.savedStateVersion)
        try groupContext.encode(to: &w)
        try tree.ratchetTree().encode(to: &w)
        w.writeUInt32(myLeaf.value)
        try w.writeOpaque(Array(signer.key.rawRepresentation))
        try privateKeys.encodeState(to: &w)
        try w.writeOpaque(epochSecrets.joinerSecret.bytes)
        try w.writeOptional(pskSecret) { try $0.writeOpaque($1.bytes) }
        try w.writeOpaque(interimTranscriptHash)
        try protection.secretTree.encodeState(to: &w)
        try w.writeVector { v in
            for cached in proposalCache {
                try v.writeOpaque(cached.reference)
                try cached.proposal.encode(to: &v)
                v.writeUInt32(cached.sender.value)
            }
        }
        try w.writeOptional(pendingUpdateKey) { try $0.writeOpaque(Array($1.key.rawRepresentation)) }
        return w.bytes
    }

    /// The state ``savedState()`` saved. Checks that it holds together: the suite is one of
    /// this build, the tree's hash is the context's, the member's leaf is in it with the
    /// signature key's public key, and the private keys fit the tree.
    public init(savedState bytes: [UInt8]) throws {
        var r = TLSReader(bytes)
        guard try r.readUInt8() == Self.savedStateVersion else { throw MLSGroupError.invalidSavedState }
        let context = try GroupContext(from: &r)
        guard let suite = MLSCipherSuite(context.cipherSuite) else { throw MLSGroupError.invalidSavedState }
        let tree = try PublicRatchetTree(suite: suite, ratchetTree: try RatchetTree(from: &r))
        let me = LeafIndex(try r.readUInt32())
        let signer = try SignaturePrivateKey(rawRepresentation: try r.readOpaque())
        let keys = try TreeKEMPrivateKeys(stateFrom: &r)
        let joinerSecret = SecretBytes(try r.readOpaque())
        let psk = try r.readOptional { SecretBytes(try $0.readOpaque()) }
        let secrets = try EpochSecrets(suite: suite, joinerSecret: joinerSecret, pskSecret: psk, groupContext: context)
        let interim = try r.readOpaque()
        let secretTree = try SecretTree(suite: suite, size: tree.size, stateFrom: &r)
        let cache = try r.readVector { v in
            CachedProposal(reference: try v.readOpaque(), proposal: try Proposal(from: &v), sender: LeafIndex(try v.readUInt32()))
        }
        let updateKey = try r.readOptional { try HPKEPrivateKey(rawRepresentation: try $0.readOpaque()) }
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
        pskSecret = psk
        proposalCache = cache
        pendingUpdateKey = updateKey
        interimTranscriptHash = interim
        protection = try MessageProtection(
            suite: suite, groupContext: context, membershipKey: secrets.membershipKey, senderDataSecret: secrets.senderDataSecret,
            secretTree: secretTree)
    }
}
