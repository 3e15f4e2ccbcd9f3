import Foundation
import SIMPMLS
import Testing

/// The key schedule (RFC 9420 section 8), PSKs (8.4) and sender data keys (6.3.2) beyond what the
/// vector files check: input validation, encodings, redaction.
@Suite struct KeyScheduleTests {
    static let suite = MLSCipherSuite.x25519ChaCha20Poly1305SHA256Ed25519
    static func secret(_ b: UInt8) -> SecretBytes { SecretBytes([UInt8](repeating: b, count: 32)) }
    static let context = GroupContext(
        cipherSuite: suite.id, groupID: Array("group".utf8), epoch: 1, treeHash: [UInt8](repeating: 7, count: 32),
        confirmedTranscriptHash: [UInt8](repeating: 8, count: 32), extensions: [])

    static func epoch() throws -> EpochSecrets {
        try EpochSecrets(suite: suite, initSecret: secret(1), commitSecret: secret(2), pskSecret: nil, groupContext: context)
    }

    @Test func aMissingCommitOrPSKSecretIsTheZeroString() throws {
        let implicit = try EpochSecrets(suite: Self.suite, initSecret: Self.secret(1), commitSecret: nil, pskSecret: nil, groupContext: Self.context)
        let explicit = try EpochSecrets(
            suite: Self.suite, initSecret: Self.secret(1), commitSecret: .zero(Self.suite), pskSecret: .zero(Self.suite), groupContext: Self.context)
        #expect(implicit.epochAuthenticator == explicit.epochAuthenticator)
        #expect(implicit.initSecret == explicit.initSecret)
        #expect(try Self.epoch().initSecret != implicit.initSecret)
    }

    @Test func theGroupContextBindsTheEpoch() throws {
        var other = Self.context
        other.epoch = 2
        let a = try Self.epoch()
        let b = try EpochSecrets(suite: Self.suite, initSecret: Self.secret(1), commitSecret: Self.secret(2), pskSecret: nil, groupContext: other)
        #expect(a.joinerSecret != b.joinerSecret)
        #expect(a.encryptionSecret != b.encryptionSecret)
        #expect(b.epoch == 2)
        // The welcome secret does not depend on the GroupContext beyond the joiner secret.
        #expect(try KeySchedule.welcomeSecret(suite: Self.suite, joinerSecret: a.joinerSecret, pskSecret: nil) == a.welcomeSecret)
        let welcome = try a.welcomeKeyAndNonce()
        #expect(welcome.key.count == 32 && welcome.nonce.count == 12)
    }

