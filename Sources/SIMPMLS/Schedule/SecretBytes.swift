/// Bytes derived by the key schedule (RFC 9420 sections 8, 9): a secret, a key or a nonce.
///
/// It never shows its bytes: `description`, `debugDescription` and `dump` (its mirror has no
/// children) print `SecretBytes(redacted, N bytes)`. Equality is constant-time in the bytes
/// (``ConstantTime/equals(_:_:)``). Dropping a value removes it from the state that held it; the
/// memory is not wiped (Swift arrays may have been copied), which is a limitation of the language,
/// not a promise of this type.
public struct SecretBytes: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The raw bytes, for the code that uses the secret (an AEAD, a KDF, a comparison). Never log them.
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// `Nh` zero bytes: the RFC's "0" for a missing `psk_secret` or `commit_secret` (section 8).
    public static func zero(_ suite: MLSCipherSuite) -> SecretBytes {
        SecretBytes([UInt8](repeating: 0, count: suite.hashLength))
    }

    public var count: Int { bytes.count }

    /// Whether these bytes are `other`, compared in constant time.
    public func matches(_ other: [UInt8]) -> Bool { ConstantTime.equals(bytes, other) }

    public static func == (a: SecretBytes, b: SecretBytes) -> Bool { ConstantTime.equals(a.bytes, b.bytes) }

    public var description: String { "SecretBytes(redacted, \(bytes.count) bytes)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:], displayStyle: .struct) }
}
