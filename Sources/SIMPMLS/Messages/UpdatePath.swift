/// RFC 9420 section 7.6:
///
///     struct {
///         HPKEPublicKey encryption_key;
///         HPKECiphertext encrypted_path_secret<V>;
///     } UpdatePathNode;
public struct UpdatePathNode: Sendable, Equatable, MLSCodable {
    public var encryptionKey: HPKEPublicKeyIn
    /// One ciphertext per node of the resolution of the copath node, in order.
    public var encryptedPathSecret: [HPKECiphertext]

    public init(encryptionKey: HPKEPublicKeyIn, encryptedPathSecret: [HPKECiphertext]) {
        self.encryptionKey = encryptionKey
        self.encryptedPathSecret = encryptedPathSecret
    }

    public init(from reader: inout TLSReader) throws {
        encryptionKey = try HPKEPublicKeyIn(from: &reader)
        encryptedPathSecret = try reader.readVector(of: HPKECiphertext.self)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try encryptionKey.encode(to: &writer)
        try writer.writeVector(encryptedPathSecret)
    }
}

/// RFC 9420 section 7.6:
///
///     struct {
///         LeafNode leaf_node;
///         UpdatePathNode nodes<V>;
///     } UpdatePath;
public struct UpdatePath: Sendable, Equatable, MLSCodable {
    public var leafNode: LeafNode
    /// One per node of the committer's filtered direct path.
    public var nodes: [UpdatePathNode]

    public init(leafNode: LeafNode, nodes: [UpdatePathNode]) {
        self.leafNode = leafNode
        self.nodes = nodes
    }

    public init(from reader: inout TLSReader) throws {
        leafNode = try LeafNode(from: &reader)
        nodes = try reader.readVector(of: UpdatePathNode.self)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try leafNode.encode(to: &writer)
        try writer.writeVector(nodes)
    }
}
