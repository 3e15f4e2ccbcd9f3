import Foundation
import SIMPMLS
import Testing

/// Signed structures made with fixed keys, and the messages.json vectors as bytes.
enum MessageFixtures {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519

    static func signer(_ seed: UInt8) throws -> SignaturePrivateKey {
        try SignaturePrivateKey(rawRepresentation: [UInt8](repeating: seed, count: 32))
    }

    static func hpkeKey(_ seed: UInt8) throws -> HPKEPrivateKey {
        try suite.deriveHPKEKeyPair(ikm: [UInt8](repeating: seed, count: 32))
    }

    static let capabilities = Capabilities(
        versions: [1], cipherSuites: [CipherSuiteID(1), CipherSuiteID(3)], extensions: [], proposals: [],
        credentials: [.basic])

    /// A leaf node of `source`, signed by `signer` (for `group` when the source needs one).
    static func leafNode(
        signer: SignaturePrivateKey, encryptionKey: HPKEPublicKey, source: LeafNodeSourceFields = .keyPackage(
            lifetime: Lifetime(notBefore: 0, notAfter: .max)),
        group: LeafNodeTBS.Group? = nil, identity: String = "alice"
    ) throws -> LeafNode {
        var leaf = LeafNode(
            encryptionKey: HPKEPublicKeyIn(bytes: encryptionKey.rawRepresentation),
            signatureKey: SignaturePublicKeyIn(bytes: signer.publicKey.rawRepresentation),
            credential: .basic(identity: Array(identity.utf8)), capabilities: capabilities, sourceFields: source,
            extensions: [], signature: [])
        leaf.signature = try suite.signWithLabel(signer, label: LeafNodeTBS.label, content: try leaf.toBeSigned(group: group).mlsEncoded())
        return leaf
    }

    /// A key package with its leaf node and itself signed by `signer`.
    static func keyPackage(
        signer: SignaturePrivateKey, initKey: HPKEPublicKey, leafNode: LeafNode, cipherSuite: CipherSuiteID = CipherSuiteID(1)
    ) throws -> KeyPackageIn {
        var package = KeyPackageIn(
            cipherSuite: cipherSuite, initKey: HPKEPublicKeyIn(bytes: initKey.rawRepresentation), leafNode: leafNode,
            extensions: [], signature: [])
        package.signature = try suite.signWithLabel(signer, label: KeyPackageTBS.label, content: try package.toBeSigned.mlsEncoded())
        return package
    }

    /// A valid key package: signature key from seed 1, init key from seed 2, encryption key from seed 3.
    static func keyPackage() throws -> KeyPackageIn {
        let s = try signer(1)
        let leaf = try leafNode(signer: s, encryptionKey: try hpkeKey(3).publicKey)
        return try keyPackage(signer: s, initKey: try hpkeKey(2).publicKey, leafNode: leaf)
    }

    static let groupContext = GroupContext(
        cipherSuite: CipherSuiteID(1), groupID: Array("group".utf8), epoch: 7, treeHash: [UInt8](repeating: 1, count: 32),
        confirmedTranscriptHash: [UInt8](repeating: 2, count: 32), extensions: [])

    /// Every field of the first `count` cases of messages.json, by name.
    static func vectorMessages(cases count: Int = 1) throws -> [(field: String, bytes: [UInt8])] {
        let json = try JSONSerialization.jsonObject(with: try VectorFiles.load("messages.json"))
        let cases = try #require(json as? [[String: String]])
        var out: [(String, [UInt8])] = []
        for c in cases.prefix(count) {
            for (field, hex) in c.sorted(by: { $0.key < $1.key }) {
                out.append((field, try #require(bytes(hex: hex))))
            }
        }
        return out
    }

    static func bytes(hex: String) -> [UInt8]? {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        return stride(from: 0, to: chars.count, by: 2).compactMap { UInt8(String(decoding: chars[$0..<$0 + 2], as: UTF8.self), radix: 16) }
    }

    /// Decodes `bytes` as the structure the messages.json field `field` holds and encodes it
    /// again; nil when it does not decode.
    static func decodeAndEncode(field: String, _ bytes: [UInt8]) throws -> [UInt8]? {
        func run<T: MLSCodable>(_: T.Type) throws -> [UInt8]? {
            guard let value = try? T(mlsDecoding: bytes) else { return nil }
            return try value.mlsEncoded()
        }
        switch field {
        case "ratchet_tree": return try run(RatchetTree.self)
        case "group_secrets": return try run(GroupSecrets.self)
        case "add_proposal": return try run(AddProposal.self)
        case "update_proposal": return try run(UpdateProposal.self)
        case "remove_proposal": return try run(RemoveProposal.self)
        case "pre_shared_key_proposal": return try run(PreSharedKeyProposal.self)
        case "re_init_proposal": return try run(ReInitProposal.self)
        case "external_init_proposal": return try run(ExternalInitProposal.self)
        case "group_context_extensions_proposal": return try run(GroupContextExtensionsProposal.self)
        case "commit": return try run(Commit.self)
        default: return try run(MLSMessage.self)
        }
    }
}

/// A seeded generator (SplitMix64), so randomized tests replay.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
