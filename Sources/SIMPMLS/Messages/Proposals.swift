/// The bodies of the proposal types RFC 9420 defines (section 12.1.1 to 12.1.7).

/// RFC 9420 section 12.1.1: `struct { KeyPackage key_package; } Add;` The key package is as
/// received: it is validated (``KeyPackageIn/validate(suite:)``) before the Add is applied.
public struct AddProposal: Sendable, Equatable, MLSCodable {
    public var keyPackage: KeyPackageIn
    public init(keyPackage: KeyPackageIn) { self.keyPackage = keyPackage }
    public init(from reader: inout TLSReader) throws { keyPackage = try KeyPackageIn(from: &reader) }
    public func encode(to writer: inout TLSWriter) throws { try keyPackage.encode(to: &writer) }
}

/// RFC 9420 section 12.1.2: `struct { LeafNode leaf_node; } Update;`
public struct UpdateProposal: Sendable, Equatable, MLSCodable {
    public var leafNode: LeafNode
    public init(leafNode: LeafNode) { self.leafNode = leafNode }
    public init(from reader: inout TLSReader) throws { leafNode = try LeafNode(from: &reader) }
    public func encode(to writer: inout TLSWriter) throws { try leafNode.encode(to: &writer) }
}

/// RFC 9420 section 12.1.3: `struct { uint32 removed; } Remove;` (a leaf index).
public struct RemoveProposal: Sendable, Equatable, MLSCodable {
    public var removed: UInt32
    public init(removed: UInt32) { self.removed = removed }
    public init(from reader: inout TLSReader) throws { removed = try reader.readUInt32() }
    public func encode(to writer: inout TLSWriter) throws { writer.writeUInt32(removed) }
}

/// RFC 9420 section 12.1.4: `struct { PreSharedKeyID psk; } PreSharedKey;`
public struct PreSharedKeyProposal: Sendable, Equatable, MLSCodable {
    public var psk: PreSharedKeyID
    public init(psk: PreSharedKeyID) { self.psk = psk }
    public init(from reader: inout TLSReader) throws { psk = try PreSharedKeyID(from: &reader) }
    public func encode(to writer: inout TLSWriter) throws { try psk.encode(to: &writer) }
}

/// RFC 9420 section 12.1.5:
///
///     struct {
///         opaque group_id<V>;
///         ProtocolVersion version;
///         CipherSuite cipher_suite;
///         Extension extensions<V>;
///     } ReInit;
public struct ReInitProposal: Sendable, Equatable, MLSCodable {
    public var groupID: [UInt8]
    public var version: ProtocolVersion
    public var cipherSuite: CipherSuiteID
    public var extensions: [Extension]

    public init(groupID: [UInt8], version: ProtocolVersion = .mls10, cipherSuite: CipherSuiteID, extensions: [Extension]) {
        self.groupID = groupID
        self.version = version
        self.cipherSuite = cipherSuite
        self.extensions = extensions
    }

    public init(from reader: inout TLSReader) throws {
        groupID = try reader.readOpaque()
        version = try reader.readEnum(ProtocolVersion.self)
        cipherSuite = try CipherSuiteID(from: &reader)
        extensions = try reader.readVector(of: Extension.self)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(groupID)
        try version.encode(to: &writer)
        try cipherSuite.encode(to: &writer)
        try writer.writeVector(extensions)
    }
}

/// RFC 9420 section 12.1.6: `struct { opaque kem_output<V>; } ExternalInit;`
public struct ExternalInitProposal: Sendable, Equatable, MLSCodable {
    public var kemOutput: [UInt8]
    public init(kemOutput: [UInt8]) { self.kemOutput = kemOutput }
    public init(from reader: inout TLSReader) throws { kemOutput = try reader.readOpaque() }
    public func encode(to writer: inout TLSWriter) throws { try writer.writeOpaque(kemOutput) }
}

/// RFC 9420 section 12.1.7: `struct { Extension extensions<V>; } GroupContextExtensions;`
public struct GroupContextExtensionsProposal: Sendable, Equatable, MLSCodable {
    public var extensions: [Extension]
    public init(extensions: [Extension]) { self.extensions = extensions }
    public init(from reader: inout TLSReader) throws { extensions = try reader.readVector(of: Extension.self) }
    public func encode(to writer: inout TLSWriter) throws { try writer.writeVector(extensions) }
}
