import Crypto

/// The number two users compare to check that each has the other's identity key
/// (docs/E2EE.md, "Verification"; docs/vectors/safety-number.json). It depends on the two
/// users' names and identity keys only, so adding or removing a device leaves it unchanged, and
/// a new identity changes it. Both sides compute the same 60 digits.
///
/// Each user's fingerprint: with `label` = "SIMP safety number 1" and variable-size vectors as
/// in RFC 9420 section 2.1.2 (`DeviceCertificateTBS.appendVarint`),
///
///     d = SHA-512(label<V> || user<V> || identity_key<V>)
///     repeat 5200 times: d = SHA-512(d || identity_key)
///
/// and of d's first 30 bytes, six 5-byte big-endian integers, each modulo 100,000 as five
/// digits: 30 digits. The iterations make a second key with a chosen fingerprint expensive to
/// search for (as Signal's numeric fingerprints). The safety number is the two fingerprints, the
/// smaller first, in 12 groups of 5.
public struct SafetyNumber: Sendable, Equatable, CustomStringConvertible {
    public static let label = Array("SIMP safety number 1".utf8)
    public static let iterations = 5200

    /// The 60 digits, without spaces.
    public let digits: String

    public init(_ a: (user: String, identity: IdentityKey), _ b: (user: String, identity: IdentityKey)) {
        let first = Self.fingerprint(user: a.user, identity: a.identity)
        let second = Self.fingerprint(user: b.user, identity: b.identity)
        digits = first < second ? first + second : second + first
    }

    /// The 12 groups of 5 digits, as shown to the users.
    public var groups: [String] {
        stride(from: 0, to: digits.count, by: 5).map { start in
            let from = digits.index(digits.startIndex, offsetBy: start)
            return String(digits[from..<digits.index(from, offsetBy: 5)])
        }
    }

    public var description: String { groups.joined(separator: " ") }

    /// Whether what a user typed (or read out) is this number: digits compared, spaces ignored.
    public func matches(_ typed: String) -> Bool {
        String(typed.filter { !$0.isWhitespace }) == digits
    }

    /// One user's 30 digits.
    public static func fingerprint(user: String, identity: IdentityKey) -> String {
        let key = identity.rawRepresentation
        var input: [UInt8] = []
        for field in [label, Array(user.utf8), key] {
            DeviceCertificateTBS.appendVarint(field.count, to: &input)
            input += field
        }
        var digest = Array(SHA512.hash(data: input))
        for _ in 0..<iterations {
            var hash = SHA512()
            hash.update(data: digest)
            hash.update(data: key)
            digest = Array(hash.finalize())
        }
        return (0..<6).map { chunk in
            let value = digest[chunk * 5..<chunk * 5 + 5].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let digits = String(value % 100_000)
            return String(repeating: "0", count: 5 - digits.count) + digits
        }.joined()
    }
}
