/// RFC 9420 section 10, a key package as received:
///
///     struct {
///         ProtocolVersion version;
///         CipherSuite cipher_suite;
///         HPKEPublicKey init_key;
///         LeafNode leaf_node;
///         Extension extensions<V>;
///         /* SignWithLabel(., "KeyPackageTBS", KeyPackageTBS) */
///         opaque signature<V>;
///     } KeyPackage;
///
/// Nothing in it is checked; only ``validate(suite:)`` turns it into a usable ``KeyPackage``.
public struct KeyPackageIn: Sendable, Equatable, MLSCodable {
    public var version: ProtocolVersion
    public var cipherSuite: CipherSuiteID
    public var initKey: HPKEPublicKeyIn
    public var leafNode: LeafNode
    public var extensions: [Extension]
    public var signature: [UInt8]

    public init(
        version: ProtocolVersion = .mls10, cipherSuite: CipherSuiteID, initKey: HPKEPublicKeyIn, leafNode: LeafNode,
        extensions: [Extension], signature: [UInt8]
    ) {
        self.version = version
        self.cipherSuite = cipherSuite
        self.initKey = initKey
        self.leafNode = leafNode
        self.extensions = extensions
        self.signature = signature
    }

    public init(from reader: inout TLSReader) throws {
        version = try reader.readEnum(ProtocolVersion.self)
        cipherSuite = try CipherSuiteID(from: &reader)
        initKey = try HPKEPublicKeyIn(from: &reader)
        leafNode = try LeafNode(from: &reader)
        extensions = try reader.readVector(of: Extension.self)
        signature = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        try toBeSigned.encode(to: &writer)
        try writer.writeOpaque(signature)
    }

    /// What the signature covers.
    public var toBeSigned: KeyPackageTBS {
        KeyPackageTBS(version: version, cipherSuite: cipherSuite, initKey: initKey, leafNode: leafNode, extensions: extensions)
    }

    /// RFC 9420 section 10.1, the checks that need no group and no clock: the cipher suite is
    /// `suite`; the leaf node's source is `key_package` and its signature verifies under its
    /// signature key (section 7.3); the key package's signature verifies under the same key;
    /// `init_key` and the leaf's `encryption_key` are keys of the suite, and differ.
    ///
    /// Left to the caller: the lifetime against its clock, the credential (a
    /// ``CredentialValidator``), and the capabilities and extensions against the group's.
    public func validate(suite: MLSCipherSuite) throws -> KeyPackage {
        guard cipherSuite == suite.id else { throw MLSValidationError.cipherSuiteMismatch(expected: suite.id, got: cipherSuite) }
        guard leafNode.source == .keyPackage else {
            throw MLSValidationError.wrongLeafNodeSource(expected: .keyPackage, got: leafNode.source)
        }
        let signatureKey = try leafNode.verifySignature(suite: suite, group: nil)
        _ = try SignedContentIn(label: KeyPackageTBS.label, content: try toBeSigned.mlsEncoded(), signature: signature)
            .verify(with: signatureKey, suite: suite)
        let initKey = try initKey.validate(for: suite)
        let encryptionKey = try leafNode.encryptionKey.validate(for: suite)
        guard initKey != encryptionKey else { throw MLSValidationError.initKeyIsEncryptionKey }
        return KeyPackage(checked: self, suite: suite, initKey: initKey, encryptionKey: encryptionKey, signatureKey: signatureKey)
    }
}

/// RFC 9420 section 10: what a key package's signature covers, every field but the signature.
///
///     struct {
///         ProtocolVersion version;
///         CipherSuite cipher_suite;
///         HPKEPublicKey init_key;
///         LeafNode leaf_node;
///         Extension extensions<V>;
///     } KeyPackageTBS;
public struct KeyPackageTBS: Sendable, Equatable, MLSEncodable {
    /// `SignWithLabel`'s label.
    public static let label = Array("KeyPackageTBS".utf8)

    public var version: ProtocolVersion
    public var cipherSuite: CipherSuiteID
    public var initKey: HPKEPublicKeyIn
    public var leafNode: LeafNode
    public var extensions: [Extension]

    public func encode(to writer: inout TLSWriter) throws {
        try version.encode(to: &writer)
        try cipherSuite.encode(to: &writer)
        try initKey.encode(to: &writer)
        try leafNode.encode(to: &writer)
        try writer.writeVector(extensions)
    }
}

/// A key package whose signatures and keys ``KeyPackageIn/validate(suite:)`` has checked.
/// Its keys are usable; it encodes to the bytes it was received as.
public struct KeyPackage: Sendable, Equatable, MLSEncodable {
    /// The package as received.
    public let wire: KeyPackageIn
    public let suite: MLSCipherSuite
    public let initKey: HPKEPublicKey
    /// The leaf node's `encryption_key`.
    public let encryptionKey: HPKEPublicKey
    /// The leaf node's `signature_key`, under which both signatures verified.
    public let signatureKey: SignaturePublicKey

    fileprivate init(
        checked wire: KeyPackageIn, suite: MLSCipherSuite, initKey: HPKEPublicKey, encryptionKey: HPKEPublicKey,
        signatureKey: SignaturePublicKey
    ) {
        self.wire = wire
        self.suite = suite
        self.initKey = initKey
        self.encryptionKey = encryptionKey
        self.signatureKey = signatureKey
    }

    public var leafNode: LeafNode { wire.leafNode }
    public var credential: Credential { wire.leafNode.credential }

    public func encode(to writer: inout TLSWriter) throws { try wire.encode(to: &writer) }

    /// The label of a `KeyPackageRef` (RFC 9420 section 5.2).
    public static let referenceLabel = Array("MLS 1.0 KeyPackage Reference".utf8)

    /// `KeyPackageRef = RefHash("MLS 1.0 KeyPackage Reference", value)` (RFC 9420 section 5.2):
    /// how a Welcome names the key package it is for.
    public func reference() throws -> [UInt8] {
        try suite.refHash(label: Self.referenceLabel, value: try mlsEncoded())
    }
}
