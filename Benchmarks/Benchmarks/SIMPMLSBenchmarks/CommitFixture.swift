@_spi(Testing) import SIMPMLS

/// A group of `members` members in a steady state, for commit benchmarks (issue 42): every
/// member joined with a key package of its own, and every parent node of the tree is set, as
/// after members all over the tree have committed. Two real members hold ``MLSGroup`` states:
/// the committer at leaf 0 and, at leaf 1, the member whose processing of the committer's path
/// is the longest (the committer's sibling: it decrypts the lowest path secret and derives every
/// node key above it).
///
/// How it is built, without thousands of real commits:
/// 1. a key package per member (`MLSKeyPackageBundle`: fresh keys, signed), their leaf nodes
///    side by side and every parent blank (the tree after one commit adding them all, by value,
///    without a path);
/// 2. every odd leaf but leaf 1, left to right, "commits": its path is merged exactly as
///    `createUpdatePath` merges it (keys from a fresh leaf secret, parent hashes, the leaf
///    re-signed as source `commit`), only without encrypting the path secrets, which no one
///    here reads (`mergingPathWithoutCiphertexts`, SPI). Every parent is then set, by the
///    rightmost committer below it;
/// 3. leaves 0 and 1 (still their key packages) join from a real Welcome signed by leaf 3 (leaf
///    1 for 2 members), whose GroupInfo carries the tree (checked in full by the join: tree
///    hash, parent hashes, every leaf's signature);
/// 4. leaf 1 commits a self-update with a real path, which leaf 0 processes: both are then in
///    an epoch that a real commit started, and leaf 1 holds the private keys of its whole direct
///    path.
///
/// Randomness is from a fixed seed.
struct CommitFixture {
    static let lifetime = Lifetime(notBefore: 0, notAfter: .max)
    static let capabilities = Capabilities(
        versions: [1], cipherSuites: [CipherSuiteID(1), CipherSuiteID(3)], extensions: [], proposals: [], credentials: [.basic])

    let members: Int
    let suite: MLSCipherSuite
    /// Leaf 0.
    let committer: MLSGroup
    /// Leaf 1.
    let processor: MLSGroup
    var random: DeterministicRandom

    init(members: Int, suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519, seed: UInt64 = 1) throws {
        precondition(members >= 2)
        self.members = members
        self.suite = suite
        var random = DeterministicRandom(seed: seed)
        let groupID = random.bytes(16)
        let bundles = try (0..<members).map { i in try Self.bundle(suite: suite, name: "member \(i)", random: &random) }

        var nodes: [Node?] = []
        for (i, bundle) in bundles.enumerated() {
            if i > 0 { nodes.append(nil) }
            nodes.append(.leaf(bundle.keyPackage.leafNode))
        }
        var tree = try PublicRatchetTree(suite: suite, ratchetTree: try RatchetTree(nodes: nodes))
        for leaf in stride(from: 3, to: members, by: 2) {
            tree = try tree.mergingPathWithoutCiphertexts(
                from: LeafIndex(UInt32(leaf)), leafSecret: SecretBytes(random.bytes(suite.hashLength)), signer: bundles[leaf].signer,
                groupID: groupID)
        }

        // The Welcome of an epoch that the committer and the processor join.
        let signerLeaf = members > 3 ? 3 : 1
        let context = GroupContext(
            cipherSuite: suite.id, groupID: groupID, epoch: 100, treeHash: try tree.treeHash(),
            confirmedTranscriptHash: random.bytes(suite.hashLength), extensions: [])
        let joinerSecret = random.bytes(suite.hashLength)
        let secrets = try EpochSecrets(suite: suite, joinerSecret: SecretBytes(joinerSecret), pskSecret: nil, groupContext: context)
        var info = GroupInfoIn(
            groupContext: context,
            extensions: [Extension(extensionType: RatchetTree.extensionType, extensionData: try tree.ratchetTree().mlsEncoded())],
            confirmationTag: secrets.confirmationTag(confirmedTranscriptHash: context.confirmedTranscriptHash),
            signer: UInt32(signerLeaf), signature: [])
        info.signature = try suite.signWithLabel(
            bundles[signerLeaf].signer, label: GroupInfoTBS.label, content: try info.toBeSigned.mlsEncoded())
        let groupSecrets = GroupSecrets(joinerSecret: joinerSecret, pathSecret: nil, psks: [])
        let welcome = try Welcome(sealing: info, epochSecrets: secrets, newMembers: [
            (bundles[0].keyPackage, groupSecrets, random.bytes(32)), (bundles[1].keyPackage, groupSecrets, random.bytes(32)),
        ])
        var committer = try MLSGroup(joining: welcome, with: bundles[0])
        var processor = try MLSGroup(joining: welcome, with: bundles[1])

        let update = try processor.commit(randomness: { random.bytes($0) })
        guard try committer.process(update.message) == .newEpoch(101) else { throw FixtureError.setup }
        self.committer = committer
        self.processor = update.group
        self.random = random
    }

    static func bundle(suite: MLSCipherSuite, name: String, random: inout DeterministicRandom) throws -> MLSKeyPackageBundle {
        try MLSKeyPackageBundle(
            suite: suite, credential: .basic(identity: Array(name.utf8)), capabilities: capabilities, lifetime: lifetime,
            signer: try SignaturePrivateKey(rawRepresentation: random.bytes(32)), randomness: { random.bytes($0) })
    }

    /// The last member's leaf: the one removed by the Remove benchmarks (its direct path, up to
    /// the root, is blanked, so the committer encrypts to more nodes on that side).
    var lastLeaf: LeafIndex { LeafIndex(UInt32(members - 1)) }

    /// A fresh key package for the member the Add benchmarks add.
    mutating func newMember() throws -> MLSKeyPackageBundle {
        try Self.bundle(suite: suite, name: "new member", random: &random)
    }

    /// The committer's commit removing `removing` and adding `adding`, with fresh randomness.
    mutating func commit(adding: [KeyPackage] = [], removing: [LeafIndex] = []) throws -> MLSGroup.CommitOutput {
        var random = self.random
        defer { self.random = random }
        // Every sample commits from the same epoch: `commit` is mutating (a commit sent as a
        // PrivateMessage takes a handshake generation), so it runs on a copy.
        var group = committer
        return try group.commit(adding: adding, removing: removing, randomness: { random.bytes($0) })
    }

    /// The processor's state after `commit` (which must not remove it).
    func process(_ commit: MLSMessage) throws -> MLSGroup {
        var group = processor
        guard case .newEpoch = try group.process(commit) else { throw FixtureError.notProcessed }
        return group
    }

    enum FixtureError: Error { case setup, notProcessed }
}
