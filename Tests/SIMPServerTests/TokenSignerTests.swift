import Crypto
import Foundation
import SIMPCore
import Testing
@testable import SIMPServer

@Suite struct TokenSignerTests {
    let signer = TokenSigner(secret: Array(repeating: 7, count: 32))

    @Test func aTokensIdIsItsMACSpelledAsIssued() throws {
        let (token, expiresAt) = signer.issue(user: "ann", device: "phone", nowMillis: 1_000)
        let verified = try #require(signer.verify(token, nowMillis: 2_000))
        #expect(verified.user == "ann")
        #expect(verified.device == "phone")
        #expect(verified.expiresAt == expiresAt)
        // Revocation keys in Redis are named by this hex: it must not change between versions.
        #expect(verified.id.hex == String(token.split(separator: ".").last!))
    }

    @Test func anotherSpellingOfTheSameMACIsTheSameToken() throws {
        let (token, _) = signer.issue(user: "ann", device: "phone", nowMillis: 1_000)
        let verified = try #require(signer.verify(token, nowMillis: 2_000))
        let upper = token.split(separator: ".").dropLast().joined(separator: ".") + "." + verified.id.hex.uppercased()
        #expect(signer.verify(upper, nowMillis: 2_000)?.id == verified.id)
    }

    @Test func aTruncatedOrAlteredMACIsRefused() {
        let (token, _) = signer.issue(user: "ann", device: "phone", nowMillis: 1_000)
        #expect(signer.verify(String(token.dropLast(2)), nowMillis: 2_000) == nil)
        let altered = String(token.dropLast()) + (token.last == "0" ? "1" : "0")
        #expect(signer.verify(altered, nowMillis: 2_000) == nil)
        #expect(signer.verify(token, nowMillis: Int64.max) == nil)
    }

    /// A token of the form before devices were bound (no '@') names no device: refused, so
    /// its holder logs in again and gets a bound one.
    @Test func aTokenWithoutADeviceIsRefused() {
        let body = "ann.100000.5"
        let mac = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: signer.key).map { String(format: "%02x", $0) }.joined()
        #expect(signer.verify("\(body).\(mac)", nowMillis: 2_000) == nil)
    }
}
