/// RFC 9420 section 12.4.3:
///
///     struct {
///         KeyPackageRef new_member;
///         HPKECiphertext encrypted_group_secrets;
///     } EncryptedGroupSecrets;
public struct EncryptedGroupSecrets: Sendable, Equatable, MLSCodable {
    /// The ``KeyPackage/reference()`` of the key package the secrets are encrypted to.
    public var newMember: [UInt8]
    /// `EncryptWithLabel(init_key, "Welcome", encrypted_group_info, GroupSecrets)`.
    public var encryptedGroupSecrets: HPKECiphertext

    public init(newMember: [UInt8], encryptedGroupSecrets: HPKECiphertext) {
        self.newMember = newMember
        self.encryptedGroupSecrets = encryptedGroupSecrets
    }

    public init(from reader: inout TLSReader) throws {
        newMember = try reader.readOpaque()
        encryptedGroupSecrets = try HPKECiphertext(from: &reader)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(newMember)
        try encryptedGroupSecrets.encode(to: &writer)
    }
}

/// RFC 9420 section 12.4.3:
///
///     struct {
///         CipherSuite cipher_suite;
///         EncryptedGroupSecrets secrets<V>;
///         opaque encrypted_group_info<V>;
///     } Welcome;
public struct Welcome: Sendable, Equatable, MLSCodable {
    public var cipherSuite: CipherSuiteID
    public var secrets: [EncryptedGroupSecrets]
    /// The group info, sealed with the welcome key and nonce.
    public var encryptedGroupInfo: [UInt8]

    public init(cipherSuite: CipherSuiteID, secrets: [EncryptedGroupSecrets], encryptedGroupInfo: [UInt8]) {
        self.cipherSuite = cipherSuite
        self.secrets = secrets
        self.encryptedGroupInfo = encryptedGroupInfo
    }

    public init(from reader: inout TLSReader) throws {
        cipherSuite = try CipherSuiteID(from: &reader)
        secrets = try reader.readVector(of: EncryptedGroupSecrets.self)
        encryptedGroupInfo = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        try cipherSuite.encode(to: &writer)
        try writer.writeVector(secrets)
        try writer.writeOpaque(encryptedGroupInfo)
    }

    /// The secrets for the key package whose reference is `keyPackageReference`, if any.
    public func secrets(for keyPackageReference: [UInt8]) -> EncryptedGroupSecrets? {
        secrets.first { $0.newMember == keyPackageReference }
    }
}