    @Test func badInputsAreRefused() throws {
        #expect(throws: KeyScheduleError.invalidSecretLength(name: "init_secret", expected: 32, got: 16)) {
            try EpochSecrets(suite: Self.suite, initSecret: SecretBytes([UInt8](repeating: 0, count: 16)), commitSecret: nil, pskSecret: nil, groupContext: Self.context)
        }
        #expect(throws: KeyScheduleError.invalidSecretLength(name: "psk_secret", expected: 32, got: 0)) {
            try EpochSecrets(suite: Self.suite, joinerSecret: Self.secret(3), pskSecret: SecretBytes([]), groupContext: Self.context)
        }
        #expect(throws: KeyScheduleError.cipherSuiteMismatch(groupContext: CipherSuiteID(3), suite: CipherSuiteID(1))) {
            try EpochSecrets(suite: .x25519AES128GCMSHA256Ed25519, joinerSecret: Self.secret(3), pskSecret: nil, groupContext: Self.context)
        }
    }

    @Test func theExporterDependsOnLabelContextAndLength() throws {
        let e = try Self.epoch()
        let a = try e.export(label: Array("a".utf8), context: [1], length: 32)
        #expect(try e.export(label: Array("a".utf8), context: [1], length: 32) == a)
        #expect(try e.export(label: Array("b".utf8), context: [1], length: 32) != a)
        #expect(try e.export(label: Array("a".utf8), context: [2], length: 32) != a)
        let long = try e.export(label: Array("a".utf8), context: [1], length: 100)
        #expect(long.count == 100)
        // The length is part of KDFLabel: a longer export does not extend a shorter one.
        #expect(Array(long.bytes.prefix(32)) != a.bytes)
        #expect(throws: MLSCryptoError.outputLengthTooLarge(255 * 32 + 1)) {
            try e.export(label: [], context: [], length: 255 * 32 + 1)
        }
    }

    @Test func theExternalKeyPairAndConfirmationTag() throws {
        let e = try Self.epoch()
        #expect(try e.externalKeyPair().publicKey == (try Self.suite.deriveHPKEKeyPair(ikm: e.externalSecret.bytes)).publicKey)
        let hash = [UInt8](repeating: 9, count: 32)
        let tag = e.confirmationTag(confirmedTranscriptHash: hash)
        #expect(e.verifyConfirmationTag(tag, confirmedTranscriptHash: hash))
        var bad = tag
        bad[0] ^= 1
        #expect(!e.verifyConfirmationTag(bad, confirmedTranscriptHash: hash))
        #expect(!e.verifyConfirmationTag(tag, confirmedTranscriptHash: [UInt8](repeating: 8, count: 32)))
    }

    @Test func epochSecretsDoNotPrintSecrets() throws {
        let e = try Self.epoch()
        var dumped = ""
        dump(e, to: &dumped)
        let hex = e.exporterSecret.bytes.map { String(format: "%02x", $0) }.joined()
        for text in ["\(e)", String(reflecting: e), dumped] {
            #expect(text.contains("redacted"))
            #expect(!text.contains(hex))
            #expect(!text.contains(e.exporterSecret.bytes.map(String.init).joined(separator: ", ")))
        }
    }

    // MARK: PSKs

    @Test func preSharedKeyIDEncodings() throws {
        let external = PreSharedKeyID(kind: .external(pskID: [0xAA, 0xBB]), nonce: [0x01])
        #expect(try external.mlsEncoded() == [0x01, 0x02, 0xAA, 0xBB, 0x01, 0x01])
        let resumption = PreSharedKeyID(kind: .resumption(usage: .branch, groupID: [0x47], epoch: 0x0102), nonce: [])
        #expect(try resumption.mlsEncoded() == [0x02, 0x03, 0x01, 0x47, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0x00])
        for id in [external, resumption] {
            #expect(try PreSharedKeyID(mlsDecoding: try id.mlsEncoded()) == id)
        }
        // reserved(0) and unknown values of PSKType and ResumptionPSKUsage do not decode.
        for bad: [UInt8] in [[0x00, 0x00, 0x00], [0x03, 0x00, 0x00], [0x02, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x00],
                             [0x02, 0x04, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x00]] {
            #expect(throws: MLSDecodingError.self) { try PreSharedKeyID(mlsDecoding: bad) }
        }
        let label = PSKLabel(id: external, index: 1, count: 2)
        #expect(try label.mlsEncoded() == (try external.mlsEncoded()) + [0x00, 0x01, 0x00, 0x02])
    }

    @Test func pskSecretOfNoPSKsIsZeroAndOrderMatters() throws {
        #expect(try Self.suite.pskSecret([]) == .zero(Self.suite))
        let a = PreSharedKey(id: PreSharedKeyID(kind: .external(pskID: [1]), nonce: [UInt8](repeating: 1, count: 32)), secret: Self.secret(5))
        let b = PreSharedKey(
            id: PreSharedKeyID(kind: .resumption(usage: .application, groupID: [2], epoch: 3), nonce: [UInt8](repeating: 2, count: 32)),
            secret: Self.secret(6))
        let ab = try Self.suite.pskSecret([a, b])
        #expect(ab.count == 32)
        #expect(try Self.suite.pskSecret([b, a]) != ab)
        #expect(try Self.suite.pskSecret([a]) != ab)
    }

    // MARK: Sender data

    @Test func senderDataSamplesTheFirstNhBytes() throws {
        let s = Self.secret(4)
        let ciphertext = (0..<100).map { UInt8($0) }
        let full = try Self.suite.senderDataKeyAndNonce(senderDataSecret: s, ciphertext: ciphertext)
        let prefix = try Self.suite.senderDataKeyAndNonce(senderDataSecret: s, ciphertext: Array(ciphertext.prefix(32)))
        #expect(full.key == prefix.key && full.nonce == prefix.nonce)
        #expect(full.key.count == 32 && full.nonce.count == 12)
        // A shorter ciphertext is its own sample.
        let short = try Self.suite.senderDataKeyAndNonce(senderDataSecret: s, ciphertext: [1, 2, 3])
        let expected = try Self.suite.expandWithLabel(secret: s.bytes, label: Array("key".utf8), context: [1, 2, 3], length: 32)
        #expect(short.key.matches(expected))
        #expect(short.key != full.key)
    }
}
