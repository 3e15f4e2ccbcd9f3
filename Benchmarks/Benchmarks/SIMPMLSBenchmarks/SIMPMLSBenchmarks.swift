import Benchmark
import SIMPMLS

/// MLS (RFC 9420) message protection, issue 42 item 4: what one application message costs its
/// sender and its receiver, for cipher suites 1 and 3, as a member of a 2-member group whose
/// epoch keys come from the real key schedule (``MLSGroupFixture``).
///
/// One message per sample (scaling factor one), so the time and allocations are per message and
/// the percentiles are those of single messages; each message is a fresh generation of the
/// sender's application ratchet, and each receive that generation's first and only use. A
/// decrypt with 1,024 leaves' ratchets held, and the secret tree's share of a receive, show how
/// a message's cost depends on the group's size.
///
/// Commits (issue 42): creating and processing a commit that removes one member, and one that
/// adds one, in groups of 2 to 10,000 members (``CommitFixture``), with the commit's size, the
/// Welcome's size, and the new member's join from it.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput], warmupIterations: 10, scalingFactor: .one,
        maxDuration: .seconds(3), maxIterations: 20_000)

    for suite in MLSGroupFixture.suites {
        let name = "suite \(suite.rawValue)"
        let payload = MLSGroupFixture.payload(count: 1024)

        // The sender's whole path: frame, sign (Ed25519), protect (sender data and content
        // sealed), encode as an MLSMessage.
        do {
            var group = try! MLSGroupFixture(suite: suite)
            Benchmark("PrivateMessage encrypt, 1 KiB application data (\(name))") { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(try group.encrypt(payload))
                }
            }
        }

        // The receiver's whole path: decode the MLSMessage, open the sender data, take the
        // generation's key, open the content, verify the signature. The message is protected
        // (unmeasured) in the same sample, so each decrypt is of a new generation.
        do {
            var group = try! MLSGroupFixture(suite: suite)
            Benchmark("PrivateMessage decrypt, 1 KiB application data (\(name))") { benchmark in
                for _ in benchmark.scaledIterations {
                    let wire = try group.encrypt(payload)
                    benchmark.startMeasurement()
                    blackHole(try group.decrypt(wire))
                    benchmark.stopMeasurement()
                }
            }
        }

        // The share of the sender's work that is not the signature: protect content that is
        // already signed (the same content, under a new generation each time).
        do {
            var group = try! MLSGroupFixture(suite: suite)
            let signed = try! group.sign(payload)
            Benchmark("PrivateMessage protect only (signed), 1 KiB (\(name))") { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(try group.protect(signed))
                }
            }
        }
    }

    // The same decrypt in a tree of 1,024 leaves in which every member has sent this epoch
    // (Bob holds all 1,024 leaves' ratchets): whether a message's cost grows with the group.
    do {
        var group = try! MLSGroupFixture(suite: .x25519AES128GCMSHA256Ed25519, leafCount: 1024)
        let payload = MLSGroupFixture.payload(count: 1024)
        Benchmark("PrivateMessage decrypt, 1 KiB, 1,024 leaves' ratchets held (suite 1)") { benchmark in
            for _ in benchmark.scaledIterations {
                let wire = try group.encrypt(payload)
                benchmark.startMeasurement()
                blackHole(try group.decrypt(wire))
                benchmark.stopMeasurement()
            }
        }
    }

    commitBenchmarks()

    // What a receive costs the secret tree as the group grows: the key of a new generation of
    // one sender when `senders` leaves have sent in the epoch (their ratchets held). The tree is
    // a value and takes the key on a copy, so this shows whether a message's cost depends on
    // the number of members.
    for senders: UInt32 in [2, 1024] {
        let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
        var random = DeterministicRandom(seed: 7)
        var tree = try! SecretTree(
            suite: suite, encryptionSecret: SecretBytes(random.bytes(suite.hashLength)), size: TreeSize(leafCount: senders)!)
        for leaf in 0..<senders { _ = try! tree.key(leaf: LeafIndex(leaf), type: .application, generation: 0) }
        var generation: UInt32 = 0
        Benchmark("SecretTree receive key, \(senders) senders' ratchets held (suite 1)") { benchmark in
            for _ in benchmark.scaledIterations {
                generation += 1
                blackHole(try tree.key(leaf: LeafIndex(0), type: .application, generation: generation))
            }
        }
    }
}

/// Two members of a group at epoch 1, as the RFC's steps give them their keys: Alice (leaf 0)
/// created the group at epoch 0 from a random `init_secret` and committed Bob's Add (no path, so
/// `commit_secret` is zero); Bob joined epoch 1 from the `joiner_secret` of his Welcome. Each
/// holds a ``MessageProtection`` of a secret tree of 2 leaves, or of `leafCount` leaves in which
/// Bob has derived every leaf's ratchets (as if all had sent this epoch). The tree hash and confirmed
/// transcript hash are stand-ins (32 bytes each, the suite's hash length) until the ratchet
/// tree and the transcript exist.
///
/// Randomness (init secret, group ID, signature key seeds, reuse guards) is from a fixed seed.
struct MLSGroupFixture {
    static let suites: [MLSCipherSuite] = [.x25519AES128GCMSHA256Ed25519, .x25519ChaCha20Poly1305SHA256Ed25519]
    /// The bytes of a random 128-bit group ID.
    static let groupIDLength = 16
    /// SIMP has no padding policy yet: none.
    static let paddingLength = 0

