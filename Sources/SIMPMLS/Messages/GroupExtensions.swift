/// The extensions RFC 9420 defines for the GroupContext and the GroupInfo (sections 11.1,
/// 12.1.8.1, 12.4.3.2; types in 17.3).
extension Extension {
    /// The one extension of `type` in `extensions`, decoded; nil if there is none. Two of one
    /// type are an error (section 13.4: "the extensions ... MUST NOT contain duplicates" is
    /// enforced here for the ones this build reads).
    static func decoded<T: MLSDecodable>(_ type: UInt16, in extensions: [Extension], as _: T.Type) throws -> T? {
        let found = extensions.filter { $0.extensionType == type }
        guard found.count <= 1 else { throw MLSDecodingError.invalidValue("two extensions of type \(type)") }
        return try found.first.map { try T(mlsDecoding: $0.extensionData) }
    }
}

/// RFC 9420 section 11.1:
///
///     struct {
///         ExtensionType extension_types<V>;
///         ProposalType proposal_types<V>;
///         CredentialType credential_types<V>;
///     } RequiredCapabilities;
public struct RequiredCapabilities: Sendable, Equatable, MLSCodable {
    public static let extensionType: UInt16 = 0x0003

    public var extensionTypes: [UInt16]
    public var proposalTypes: [ProposalType]
    public var credentialTypes: [CredentialType]

    public init(extensionTypes: [UInt16], proposalTypes: [ProposalType], credentialTypes: [CredentialType]) {
        self.extensionTypes = extensionTypes
        self.proposalTypes = proposalTypes
        self.credentialTypes = credentialTypes
    }

    public init(from reader: inout TLSReader) throws {
        extensionTypes = try reader.readVector { try $0.readUInt16() }
        proposalTypes = try reader.readVector(of: ProposalType.self)
        credentialTypes = try reader.readVector(of: CredentialType.self)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeVector { w in for t in extensionTypes { w.writeUInt16(t) } }
        try writer.writeVector(proposalTypes)
        try writer.writeVector(credentialTypes)
    }

    /// Section 7.3: the leaf lists every required extension, proposal and credential type in its
    /// capabilities (the default types of section 7.2 count as listed).
    public func isSupported(by capabilities: Capabilities) -> Bool {
        Set(extensionTypes).subtracting(PublicRatchetTree.defaultExtensionTypes).isSubset(of: Set(capabilities.extensions))
            && Set(proposalTypes).subtracting(Self.defaultProposalTypes).isSubset(of: Set(capabilities.proposals))
            && Set(credentialTypes).isSubset(of: Set(capabilities.credentials))
    }

    /// The proposal types of RFC 9420 (1 to 7), assumed supported by every client (section 7.2).
    static let defaultProposalTypes: Set<ProposalType> = Set((1...7).map { ProposalType($0) })

    public var asExtension: Extension {
        get throws { Extension(extensionType: Self.extensionType, extensionData: try mlsEncoded()) }
    }
}

/// RFC 9420 section 12.4.3.2: `struct { HPKEPublicKey external_pub; } ExternalPub;`, a
/// GroupInfo extension letting a new member join by external commit.
public struct ExternalPub: Sendable, Equatable, MLSCodable {
    public static let extensionType: UInt16 = 0x0004

    public var externalPub: HPKEPublicKeyIn

    public init(externalPub: HPKEPublicKeyIn) { self.externalPub = externalPub }
    public init(from reader: inout TLSReader) throws { externalPub = try HPKEPublicKeyIn(from: &reader) }
    public func encode(to writer: inout TLSWriter) throws { try externalPub.encode(to: &writer) }
}

/// RFC 9420 section 12.1.8.1:
///
///     struct {
///       SignaturePublicKey signature_key;
///       Credential credential;
///     } ExternalSender;
///
/// The GroupContext extension `external_senders` is `ExternalSender external_senders<V>`; a
/// proposal from sender `external(i)` is signed with the `i`th entry's key.
public struct ExternalSender: Sendable, Equatable, MLSCodable {
    public static let extensionType: UInt16 = 0x0005

    public var signatureKey: SignaturePublicKeyIn
    public var credential: Credential

    public init(signatureKey: SignaturePublicKeyIn, credential: Credential) {
        self.signatureKey = signatureKey
        self.credential = credential
    }

    public init(from reader: inout TLSReader) throws {
        signatureKey = try SignaturePublicKeyIn(from: &reader)
        credential = try Credential(from: &reader)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try signatureKey.encode(to: &writer)
        try credential.encode(to: &writer)
    }

    /// The `external_senders` extension of `senders`.
    public static func extensionOf(_ senders: [ExternalSender]) throws -> Extension {
        var w = TLSWriter()
        try w.writeVector(senders)
        return Extension(extensionType: extensionType, extensionData: w.bytes)
    }

    /// The senders of the `external_senders` extension in `extensions`; empty without one.
    static func list(in extensions: [Extension]) throws -> [ExternalSender] {
        let found = extensions.filter { $0.extensionType == extensionType }
        guard found.count <= 1 else { throw MLSDecodingError.invalidValue("two external_senders extensions") }
        guard let data = found.first?.extensionData else { return [] }
        var r = TLSReader(data)
        let senders = try r.readVector(of: ExternalSender.self)
        try r.finish()
        return senders
    }
}
