import Crypto
import Foundation
import SIMPCore
import Testing
@testable import SIMPServer

/// docs/vectors/tokens.json (PROTOCOL, "Names, passwords, tokens"): login tokens made by the
/// server's signer from a known key; checked against an independent HMAC-SHA256 and the
/// signer's verification, and the file must be what the signer makes now
/// (`scripts/gen-vectors.sh` rewrites it).
@Suite struct TokenVectorTests {
    struct TokenVector: Codable, Equatable {
        var name: String
        /// The key all nodes share, hex.
        var key: String
        var user: String
        /// The device the token opens sessions for.
        var device: String
        var issuedAtMillis: Int64
        var nonce: String
        var expiresAtMillis: Int64
        var token: String
    }

    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/vectors/tokens.json").standardized

    static func made() -> [TokenVector] {
        let secret = (0..<32).map { UInt8(0x40 + $0) }
        let signer = TokenSigner(secret: secret)
        let cases: [(String, String, String, Int64, UInt64)] = [
            ("a user's token", "alice", "phone", 1_700_000_000_000, 42),
            ("names with every allowed kind of character", "bob_2.x-y", "d-1.a_b", 1_700_000_000_000, UInt64.max),
            ("a login that named no device", "carol", "default", 1_700_000_000_000, 7),
        ]
        return cases.map { name, user, device, issued, nonce in
            let (token, expires) = signer.issue(user: user, device: device, nowMillis: issued, nonce: nonce)
            return TokenVector(name: name, key: secret.map { String(format: "%02x", $0) }.joined(), user: user, device: device,
                               issuedAtMillis: issued, nonce: String(nonce), expiresAtMillis: expires, token: token)
        }
    }

    @Test func theFileIsWhatTheSignerMakes() throws {
        let made = Self.made()
        if ProcessInfo.processInfo.environment["SIMP_WRITE_VECTORS"] == "1" {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try (encoder.encode(made) + Data("\n".utf8)).write(to: Self.file)
        }
        let onFile = try JSONDecoder().decode([TokenVector].self, from: Data(contentsOf: Self.file))
        #expect(onFile == made, "docs/vectors/tokens.json differs from what the signer makes; run scripts/gen-vectors.sh if meant")
    }

    @Test func everyTokenIsTheDocumentedHMACAndVerifiesUntilItExpires() throws {
        let vectors = try JSONDecoder().decode([TokenVector].self, from: Data(contentsOf: Self.file))
        for vector in vectors {
            let key = SymmetricKey(data: Hex.bytes(vector.key)!)
            let body = "\(vector.user)@\(vector.device).\(vector.expiresAtMillis).\(vector.nonce)"
            let mac = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key).map { String(format: "%02x", $0) }.joined()
            #expect(vector.token == "\(body).\(mac)", "\(vector.name)")
            #expect(vector.expiresAtMillis == vector.issuedAtMillis + 24 * 3600 * 1000)
            let signer = TokenSigner(secret: Hex.bytes(vector.key)!)
            let verified = signer.verify(vector.token, nowMillis: vector.expiresAtMillis - 1)
            #expect(verified?.user == vector.user)
            #expect(verified?.device == vector.device)
            #expect(signer.verify(vector.token, nowMillis: vector.expiresAtMillis) == nil, "valid at its expiry")
            let forged = "mallory" + vector.token.drop(while: { $0 != "." })
            #expect(signer.verify(forged, nowMillis: vector.issuedAtMillis) == nil, "another user's name under the same MAC")
            let moved = vector.token.replacingOccurrences(of: "@\(vector.device).", with: "@laptop.")
            #expect(signer.verify(moved, nowMillis: vector.issuedAtMillis) == nil, "another device's name under the same MAC")
        }
    }
}
