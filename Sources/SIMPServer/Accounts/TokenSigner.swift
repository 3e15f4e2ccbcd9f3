import Crypto
import Foundation

/// Login tokens: "USER.EXPIRES_MS.MAC" where MAC is HMAC-SHA256 over "USER.EXPIRES_MS"
/// with a key all nodes share. A token names its user, so it cannot log in anyone else.
struct TokenSigner: Sendable {
    let key: SymmetricKey
    var lifetimeMillis: Int64 = 24 * 3600 * 1000

    init(secret: [UInt8]) {
        key = SymmetricKey(data: secret)
    }

    func issue(user: String, nowMillis: Int64) -> (token: String, expiresAt: Int64) {
        let expires = nowMillis + lifetimeMillis
        let body = "\(user).\(expires)"
        return ("\(body).\(mac(body))", expires)
    }

    /// The token's user when it is authentic and unexpired.
    func verify(_ token: String, nowMillis: Int64) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let expires = Int64(parts[1]), expires > nowMillis else { return nil }
        let body = "\(parts[0]).\(parts[1])"
        guard let given = Data(hexString: String(parts[2])),
              HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: Data(body.utf8), using: key) else {
            return nil
        }
        return String(parts[0])
    }

    private func mac(_ body: String) -> String {
        HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key).map { String(format: "%02x", $0) }.joined()
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