    let suite: MLSCipherSuite
    let context: GroupContext
    var alice: MessageProtection
    var bob: MessageProtection
    let aliceSigner: SignaturePrivateKey
    let aliceKey: SignaturePublicKey
    var random: DeterministicRandom

    init(suite: MLSCipherSuite, leafCount: UInt32 = 2, seed: UInt64 = 42) throws {
        self.suite = suite
        var random = DeterministicRandom(seed: seed &+ UInt64(suite.rawValue))
        let groupID = random.bytes(Self.groupIDLength)
        let context0 = GroupContext(
            cipherSuite: suite.id, groupID: groupID, epoch: 0, treeHash: random.bytes(suite.hashLength),
            confirmedTranscriptHash: [], extensions: [])
        let epoch0 = try EpochSecrets(
            suite: suite, initSecret: SecretBytes(random.bytes(suite.hashLength)), commitSecret: nil, pskSecret: nil,
            groupContext: context0)
        let context1 = GroupContext(
            cipherSuite: suite.id, groupID: groupID, epoch: 1, treeHash: random.bytes(suite.hashLength),
            confirmedTranscriptHash: random.bytes(suite.hashLength), extensions: [])
        let aliceSecrets = try EpochSecrets(
            suite: suite, initSecret: epoch0.initSecret, commitSecret: nil, pskSecret: nil, groupContext: context1)
        let bobSecrets = try EpochSecrets(suite: suite, joinerSecret: aliceSecrets.joinerSecret, pskSecret: nil, groupContext: context1)
        precondition(aliceSecrets.encryptionSecret == bobSecrets.encryptionSecret)
        let size = TreeSize(leafCount: leafCount)!
        context = context1
        alice = try MessageProtection(epochSecrets: aliceSecrets, groupContext: context1, treeSize: size)
        var bobTree = try SecretTree(suite: suite, encryptionSecret: bobSecrets.encryptionSecret, size: size)
        for leaf in 1..<leafCount { _ = try bobTree.key(leaf: LeafIndex(leaf), type: .application, generation: 0) }
        bob = try MessageProtection(
            suite: suite, groupContext: context1, membershipKey: bobSecrets.membershipKey, senderDataSecret: bobSecrets.senderDataSecret,
            secretTree: bobTree)
        aliceSigner = try SignaturePrivateKey(rawRepresentation: random.bytes(32))
        aliceKey = aliceSigner.publicKey
        self.random = random

        // Generation 0 sent and received: the tree's path to Alice's leaf is derived on both
        // sides, as it is for every message but an epoch's first.
        let first = try encrypt(Array("hello".utf8))
        _ = try decrypt(first)
    }

    /// Alice's application data, framed and signed for a PrivateMessage.
    func sign(_ data: [UInt8]) throws -> AuthenticatedContent {
        let framed = FramedContent(
            groupID: context.groupID, epoch: context.epoch, sender: .member(leafIndex: 0), authenticatedData: [],
            content: .application(data))
        return try AuthenticatedContent(
            signing: framed, wireFormat: .privateMessage, context: context, signer: aliceSigner, suite: suite, confirmationTag: nil)
    }

    /// `signed` protected under Alice's next application generation.
    mutating func protect(_ signed: AuthenticatedContent) throws -> PrivateMessage {
        try alice.protect(signed, paddingLength: Self.paddingLength, reuseGuard: random.bytes(MessageProtection.reuseGuardLength))
    }

    /// Alice's `data` as the bytes of an MLSMessage.
    mutating func encrypt(_ data: [UInt8]) throws -> [UInt8] {
        try MLSMessage.privateMessage(try protect(try sign(data))).mlsEncoded()
    }

    /// Bob's reading of an MLSMessage from Alice: its application data.
    mutating func decrypt(_ wire: [UInt8]) throws -> [UInt8] {
        guard case .privateMessage(let message) = try MLSMessage(mlsDecoding: wire) else { throw FixtureError.notPrivate }
        let aliceKey = self.aliceKey
        let verified = try bob.unprotect(message) { leaf in
            guard leaf.value == 0 else { throw FixtureError.blankLeaf }
            return aliceKey
        }
        guard case .application(let data) = verified.content.content else { throw FixtureError.notApplication }
        return data
    }

    static func payload(count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) } }

    enum FixtureError: Error { case notPrivate, blankLeaf, notApplication }
}

/// SplitMix64: the same bytes for the same seed, standing in for the caller's randomness.
struct DeterministicRandom {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(count)
        while out.count < count {
            var word = next()
            for _ in 0..<min(8, count - out.count) {
                out.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return out
    }
}
