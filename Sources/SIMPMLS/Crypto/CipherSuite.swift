import Crypto
import Foundation

/// A cipher suite identifier as it appears on the wire (RFC 9420 section 5.1, `uint16
/// CipherSuite`). The registry is open (section 17.1), so any value decodes; only the suites in
/// ``MLSCipherSuite`` can be used.
public struct CipherSuiteID: Hashable, Sendable, MLSCodable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }
    public init(from reader: inout TLSReader) throws { rawValue = try reader.readUInt16() }
    public func encode(to writer: inout TLSWriter) throws { writer.writeUInt16(rawValue) }
    public var description: String { "0x" + String(rawValue, radix: 16) }
}

/// The cipher suites this build implements (RFC 9420 section 17.1): both use DHKEM(X25519,
/// HKDF-SHA256) for HPKE, SHA-256 as hash and KDF, and Ed25519 for signatures; they differ in the
/// AEAD.
public enum MLSCipherSuite: UInt16, CaseIterable, Sendable {
    /// `MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519`
    case x25519AES128GCMSHA256Ed25519 = 0x0001
    /// `MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519`
    case x25519ChaCha20Poly1305SHA256Ed25519 = 0x0003

    /// Nil if the suite is not implemented.
    public init?(_ id: CipherSuiteID) {
        self.init(rawValue: id.rawValue)
    }

    public var id: CipherSuiteID { CipherSuiteID(rawValue) }

    /// `KDF.Nh`, also the hash's output length.
    public var hashLength: Int { 32 }

    /// The AEAD's key length, `AEAD.Nk` (RFC 9180 section 7.3).
    public var aeadKeyLength: Int {
        switch self {
        case .x25519AES128GCMSHA256Ed25519: 16
        case .x25519ChaCha20Poly1305SHA256Ed25519: 32
        }
    }

    /// The AEAD's nonce length, `AEAD.Nn`.
    public var aeadNonceLength: Int { 12 }

    /// The HPKE AEAD of this suite.
    var hpkeAEAD: HPKE.AEAD {
        switch self {
        case .x25519AES128GCMSHA256Ed25519: .AES_GCM_128
        case .x25519ChaCha20Poly1305SHA256Ed25519: .chaChaPoly
        }
    }

    /// The HPKE AEAD identifier (RFC 9180 section 7.3): AES-128-GCM 0x0001, ChaCha20Poly1305 0x0003.
    var hpkeAEADID: UInt16 {
        switch self {
        case .x25519AES128GCMSHA256Ed25519: 0x0001
        case .x25519ChaCha20Poly1305SHA256Ed25519: 0x0003
        }
    }

    /// The HPKE cipher suite (RFC 9180) this MLS suite uses for `EncryptWithLabel` (RFC 9420 section 5.1.3).
    public var hpke: HPKE.Ciphersuite {
        HPKE.Ciphersuite(kem: .Curve25519_HKDF_SHA256, kdf: .HKDF_SHA256, aead: hpkeAEAD)
    }
}
