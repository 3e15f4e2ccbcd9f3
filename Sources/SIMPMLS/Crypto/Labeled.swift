import Crypto
import Foundation

/// RFC 9420 section 5: the suite's hash, KDF and the labeled constructions built on them.
/// Labels are prefixed with "MLS 1.0 " wherever the RFC says so (sections 5.1.2, 5.1.3, 8);
/// `RefHash`'s label is used as given (section 5.2).
extension MLSCipherSuite {
    static let labelPrefix = Array("MLS 1.0 ".utf8)

    /// `Hash(value)`: SHA-256 for both implemented suites.
    public func hash(_ value: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: value))
    }

    /// `KDF.Extract(salt, ikm)`: HKDF-Extract with SHA-256 (RFC 5869).
    public func extract(salt: [UInt8], ikm: [UInt8]) -> [UInt8] {
        Array(HKDF<SHA256>.extract(inputKeyMaterial: SymmetricKey(data: ikm), salt: salt))
    }

    /// `KDF.Expand(secret, info, length)`: HKDF-Expand with SHA-256, at most 255 * Nh bytes.
    public func expand(secret: [UInt8], info: [UInt8], length: Int) throws -> [UInt8] {
        guard length >= 0, length <= 255 * hashLength else { throw MLSCryptoError.outputLengthTooLarge(length) }
        if length == 0 { return [] }
        let key = HKDF<SHA256>.expand(pseudoRandomKey: secret, info: info, outputByteCount: length)
        return key.withUnsafeBytes { Array($0) }
    }

    /// `RefHash(label, value) = Hash(RefHashInput)` with
    /// `struct { opaque label<V>; opaque value<V>; } RefHashInput;` (RFC 9420 section 5.2).
    public func refHash(label: [UInt8], value: [UInt8]) throws -> [UInt8] {
        var w = TLSWriter()
        try w.writeOpaque(label)
        try w.writeOpaque(value)
        return hash(w.bytes)
    }

    /// `ExpandWithLabel(Secret, Label, Context, Length) = KDF.Expand(Secret, KDFLabel, Length)` with
    /// `struct { uint16 length; opaque label<V> = "MLS 1.0 " + Label; opaque context<V>; } KDFLabel;`
    /// (RFC 9420 section 8).
    public func expandWithLabel(secret: [UInt8], label: [UInt8], context: [UInt8], length: Int) throws -> [UInt8] {
        guard length >= 0, length <= Int(UInt16.max) else { throw MLSCryptoError.outputLengthTooLarge(length) }
        var w = TLSWriter()
        w.writeUInt16(UInt16(length))
        try w.writeOpaque(Self.labelPrefix + label)
        try w.writeOpaque(context)
        return try expand(secret: secret, info: w.bytes, length: length)
    }

    /// `DeriveSecret(Secret, Label) = ExpandWithLabel(Secret, Label, "", KDF.Nh)` (RFC 9420 section 8).
    public func deriveSecret(secret: [UInt8], label: [UInt8]) throws -> [UInt8] {
        try expandWithLabel(secret: secret, label: label, context: [], length: hashLength)
    }

    /// `DeriveTreeSecret(Secret, Label, Generation, Length) = ExpandWithLabel(Secret, Label,
    /// Generation, Length)`, the generation encoded as a uint32 (RFC 9420 section 9).
    public func deriveTreeSecret(secret: [UInt8], label: [UInt8], generation: UInt32, length: Int) throws -> [UInt8] {
        var w = TLSWriter()
        w.writeUInt32(generation)
        return try expandWithLabel(secret: secret, label: label, context: w.bytes, length: length)
    }

    /// `SignContent`: `struct { opaque label<V> = "MLS 1.0 " + Label; opaque content<V>; }` (RFC 9420 section 5.1.2).
    static func signContent(label: [UInt8], content: [UInt8]) throws -> [UInt8] {
        var w = TLSWriter()
        try w.writeOpaque(labelPrefix + label)
        try w.writeOpaque(content)
        return w.bytes
    }

    /// `SignWithLabel(SignatureKey, Label, Content) = Signature.Sign(SignatureKey, SignContent)`
    /// (RFC 9420 section 5.1.2): Ed25519.
    public func signWithLabel(_ key: SignaturePrivateKey, label: [UInt8], content: [UInt8]) throws -> [UInt8] {
        let message = try Self.signContent(label: label, content: content)
        return Array(try key.key.signature(for: message))
    }

    /// `VerifyWithLabel(VerificationKey, Label, Content, SignatureValue)` (RFC 9420 section 5.1.2).
    public func verifyWithLabel(_ key: SignaturePublicKey, label: [UInt8], content: [UInt8], signature: [UInt8]) -> Bool {
        guard let message = try? Self.signContent(label: label, content: content) else { return false }
        return key.key.isValidSignature(signature, for: message)
    }
}

/// Content signed with `SignWithLabel`, as received: it is ``VerifiedContent`` only once
/// ``verify(with:suite:)`` has checked the signature (RFC 9420 section 5.1.2).
public struct SignedContentIn: Sendable {
    public let label: [UInt8]
    public let content: [UInt8]
    public let signature: [UInt8]

    public init(label: [UInt8], content: [UInt8], signature: [UInt8]) {
        self.label = label
        self.content = content
        self.signature = signature
    }

    public func verify(with key: SignaturePublicKey, suite: MLSCipherSuite) throws -> VerifiedContent {
        guard suite.verifyWithLabel(key, label: label, content: content, signature: signature) else {
            throw MLSCryptoError.invalidSignature
        }
        return VerifiedContent(label: label, content: content)
    }
}

/// Content whose signature has been checked. Only ``SignedContentIn/verify(with:suite:)`` makes one.
public struct VerifiedContent: Sendable {
    public let label: [UInt8]
    public let content: [UInt8]
    fileprivate init(label: [UInt8], content: [UInt8]) {
        self.label = label
        self.content = content
    }
}
