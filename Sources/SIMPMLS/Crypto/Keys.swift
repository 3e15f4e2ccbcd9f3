import Crypto
import Foundation

/// Why a cryptographic operation failed. Messages never carry key or secret bytes.
public enum MLSCryptoError: Error, Equatable, Sendable {
    /// A key of the wrong length or otherwise not a valid key for the suite.
    case invalidKey(String)
    /// `ExpandWithLabel`'s length is beyond what the KDF (255 * Nh) or KDFLabel's uint16 allows.
    case outputLengthTooLarge(Int)
    /// A signature did not verify (RFC 9420 section 5.1.2).
    case invalidSignature
    /// HPKE decryption failed: wrong key, wrong context, or a modified ciphertext.
    case decryptionFailed
    /// Randomness of the wrong length was passed in.
    case invalidRandomness(expected: Int, got: Int)
    /// AEAD sealing or opening failed: a wrong key or nonce length, or a tag that does not verify.
    case aeadFailure
}

/// An Ed25519 signature private key (RFC 9420 section 5.1.2), from its 32-byte seed.
/// Its description does not show the key.
public struct SignaturePrivateKey: Sendable, CustomStringConvertible {
    let key: Curve25519.Signing.PrivateKey

    public init(rawRepresentation raw: [UInt8]) throws {
        guard raw.count == 32 else { throw MLSCryptoError.invalidKey("Ed25519 private key must be 32 bytes") }
        do { key = try Curve25519.Signing.PrivateKey(rawRepresentation: raw) } catch {
            throw MLSCryptoError.invalidKey("Ed25519 private key rejected")
        }
    }

    public var publicKey: SignaturePublicKey { SignaturePublicKey(key: key.publicKey) }
    public var description: String { "SignaturePrivateKey(redacted)" }
}

/// An Ed25519 signature public key that has been checked to be one (32 bytes, accepted by
/// swift-crypto). Keys from the wire arrive as ``SignaturePublicKeyIn``.
public struct SignaturePublicKey: Sendable, Equatable {
    let key: Curve25519.Signing.PublicKey

    init(key: Curve25519.Signing.PublicKey) { self.key = key }

    public var rawRepresentation: [UInt8] { Array(key.rawRepresentation) }

    public static func == (a: Self, b: Self) -> Bool { a.rawRepresentation == b.rawRepresentation }
}

/// `SignaturePublicKey` as received (RFC 9420 section 5.1.1, `opaque signature_key<V>`): bytes
/// not yet known to be a key. Only ``validate(for:)`` yields a usable ``SignaturePublicKey``.
public struct SignaturePublicKeyIn: Sendable, Equatable, MLSCodable {
    public let bytes: [UInt8]
    public init(bytes: [UInt8]) { self.bytes = bytes }
    public init(from reader: inout TLSReader) throws { bytes = try reader.readOpaque() }
    public func encode(to writer: inout TLSWriter) throws { try writer.writeOpaque(bytes) }

    public func validate(for suite: MLSCipherSuite) throws -> SignaturePublicKey {
        guard bytes.count == 32 else { throw MLSCryptoError.invalidKey("Ed25519 public key must be 32 bytes") }
        do { return SignaturePublicKey(key: try Curve25519.Signing.PublicKey(rawRepresentation: bytes)) } catch {
            throw MLSCryptoError.invalidKey("Ed25519 public key rejected")
        }
    }
}

/// An X25519 HPKE private key (RFC 9420 section 5.1.1, `HPKEPrivateKey`). Its description does
/// not show the key.
public struct HPKEPrivateKey: Sendable, CustomStringConvertible {
    let key: Curve25519.KeyAgreement.PrivateKey

    public init(rawRepresentation raw: [UInt8]) throws {
        guard raw.count == 32 else { throw MLSCryptoError.invalidKey("X25519 private key must be 32 bytes") }
        do { key = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: raw) } catch {
            throw MLSCryptoError.invalidKey("X25519 private key rejected")
        }
    }

    init(key: Curve25519.KeyAgreement.PrivateKey) { self.key = key }

    public var publicKey: HPKEPublicKey { HPKEPublicKey(key: key.publicKey) }
    public var description: String { "HPKEPrivateKey(redacted)" }
}

/// An X25519 HPKE public key checked to be one. Keys from the wire arrive as ``HPKEPublicKeyIn``.
public struct HPKEPublicKey: Sendable, Equatable {
    let key: Curve25519.KeyAgreement.PublicKey

    init(key: Curve25519.KeyAgreement.PublicKey) { self.key = key }

    public var rawRepresentation: [UInt8] { Array(key.rawRepresentation) }

    public static func == (a: Self, b: Self) -> Bool { a.rawRepresentation == b.rawRepresentation }
}

/// `HPKEPublicKey` as received (RFC 9420 section 5.1.1, `opaque HPKEPublicKey<V>`). Only
/// ``validate(for:)`` yields a usable ``HPKEPublicKey``.
public struct HPKEPublicKeyIn: Sendable, Equatable, MLSCodable {
    public let bytes: [UInt8]
    public init(bytes: [UInt8]) { self.bytes = bytes }
    public init(from reader: inout TLSReader) throws { bytes = try reader.readOpaque() }
    public func encode(to writer: inout TLSWriter) throws { try writer.writeOpaque(bytes) }

    public func validate(for suite: MLSCipherSuite) throws -> HPKEPublicKey {
        guard bytes.count == 32 else { throw MLSCryptoError.invalidKey("X25519 public key must be 32 bytes") }
        do { return HPKEPublicKey(key: try Curve25519.KeyAgreement.PublicKey(rawRepresentation: bytes)) } catch {
            throw MLSCryptoError.invalidKey("X25519 public key rejected")
        }
    }
}
