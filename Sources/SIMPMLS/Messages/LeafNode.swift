/// The part of a leaf node that depends on its `leaf_node_source` (RFC 9420 section 7.2):
///
///     select (LeafNode.leaf_node_source) {
///         case key_package: Lifetime lifetime;
///         case update:      struct{};
///         case commit:      opaque parent_hash<V>;
///     };
public enum LeafNodeSourceFields: Sendable, Equatable {
    case keyPackage(lifetime: Lifetime)
    case update
    case commit(parentHash: [UInt8])

    public var source: LeafNodeSource {
        switch self {
        case .keyPackage: .keyPackage
        case .update: .update
        case .commit: .commit
        }
    }

    init(from reader: inout TLSReader) throws {
        switch try reader.readEnum(LeafNodeSource.self) {
        case .keyPackage: self = .keyPackage(lifetime: try Lifetime(from: &reader))
        case .update: self = .update
        case .commit: self = .commit(parentHash: try reader.readOpaque())
        }
    }

    func encode(to writer: inout TLSWriter) throws {
        try source.encode(to: &writer)
        switch self {
        case .keyPackage(let lifetime): try lifetime.encode(to: &writer)
        case .update: break
        case .commit(let parentHash): try writer.writeOpaque(parentHash)
        }
    }
}

/// RFC 9420 section 7.2:
///
///     struct {
///         HPKEPublicKey encryption_key;
///         SignaturePublicKey signature_key;
///         Credential credential;
///         Capabilities capabilities;
///         LeafNodeSource leaf_node_source;
///         select (LeafNode.leaf_node_source) { ... };
///         Extension extensions<V>;
///         /* SignWithLabel(., "LeafNodeTBS", LeafNodeTBS) */
///         opaque signature<V>;
///     } LeafNode;
///
/// As decoded, nothing in it is checked: its keys are ``HPKEPublicKeyIn`` and
/// ``SignaturePublicKeyIn``, and its signature is verified by ``verifySignature(suite:group:)``.
public struct LeafNode: Sendable, Equatable, MLSCodable {
    public var encryptionKey: HPKEPublicKeyIn
    public var signatureKey: SignaturePublicKeyIn
    public var credential: Credential
    public var capabilities: Capabilities
    public var sourceFields: LeafNodeSourceFields
    public var extensions: [Extension]
    public var signature: [UInt8]

    public var source: LeafNodeSource { sourceFields.source }

    public init(
        encryptionKey: HPKEPublicKeyIn, signatureKey: SignaturePublicKeyIn, credential: Credential,
        capabilities: Capabilities, sourceFields: LeafNodeSourceFields, extensions: [Extension], signature: [UInt8]
    ) {
        self.encryptionKey = encryptionKey
        self.signatureKey = signatureKey
        self.credential = credential
        self.capabilities = capabilities
        self.sourceFields = sourceFields
        self.extensions = extensions
        self.signature = signature
    }

    public init(from reader: inout TLSReader) throws {
        encryptionKey = try HPKEPublicKeyIn(from: &reader)
        signatureKey = try SignaturePublicKeyIn(from: &reader)
        credential = try Credential(from: &reader)
        capabilities = try Capabilities(from: &reader)
        sourceFields = try LeafNodeSourceFields(from: &reader)
        extensions = try reader.readVector(of: Extension.self)
        signature = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        try encodeSignedFields(to: &writer)
        try writer.writeOpaque(signature)
    }

    /// Every field but the signature: the common prefix of `LeafNode` and `LeafNodeTBS`.
    func encodeSignedFields(to writer: inout TLSWriter) throws {
        try encryptionKey.encode(to: &writer)
        try signatureKey.encode(to: &writer)
        try credential.encode(to: &writer)
        try capabilities.encode(to: &writer)
        try sourceFields.encode(to: &writer)
        try writer.writeVector(extensions)
    }

    /// What the signature covers: `LeafNodeTBS`, for a leaf of source `update` or `commit` with
    /// the group and leaf index it is signed for.
    public func toBeSigned(group: LeafNodeTBS.Group?) -> LeafNodeTBS {
        LeafNodeTBS(leafNode: self, group: group)
    }

    /// Checks the signature with the leaf's own signature key (RFC 9420 section 7.3). `group`
    /// is required for sources `update` and `commit` and must be nil for `key_package`: a
    /// caller checking a leaf for its place in a group (an Update, a commit's path) passes one,
    /// so a key package's leaf is refused there.
    /// Returns the checked signature key.
    @discardableResult
    public func verifySignature(suite: MLSCipherSuite, group: LeafNodeTBS.Group?) throws -> SignaturePublicKey {
        switch (source, group) {
        case (.keyPackage, nil), (.update, .some), (.commit, .some): break
        case (.keyPackage, .some): throw MLSValidationError.keyPackageLeafInGroup
        case (.update, nil), (.commit, nil): throw MLSValidationError.leafNodeNeedsGroup
        }
        let key = try signatureKey.validate(for: suite)
        let content = try toBeSigned(group: group).mlsEncoded()
        _ = try SignedContentIn(label: LeafNodeTBS.label, content: content, signature: signature).verify(with: key, suite: suite)
        return key
    }
}

/// RFC 9420 section 7.2, what a leaf node's signature covers:
///
///     struct {
///         ... every field of LeafNode but the signature ...
///         select (LeafNodeTBS.leaf_node_source) {
///             case key_package: struct{};
///             case update: opaque group_id<V>; uint32 leaf_index;
///             case commit: opaque group_id<V>; uint32 leaf_index;
///         };
///     } LeafNodeTBS;
///
/// Encoded only (it is built, never received); `group` is ignored for source `key_package`
/// and required for the others.
public struct LeafNodeTBS: Sendable, Equatable, MLSEncodable {
    /// The group and leaf a leaf node of source `update` or `commit` is signed for.
    public struct Group: Sendable, Equatable {
        public var groupID: [UInt8]
        public var leafIndex: UInt32
        public init(groupID: [UInt8], leafIndex: UInt32) {
            self.groupID = groupID
            self.leafIndex = leafIndex
        }
    }

    /// `SignWithLabel`'s label.
    public static let label = Array("LeafNodeTBS".utf8)

    /// The leaf node; its signature is not encoded.
    public var leafNode: LeafNode
    public var group: Group?

    public init(leafNode: LeafNode, group: Group?) {
        self.leafNode = leafNode
        self.group = group
    }

    public func encode(to writer: inout TLSWriter) throws {
        try leafNode.encodeSignedFields(to: &writer)
        switch leafNode.source {
        case .keyPackage:
            break
        case .update, .commit:
            guard let group else { throw MLSValidationError.leafNodeNeedsGroup }
            try writer.writeOpaque(group.groupID)
            writer.writeUInt32(group.leafIndex)
        }
    }
}
