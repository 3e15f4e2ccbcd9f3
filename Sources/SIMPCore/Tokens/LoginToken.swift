import Crypto
import Foundation

/// A login token as it came off the wire, `USER@DEVICE.EXPIRES_MS.NONCE.MAC`: split and its
/// shape checked (valid names, decimal numbers, a 32-byte MAC in hex), nothing more. Its names
/// are claims until `verified(with:nowMillis:)` has checked the MAC and the expiry: only that
/// makes a `VerifiedToken`, the type the server acts on.
public struct UnverifiedToken: Sendable, Equatable {
    /// Longer than any token a signer issues (32 + 16 bytes of names, two numbers, 64 hex
    /// digits): a longer string is refused before it is split.
    public static let maxBytes = 256

    public let user: String
    public let device: String
    public let expiresAt: Int64
    public let nonce: UInt64
    /// The MAC as given: 32 bytes.
    public let mac: [UInt8]
    /// What the MAC signs: the token up to its last '.', as given.
    let body: [UInt8]

    /// nil unless `text` has the shape of a token. A user or device name may hold dots, the
    /// numbers and the MAC do not: the token splits at its last three. A token of the form
    /// before devices were bound (no '@') is refused.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        let dot = UInt8(ascii: ".")
        guard bytes.count <= Self.maxBytes,
              let macDot = bytes.lastIndex(of: dot),
              let nonceDot = bytes[..<macDot].lastIndex(of: dot),
              let expiresDot = bytes[..<nonceDot].lastIndex(of: dot),
              let at = bytes[..<expiresDot].firstIndex(of: UInt8(ascii: "@")) else { return nil }
        let user = String(decoding: bytes[..<at], as: UTF8.self)
        let device = String(decoding: bytes[(at + 1)..<expiresDot], as: UTF8.self)
        guard UserName.isValid(user), DeviceName.isValid(device),
              let expiresAt = Self.decimal(bytes[(expiresDot + 1)..<nonceDot]).flatMap(Int64.init(exactly:)),
              let nonce = Self.decimal(bytes[(nonceDot + 1)..<macDot]),
              let mac = Hex.bytes(bytes[(macDot + 1)...]), mac.count == SHA256.byteCount else { return nil }
        self.user = user
        self.device = device
        self.expiresAt = expiresAt
        self.nonce = nonce
        self.mac = mac
        self.body = Array(bytes[..<macDot])
    }

    /// The token, when its MAC is `key`'s over its body and it has not expired at `nowMillis`.
    /// The MAC is compared in constant time (swift-crypto's `isValidAuthenticationCode`), so
    /// how long a refusal takes says nothing about how much of a forged MAC was right.
    public func verified(with key: SymmetricKey, nowMillis: Int64) -> VerifiedToken? {
        guard expiresAt > nowMillis,
              HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: body, using: key),
              let id = TokenID(mac: mac) else { return nil }
        // The id comes from the decoded bytes: another spelling of the same MAC is the same token.
        return VerifiedToken(user: user, device: device, expiresAt: expiresAt, id: id)
    }

    /// A run of 1-20 decimal digits (no sign, no space) as a number.
    private static func decimal(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard (1...20).contains(digits.count), digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return UInt64(String(decoding: digits, as: UTF8.self))
    }
}

/// A token whose MAC and expiry were checked (`UnverifiedToken.verified(with:nowMillis:)`):
/// whose it is, for which of the user's devices, when it expires, and its id for revocation.
/// Whether it was revoked is the store's to say.
public struct VerifiedToken: Sendable, Equatable {
    public let user: String
    /// The device the token was issued to: it opens a session for that device only.
    public let device: String
    public let expiresAt: Int64
    /// The token's MAC: unique per login (a random nonce is signed with it).
    public let id: TokenID

    public var revocable: RevocableToken { RevocableToken(id: id, expiresAt: expiresAt) }
}

/// What revoking a token needs: its id, and how long the revocation must last.
public struct RevocableToken: Sendable, Equatable {
    public let id: TokenID
    public let expiresAt: Int64
}

/// A token's 32-byte MAC, kept inline: every logged-in connection holds the ids of its tokens,
/// and a hex string would be one more allocation each. Redis keys spell it in hex.
public struct TokenID: Sendable, Hashable {
    private let words: SIMD4<UInt64>

    /// nil unless `mac` is 32 bytes.
    init?(mac: some Collection<UInt8>) {
        guard mac.count == 32 else { return nil }
        var words = SIMD4<UInt64>()
        for (index, byte) in mac.enumerated() {
            words[index / 8] = words[index / 8] << 8 | UInt64(byte)
        }
        self.words = words
    }

    public var hex: String {
        (0..<4).map { word in
            let digits = String(words[word], radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }.joined()
    }
}

/// Login tokens: "USER@DEVICE.EXPIRES_MS.NONCE.MAC" where MAC is HMAC-SHA256 over the rest with
/// a key all nodes share. A token names its user and device, so it opens a session for no one
/// else and on no other device (revoking the device ends it); the nonce makes every login's
/// token distinct, so logging out one connection revokes only its token. Neither a user nor a
/// device name has an '@', and a token of the earlier form (no device) is refused.
public struct TokenSigner: Sendable {
    public let key: SymmetricKey
    public var lifetimeMillis: Int64 = 24 * 3600 * 1000

    public init(secret: [UInt8]) {
        key = SymmetricKey(data: secret)
    }

    /// `nonce`: random for every login; given only for the test vectors (docs/vectors/tokens.json).
    public func issue(user: String, device: String, nowMillis: Int64,
                      nonce: UInt64 = UInt64.random(in: 0...UInt64.max)) -> (token: String, expiresAt: Int64) {
        let expires = nowMillis + lifetimeMillis
        let body = "\(user)@\(device).\(expires).\(nonce)"
        let mac = HMAC<SHA256>.authenticationCode(for: Array(body.utf8), using: key)
        return ("\(body).\(Hex.string(mac))", expires)
    }

    /// The token's owner and id when it is well formed, authentic and unexpired (revocation is
    /// the store's).
    public func verify(_ token: String, nowMillis: Int64) -> VerifiedToken? {
        UnverifiedToken(token)?.verified(with: key, nowMillis: nowMillis)
    }
}

/// Bytes in hexadecimal, both ways.
public enum Hex {
    /// Two lowercase digits per byte.
    public static func string(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// nil unless every character is a hex digit (either case) and they pair up.
    public static func bytes(_ text: some StringProtocol) -> [UInt8]? {
        bytes(Array(text.utf8)[...])
    }

    static func bytes(_ digits: ArraySlice<UInt8>) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(digits.count / 2)
        var high: UInt8?
        for digit in digits {
            guard let value = Self.value(of: digit) else { return nil }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }

    private static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
