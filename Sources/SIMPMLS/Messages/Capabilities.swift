/// RFC 9420 section 7.2:
///
///     struct {
///         ProtocolVersion versions<V>;
///         CipherSuite cipher_suites<V>;
///         ExtensionType extensions<V>;
///         ProposalType proposals<V>;
///         CredentialType credentials<V>;
///     } Capabilities;
///
/// What a client says it supports: values unknown to this build (newer versions, GREASE values
/// of section 13.5) are legitimate here, so every list keeps raw values.
public struct Capabilities: Sendable, Equatable, MLSCodable {
    /// Protocol versions as `uint16`, since a client may support versions this build does not know.
    public var versions: [UInt16]
    public var cipherSuites: [CipherSuiteID]
    /// Extension types beyond the defaults of section 7.2.
    public var extensions: [UInt16]
    /// Proposal types beyond the defaults.
    public var proposals: [ProposalType]
    public var credentials: [CredentialType]

    public init(
        versions: [UInt16], cipherSuites: [CipherSuiteID], extensions: [UInt16], proposals: [ProposalType],
        credentials: [CredentialType]
    ) {
        self.versions = versions
        self.cipherSuites = cipherSuites
        self.extensions = extensions
        self.proposals = proposals
        self.credentials = credentials
    }

    public init(from reader: inout TLSReader) throws {
        versions = try reader.readVector { try $0.readUInt16() }
        cipherSuites = try reader.readVector(of: CipherSuiteID.self)
        extensions = try reader.readVector { try $0.readUInt16() }
        proposals = try reader.readVector(of: ProposalType.self)
        credentials = try reader.readVector(of: CredentialType.self)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeVector { w in for v in versions { w.writeUInt16(v) } }
        try writer.writeVector(cipherSuites)
        try writer.writeVector { w in for e in extensions { w.writeUInt16(e) } }
        try writer.writeVector(proposals)
        try writer.writeVector(credentials)
    }
}
