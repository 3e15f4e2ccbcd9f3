/// RFC 9420 section 5.3: `uint16 CredentialType;`, an open registry (section 17.4): any value
/// decodes where only a type is named (``Capabilities/credentials``), but a ``Credential`` of a
/// type without a case in ``Credential`` cannot be decoded, since its layout is unknown.
public struct CredentialType: Hashable, Sendable, MLSCodable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// `basic(1)`
    public static let basic = CredentialType(1)
    /// `x509(2)`
    public static let x509 = CredentialType(2)

    public init(from reader: inout TLSReader) throws { rawValue = try reader.readUInt16() }
    public func encode(to writer: inout TLSWriter) throws { writer.writeUInt16(rawValue) }
    public var description: String { "0x" + String(rawValue, radix: 16) }
}

/// RFC 9420 section 5.3: `struct { opaque cert_data<V>; } Certificate;` (DER, not parsed here).
public struct Certificate: Sendable, Equatable, MLSCodable {
    public var certData: [UInt8]

    public init(certData: [UInt8]) { self.certData = certData }
    public init(from reader: inout TLSReader) throws { certData = try reader.readOpaque() }
    public func encode(to writer: inout TLSWriter) throws { try writer.writeOpaque(certData) }
}

/// RFC 9420 section 5.3:
///
///     struct {
///         CredentialType credential_type;
///         select (Credential.credential_type) {
///             case basic: opaque identity<V>;
///             case x509:  Certificate certificates<V>;
///         };
///     } Credential;
///
/// Decoding says nothing about whether the credential is true: that is the application's
/// judgement (section 5.3.1), made by a ``CredentialValidator``.
public enum Credential: Sendable, Equatable, MLSCodable {
    /// An identity the application interprets; it is not authenticated by MLS.
    case basic(identity: [UInt8])
    /// A chain of X.509 certificates, the end-entity certificate first.
    case x509(certificates: [Certificate])

    public var credentialType: CredentialType {
        switch self {
        case .basic: .basic
        case .x509: .x509
        }
    }

    public init(from reader: inout TLSReader) throws {
        let type = try CredentialType(from: &reader)
        switch type {
        case .basic: self = .basic(identity: try reader.readOpaque())
        case .x509: self = .x509(certificates: try reader.readVector(of: Certificate.self))
        default: throw MLSDecodingError.unknownEnumValue(type: "CredentialType", value: UInt64(type.rawValue))
        }
    }

    public func encode(to writer: inout TLSWriter) throws {
        try credentialType.encode(to: &writer)
        switch self {
        case .basic(let identity): try writer.writeOpaque(identity)
        case .x509(let certificates): try writer.writeVector(certificates)
        }
    }
}

/// RFC 9420 section 5.3.1: the application's check that a credential is valid and that it
/// belongs to the member holding `signatureKey` (for example that a basic credential's
/// identity is bound to that key by a trusted directory). This is where identity-bound
/// credentials plug in; there is no default implementation, so nothing is accepted unjudged.
/// ``KeyPackageIn/validate(suite:)`` checks signatures only: a caller admitting a member also
/// runs its validator on the key package's credential.
public protocol CredentialValidator: Sendable {
    /// Throws if `credential` is not acceptable for `signatureKey`.
    func validate(_ credential: Credential, signatureKey: SignaturePublicKey) throws
}
