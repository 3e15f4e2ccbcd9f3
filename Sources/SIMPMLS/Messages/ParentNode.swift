/// RFC 9420 section 7.1:
///
///     struct {
///         HPKEPublicKey encryption_key;
///         opaque parent_hash<V>;
///         uint32 unmerged_leaves<V>;
///     } ParentNode;
public struct ParentNode: Sendable, Equatable, MLSCodable {
    public var encryptionKey: HPKEPublicKeyIn
    public var parentHash: [UInt8]
    /// Leaf indices added below this node since it was last updated.
    public var unmergedLeaves: [UInt32]

    public init(encryptionKey: HPKEPublicKeyIn, parentHash: [UInt8], unmergedLeaves: [UInt32]) {
        self.encryptionKey = encryptionKey
        self.parentHash = parentHash
        self.unmergedLeaves = unmergedLeaves
    }

    public init(from reader: inout TLSReader) throws {
        encryptionKey = try HPKEPublicKeyIn(from: &reader)
        parentHash = try reader.readOpaque()
        unmergedLeaves = try reader.readVector { try $0.readUInt32() }
    }

    public func encode(to writer: inout TLSWriter) throws {
        try encryptionKey.encode(to: &writer)
        try writer.writeOpaque(parentHash)
        try writer.writeVector { w in for leaf in unmergedLeaves { w.writeUInt32(leaf) } }
    }
}
