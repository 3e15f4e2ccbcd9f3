/// A client's own key package and the private keys behind it (RFC 9420 section 10): what it
/// publishes, and what it keeps to join from a Welcome naming it. Holds secrets; its description
/// shows none.
public struct MLSKeyPackageBundle: Sendable, CustomStringConvertible, CustomReflectable {
    public let keyPackage: KeyPackage
    public let initPrivateKey: HPKEPrivateKey
    /// The private key of the leaf node's `encryption_key`.
    public let encryptionPrivateKey: HPKEPrivateKey
    public let signer: SignaturePrivateKey

    /// A fresh key package for `suite`: init and leaf encryption keys derived from `randomness`
    /// (`KDF.Nh` bytes each, fresh), the leaf node of source `key_package` with `lifetime`, and
    /// both signed by `signer` (sections 7.2, 10).
    public init(
        suite: MLSCipherSuite, credential: Credential, capabilities: Capabilities, lifetime: Lifetime,
        signer: SignaturePrivateKey, randomness: (Int) throws -> [UInt8]
    ) throws {
        let initKey = try suite.deriveHPKEKeyPair(ikm: try randomness(suite.hashLength))
        let encryptionKey = try suite.deriveHPKEKeyPair(ikm: try randomness(suite.hashLength))
        let leaf = try LeafNode.signed(
            suite: suite, encryptionKey: encryptionKey.publicKey, credential: credential, capabilities: capabilities,
            source: .keyPackage(lifetime: lifetime), signer: signer, group: nil)
        var package = KeyPackageIn(
            cipherSuite: suite.id, initKey: initKey.publicKey.wire, leafNode: leaf, extensions: [], signature: [])
        package.signature = try suite.signWithLabel(signer, label: KeyPackageTBS.label, content: try package.toBeSigned.mlsEncoded())
        keyPackage = try package.validate(suite: suite)
        initPrivateKey = initKey
        encryptionPrivateKey = encryptionKey
        self.signer = signer
    }

    /// A bundle of a key package made elsewhere and its private keys, which must be the key
    /// package's `init_key`, leaf `encryption_key` and `signature_key`.
    public init(
        keyPackage: KeyPackage, initPrivateKey: HPKEPrivateKey, encryptionPrivateKey: HPKEPrivateKey, signer: SignaturePrivateKey
    ) throws {
        guard initPrivateKey.publicKey == keyPackage.initKey, encryptionPrivateKey.publicKey == keyPackage.encryptionKey,
              signer.publicKey == keyPackage.signatureKey
        else { throw MLSGroupError.keyPackageKeysMismatch }
        self.keyPackage = keyPackage
        self.initPrivateKey = initPrivateKey
        self.encryptionPrivateKey = encryptionPrivateKey
        self.signer = signer
    }

    public var description: String { "MLSKeyPackageBundle(suite \(keyPackage.suite.id), redacted)" }
    public var customMirror: Mirror { Mirror(self, children: [:], displayStyle: .struct) }
}

extension LeafNode {
    /// A leaf node signed by `signer` (section 7.2), for `group` when the source needs one.
    static func signed(
        suite: MLSCipherSuite, encryptionKey: HPKEPublicKey, credential: Credential, capabilities: Capabilities,
        source: LeafNodeSourceFields, signer: SignaturePrivateKey, group: LeafNodeTBS.Group?
    ) throws -> LeafNode {
        var leaf = LeafNode(
            encryptionKey: encryptionKey.wire, signatureKey: SignaturePublicKeyIn(bytes: signer.publicKey.rawRepresentation),
            credential: credential, capabilities: capabilities, sourceFields: source, extensions: [], signature: [])
        leaf.signature = try suite.signWithLabel(signer, label: LeafNodeTBS.label, content: try leaf.toBeSigned(group: group).mlsEncoded())
        return leaf
    }
}
