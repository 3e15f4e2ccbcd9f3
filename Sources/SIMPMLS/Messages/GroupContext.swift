/// RFC 9420 section 13: `uint16 ExtensionType;` and
/// `struct { ExtensionType extension_type; opaque extension_data<V>; } Extension;`
/// The registry is open (section 17.3), so any type decodes; what a type means is judged where
/// the extension is used.
public struct Extension: Sendable, Equatable, MLSCodable {
    public var extensionType: UInt16
    public var extensionData: [UInt8]

    public init(extensionType: UInt16, extensionData: [UInt8]) {
        self.extensionType = extensionType
        self.extensionData = extensionData
    }

    public init(from reader: inout TLSReader) throws {
        extensionType = try reader.readUInt16()
        extensionData = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        writer.writeUInt16(extensionType)
        try writer.writeOpaque(extensionData)
    }
}

/// RFC 9420 section 8.1: the state every member of an epoch agrees on.
///
///     struct {
///         ProtocolVersion version = mls10;
///         CipherSuite cipher_suite;
///         opaque group_id<V>;
///         uint64 epoch;
///         opaque tree_hash<V>;
///         opaque confirmed_transcript_hash<V>;
///         Extension extensions<V>;
///     } GroupContext;
public struct GroupContext: Sendable, Equatable, MLSCodable {
    public var version: ProtocolVersion
    public var cipherSuite: CipherSuiteID
    public var groupID: [UInt8]
    public var epoch: UInt64
    public var treeHash: [UInt8]
    public var confirmedTranscriptHash: [UInt8]
    public var extensions: [Extension]

    public init(
        version: ProtocolVersion = .mls10, cipherSuite: CipherSuiteID, groupID: [UInt8], epoch: UInt64,
        treeHash: [UInt8], confirmedTranscriptHash: [UInt8], extensions: [Extension]
    ) {
        self.version = version
        self.cipherSuite = cipherSuite
        self.groupID = groupID
        self.epoch = epoch
        self.treeHash = treeHash
        self.confirmedTranscriptHash = confirmedTranscriptHash
        self.extensions = extensions
    }

    public init(from reader: inout TLSReader) throws {
        version = try reader.readEnum(ProtocolVersion.self)
        cipherSuite = try CipherSuiteID(from: &reader)
        groupID = try reader.readOpaque()
        epoch = try reader.readUInt64()
        treeHash = try reader.readOpaque()
        confirmedTranscriptHash = try reader.readOpaque()
        extensions = try reader.readVector(of: Extension.self)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try version.encode(to: &writer)
        try cipherSuite.encode(to: &writer)
        try writer.writeOpaque(groupID)
        writer.writeUInt64(epoch)
        try writer.writeOpaque(treeHash)
        try writer.writeOpaque(confirmedTranscriptHash)
        try writer.writeVector(extensions)
    }
}
