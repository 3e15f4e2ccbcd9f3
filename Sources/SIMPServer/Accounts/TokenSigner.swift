import Crypto
import Foundation

/// A verified login token: whose it is, for which of the user's devices, when it expires,
/// and its id for revocation.
struct VerifiedToken: Sendable, Equatable {
    var user: String
    /// The device the token was issued to: it opens a session for that device only.
    var device: String
    var expiresAt: Int64
    /// The token's MAC: unique per login (a random nonce is signed with it).
    var id: TokenID

    var revocable: RevocableToken { RevocableToken(id: id, expiresAt: expiresAt) }
}

/// What revoking a token needs: its id, and how long the revocation must last.
struct RevocableToken: Sendable, Equatable {
    var id: TokenID
    var expiresAt: Int64
}

/// A token's 32-byte MAC, kept inline: every logged-in connection holds the ids of its tokens,
/// and a hex string would be one more allocation each. Redis keys spell it in hex.
struct TokenID: Sendable, Hashable {
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

    var hex: String {
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
struct TokenSigner: Sendable {
    let key: SymmetricKey
    var lifetimeMillis: Int64 = 24 * 3600 * 1000

    init(secret: [UInt8]) {
        key = SymmetricKey(data: secret)
    }

    /// `nonce`: random for every login; given only for the test vectors (docs/vectors/tokens.json).
    func issue(user: String, device: String, nowMillis: Int64,
               nonce: UInt64 = UInt64.random(in: 0...UInt64.max)) -> (token: String, expiresAt: Int64) {
        let expires = nowMillis + lifetimeMillis
        let body = "\(user)@\(device).\(expires).\(nonce)"
        return ("\(body).\(Self.hex(mac(body)))", expires)
    }

    /// The token's owner and id when it is authentic and unexpired (revocation is the store's).
    func verify(_ token: String, nowMillis: Int64) -> VerifiedToken? {
        // A user name may hold dots: the token splits at its last three.
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 4, let expires = Int64(parts[parts.count - 3]), expires > nowMillis else { return nil }
        let owner = parts[0..<(parts.count - 3)].joined(separator: ".").split(separator: "@", omittingEmptySubsequences: false)
        guard owner.count == 2 else { return nil }
        let (user, device) = (String(owner[0]), String(owner[1]))
        let body = parts[0..<(parts.count - 1)].joined(separator: ".")
        guard let given = Data(hexString: String(parts[parts.count - 1])), let id = TokenID(mac: given),
              HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: Data(body.utf8), using: key) else {
            return nil
        }
        // The id comes from the decoded bytes: another spelling of the same MAC is the same token.
        return VerifiedToken(user: user, device: device, expiresAt: expires, id: id)
    }

    private func mac(_ body: String) -> HashedAuthenticationCode<SHA256> {
        HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key)
    }

    private static func hex<D: Sequence>(_ bytes: D) -> String where D.Element == UInt8 {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}

extension Data {
    init?(hexString: String) {
        let utf8 = Array(hexString.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(utf8.count / 2)
        for i in stride(from: 0, to: utf8.count, by: 2) {
            guard let byte = UInt8(String(decoding: utf8[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        self.init(bytes)
    }
}
