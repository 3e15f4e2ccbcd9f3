import SIMPMLS
import Testing

/// RFC 9420 section 5 for cipher suites 1 and 3 by hand (MLSVectorTests: against crypto-basics.json).
@Suite struct CryptoBasicsTests {
    static let suites = MLSCipherSuite.allCases

    @Test(arguments: suites)
    func encryptWithLabelTakesItsRandomnessFromTheCaller(suite: MLSCipherSuite) throws {
        let recipient = try suite.deriveHPKEKeyPair(ikm: Array(repeating: 1, count: 32))
        let label = Array("UpdatePathNode".utf8), context = Array("group context".utf8), plaintext = Array("path secret".utf8)
        let a = try suite.encryptWithLabel(recipient.publicKey, label: label, context: context, plaintext: plaintext,
                                           randomness: Array(repeating: 2, count: 32))
        let b = try suite.encryptWithLabel(recipient.publicKey, label: label, context: context, plaintext: plaintext,
                                           randomness: Array(repeating: 2, count: 32))
        let c = try suite.encryptWithLabel(recipient.publicKey, label: label, context: context, plaintext: plaintext,
                                           randomness: Array(repeating: 3, count: 32))
        #expect(a == b)
        #expect(a.kemOutput != c.kemOutput)
        #expect(a.ciphertext.count == plaintext.count + 16)
        #expect(try suite.decryptWithLabel(recipient, label: label, context: context, ciphertext: a) == plaintext)
        #expect(try suite.decryptWithLabel(recipient, label: label, context: context, ciphertext: c) == plaintext)
        #expect(throws: MLSCryptoError.decryptionFailed) {
            try suite.decryptWithLabel(recipient, label: Array("Welcome".utf8), context: context, ciphertext: a)
        }
        var tampered = a.ciphertext
        tampered[0] ^= 1
        #expect(throws: MLSCryptoError.decryptionFailed) {
            try suite.decryptWithLabel(recipient, label: label, context: context,
                                       ciphertext: HPKECiphertext(kemOutput: a.kemOutput, ciphertext: tampered))
        }
        #expect(throws: MLSCryptoError.invalidRandomness(expected: 32, got: 31)) {
            try suite.encryptWithLabel(recipient.publicKey, label: label, context: context, plaintext: plaintext,
                                       randomness: Array(repeating: 2, count: 31))
        }
    }

    @Test(arguments: suites)
    func signedContentIsVerifiedOnlyByItsSignature(suite: MLSCipherSuite) throws {
        let key = try SignaturePrivateKey(rawRepresentation: Array(repeating: 9, count: 32))
        let label = Array("LeafNodeTBS".utf8), content: [UInt8] = [1, 2, 3]
        let signature = try suite.signWithLabel(key, label: label, content: content)
        let verified = try SignedContentIn(label: label, content: content, signature: signature).verify(with: key.publicKey, suite: suite)
        #expect(verified.content == content)
        #expect(throws: MLSCryptoError.invalidSignature) {
            try SignedContentIn(label: label, content: [1, 2, 4], signature: signature).verify(with: key.publicKey, suite: suite)
        }
        // The label is part of what is signed.
        #expect(!suite.verifyWithLabel(key.publicKey, label: Array("KeyPackageTBS".utf8), content: content, signature: signature))
    }

    @Test func keysFromOutsideAreCheckedBeforeUse() throws {
        let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
        #expect(throws: MLSCryptoError.self) { try SignaturePublicKeyIn(bytes: [1, 2, 3]).validate(for: suite) }
        #expect(throws: MLSCryptoError.self) { try HPKEPublicKeyIn(bytes: Array(repeating: 0, count: 33)).validate(for: suite) }
        #expect(throws: MLSCryptoError.self) { try HPKEPrivateKey(rawRepresentation: []) }
        #expect(throws: MLSCryptoError.self) { try SignaturePrivateKey(rawRepresentation: Array(repeating: 0, count: 64)) }
        // A low-order X25519 public key (here all zero) gives an all-zero shared secret, which
        // RFC 9180 section 7.1.4 says to refuse; swift-crypto does not, SIMPMLS does, both ways.
        let zero = try HPKEPublicKeyIn(bytes: Array(repeating: 0, count: 32)).validate(for: suite)
        #expect(throws: MLSCryptoError.invalidKey("X25519 shared secret is all zero (low-order public key)")) {
            try suite.encryptWithLabel(zero, label: [], context: [], plaintext: [], randomness: Array(repeating: 1, count: 32))
        }
        let recipient = try suite.deriveHPKEKeyPair(ikm: [1])
        let lowOrder = HPKECiphertext(kemOutput: Array(repeating: 0, count: 32), ciphertext: Array(repeating: 0, count: 16))
        #expect(throws: MLSCryptoError.decryptionFailed) {
            try suite.decryptWithLabel(recipient, label: [], context: [], ciphertext: lowOrder)
        }
        let shortKEMOutput = HPKECiphertext(kemOutput: [1, 2, 3], ciphertext: Array(repeating: 0, count: 16))
        #expect(throws: MLSCryptoError.decryptionFailed) {
            try suite.decryptWithLabel(recipient, label: [], context: [], ciphertext: shortKEMOutput)
        }
    }

    @Test func outputLengthsBeyondTheKDFsThrow() throws {
        let suite = MLSCipherSuite.x25519ChaCha20Poly1305SHA256Ed25519
        let secret = Array(repeating: UInt8(1), count: 32)
        #expect(try suite.expandWithLabel(secret: secret, label: [], context: [], length: 255 * 32).count == 255 * 32)
        #expect(throws: MLSCryptoError.outputLengthTooLarge(255 * 32 + 1)) {
            try suite.expandWithLabel(secret: secret, label: [], context: [], length: 255 * 32 + 1)
        }
        #expect(throws: MLSCryptoError.outputLengthTooLarge(70000)) {
            try suite.expandWithLabel(secret: secret, label: [], context: [], length: 70000)
        }
        #expect(throws: MLSCryptoError.outputLengthTooLarge(-1)) {
            try suite.deriveTreeSecret(secret: secret, label: [], generation: 0, length: -1)
        }
    }

    @Test func secretsAreComparedInConstantTimeAndNotPrinted() throws {
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(ConstantTime.equals([], []))
        let key = try HPKEPrivateKey(rawRepresentation: Array(repeating: 0xAB, count: 32))
        #expect(String(describing: key) == "HPKEPrivateKey(redacted)")
        #expect(!"\(try SignaturePrivateKey(rawRepresentation: Array(repeating: 0xAB, count: 32)))".contains("ab"))
    }
}
