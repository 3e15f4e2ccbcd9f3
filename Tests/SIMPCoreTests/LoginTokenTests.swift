import Crypto
import SIMPCore
import Testing

/// A token off the wire is split and its shape checked (`UnverifiedToken`); only the MAC and
/// the expiry make it a `VerifiedToken`.
struct LoginTokenTests {
    static let signer = TokenSigner(secret: [UInt8](repeating: 7, count: 32))
    static let mac = String(repeating: "ab", count: 32)

    @Test func aTokenSplitsAtItsLastThreeDots() throws {
        let token = try #require(UnverifiedToken("bob_2.x-y@d-1.a_b.1700086400000.18446744073709551615.\(Self.mac)"))
        #expect(token.user == "bob_2.x-y")
        #expect(token.device == "d-1.a_b")
        #expect(token.expiresAt == 1_700_086_400_000)
        #expect(token.nonce == .max)
        #expect(token.mac == [UInt8](repeating: 0xab, count: 32))
    }

    @Test func onlyTheShapeOfATokenParses() {
        let refused = [
            "", "...", "alice@phone.1.2", "alice.1.2.\(Self.mac)",
            "alice@phone.+1.2.\(Self.mac)", "alice@phone.1.-2.\(Self.mac)", "alice@phone. 1.2.\(Self.mac)",
            "alice@phone.1.2.\(Self.mac.dropLast(2))", "alice@phone.1.2.\(Self.mac)ab", "alice@phone.1.2.+b\(Self.mac.dropFirst(2))",
            "alice@phone.1.2.\(Self.mac.dropLast())g", "Alice@phone.1.2.\(Self.mac)", "alice@ph@ne.1.2.\(Self.mac)",
            "alice@phone-name-too-long.1.2.\(Self.mac)", "@phone.1.2.\(Self.mac)", "alice@.1.2.\(Self.mac)",
            "alice@phone.9223372036854775808.2.\(Self.mac)", "alice@phone.1.18446744073709551616.\(Self.mac)",
            String(repeating: "a", count: 300) + "@phone.1.2.\(Self.mac)",
        ]
        for text in refused {
            #expect(UnverifiedToken(text) == nil, "\(text)")
        }
    }

    @Test func onlyTheMACAndTheExpiryMakeATokenVerified() throws {
        let (text, expiresAt) = Self.signer.issue(user: "ann", device: "phone", nowMillis: 1_000, nonce: 5)
        let token = try #require(UnverifiedToken(text))
        let verified = try #require(token.verified(with: Self.signer.key, nowMillis: expiresAt - 1))
        #expect(verified.user == "ann" && verified.device == "phone" && verified.expiresAt == expiresAt)
        #expect(verified.id.hex == String(text.split(separator: ".").last!))
        #expect(token.verified(with: Self.signer.key, nowMillis: expiresAt) == nil, "expired")
        #expect(token.verified(with: SymmetricKey(data: [UInt8](repeating: 8, count: 32)), nowMillis: 1_000) == nil, "another key")
        let upper = text.split(separator: ".").dropLast().joined(separator: ".") + "." + verified.id.hex.uppercased()
        #expect(Self.signer.verify(upper, nowMillis: 1_000)?.id == verified.id, "the same MAC in capitals is the same token")
    }

    @Test func hexReadsWhatItWritesAndNothingElse() {
        let bytes: [UInt8] = [0, 1, 0x7f, 0x80, 0xfe, 0xff]
        #expect(Hex.string(bytes) == "00017f80feff")
        #expect(Hex.bytes("00017F80FEff") == bytes)
        for text in ["0", "+1", "-1", "0x", " 1", "g0"] {
            #expect(Hex.bytes(text) == nil, "\(text)")
        }
        #expect(Hex.bytes("") == [])
    }
}
