import Foundation
import SIMPMLS
import Testing

/// Joining from a Welcome (RFC 9420 section 12.4.3.1): a Welcome we seal joins, and each
/// refusal has its own error.
@Suite struct WelcomeTests {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
    static let joinerSecret = SecretBytes([UInt8](repeating: 0x44, count: 32))
    static let randomness = [UInt8](repeating: 0x55, count: 32)

    /// The fixture key package (init key from seed 2), validated.
    static func keyPackage() throws -> KeyPackage { try MessageFixtures.keyPackage().validate(suite: suite) }
    static func initKey() throws -> HPKEPrivateKey { try MessageFixtures.hpkeKey(2) }
    static func committer() throws -> SignaturePrivateKey { try MessageFixtures.signer(8) }

    /// A Welcome to the fixture epoch with `psks` (and their values), its GroupInfo signed by the
    /// committer with the epoch's confirmation tag (or `tag`).
    static func welcome(
        psks: [PreSharedKey] = [], groupSecretsJoiner: SecretBytes = joinerSecret, tag: [UInt8]? = nil, epoch: UInt64? = nil,
        groupSecretsPSKs: [PreSharedKeyID]? = nil
    ) throws -> Welcome {
        var context = MessageFixtures.groupContext
        if let epoch { context.epoch = epoch }
        let secrets = try EpochSecrets(suite: suite, joinerSecret: joinerSecret, pskSecret: try suite.pskSecret(psks), groupContext: context)
        var info = GroupInfoIn(
            groupContext: context, extensions: [],
            confirmationTag: tag ?? secrets.confirmationTag(confirmedTranscriptHash: context.confirmedTranscriptHash), signer: 0, signature: [])
        info.signature = try suite.signWithLabel(try committer(), label: GroupInfoTBS.label, content: try info.toBeSigned.mlsEncoded())
        let groupSecrets = GroupSecrets(joinerSecret: groupSecretsJoiner.bytes, pathSecret: nil, psks: groupSecretsPSKs ?? psks.map(\.id))
        return try Welcome(sealing: info, epochSecrets: secrets, newMembers: [(try keyPackage(), groupSecrets, randomness)])
    }

    static func noPSK(_ id: PreSharedKeyID) throws -> SecretBytes { throw MissingPSK() }
    struct MissingPSK: Error, Equatable {}

    static func join(_ welcome: Welcome, psk: (PreSharedKeyID) throws -> SecretBytes = noPSK) throws -> JoinedEpoch {
        try welcome.decrypt(for: try keyPackage(), initPrivateKey: try initKey(), psk: psk).verify(signerKey: try committer().publicKey)
    }

    @Test func aWelcomeWeSealJoinsItsEpoch() throws {
        let joined = try Self.join(try Self.welcome())
        #expect(joined.groupContext == MessageFixtures.groupContext)
        let secrets = try EpochSecrets(suite: Self.suite, joinerSecret: Self.joinerSecret, pskSecret: nil, groupContext: MessageFixtures.groupContext)
        #expect(joined.epochSecrets.epochAuthenticator == secrets.epochAuthenticator)
        #expect(joined.interimTranscriptHash == (try TranscriptHashes.interim(
            confirmed: MessageFixtures.groupContext.confirmedTranscriptHash,
            confirmationTag: secrets.confirmationTag(confirmedTranscriptHash: MessageFixtures.groupContext.confirmedTranscriptHash),
            suite: Self.suite)))
        #expect(!String(describing: joined).contains("44") && String(describing: joined).hasSuffix("redacted)"))
    }

    @Test func aWelcomeWithAPSKNonceOfTheWrongLengthIsRefused() throws {
        // Section 8.4: psk_nonce is KDF.Nh bytes; the GroupSecrets' PSK ids are checked before
        // the PSK is asked for.
        let id = PreSharedKeyID(kind: .external(pskID: [1]), nonce: [UInt8](repeating: 2, count: 32))
        let psk = PreSharedKey(id: id, secret: SecretBytes([UInt8](repeating: 3, count: 32)))
        let ask: (PreSharedKeyID) throws -> SecretBytes = { _ in psk.secret }
        for length in [0, 16, 31, 33] {
            let short = PreSharedKeyID(kind: id.kind, nonce: [UInt8](repeating: 2, count: length))
            let welcome = try Self.welcome(psks: [psk], groupSecretsPSKs: [short])
            #expect(throws: WelcomeError.invalidPSKNonce(expected: 32, got: length)) { try Self.join(welcome, psk: ask) }
        }
        _ = try Self.join(try Self.welcome(psks: [psk], groupSecretsPSKs: [id]), psk: ask)
    }

    @Test func aWelcomeWithAPSKNeedsIt() throws {
        let psk = PreSharedKey(id: PreSharedKeyID(kind: .external(pskID: [1]), nonce: [UInt8](repeating: 2, count: 32)),
                               secret: SecretBytes([UInt8](repeating: 3, count: 32)))
        let welcome = try Self.welcome(psks: [psk])
        #expect(throws: MissingPSK()) { try Self.join(welcome) }
        _ = try Self.join(welcome) { id in
            guard id == psk.id else { throw MissingPSK() }
            return psk.secret
        }
        // Another value under the same id: the welcome key differs, the GroupInfo does not open.
        #expect(throws: WelcomeError.groupInfoDecryptionFailed) {
            try Self.join(welcome) { _ in SecretBytes([UInt8](repeating: 4, count: 32)) }
        }
    }

    @Test func resumptionPSKsForReinitOrBranchAreOneAndInEpoch1() throws {
        func psk(_ usage: ResumptionPSKUsage, _ n: UInt8) -> PreSharedKey {
            PreSharedKey(id: PreSharedKeyID(kind: .resumption(usage: usage, groupID: [n], epoch: 3), nonce: [UInt8](repeating: n, count: 32)),
                         secret: SecretBytes([UInt8](repeating: n, count: 32)))
        }
        let two = [psk(.reinit, 1), psk(.branch, 2)]
        let values = { (id: PreSharedKeyID) -> SecretBytes in try #require(two.first { $0.id == id }).secret }
        #expect(throws: WelcomeError.moreThanOneReinitOrBranchPSK) { try Self.join(try Self.welcome(psks: two), psk: values) }
        #expect(throws: WelcomeError.reinitOrBranchNotInEpoch1(epoch: 7)) { try Self.join(try Self.welcome(psks: [two[0]]), psk: values) }
        _ = try Self.join(try Self.welcome(psks: [two[0]], epoch: 1), psk: values)
    }

    @Test func aWrongConfirmationTagIsRefused() throws {
        #expect(throws: WelcomeError.invalidConfirmationTag) { try Self.join(try Self.welcome(tag: [UInt8](repeating: 9, count: 32))) }
    }

    @Test func aGroupInfoSignedByAnotherIsRefused() throws {
        let decrypted = try Self.welcome().decrypt(for: try Self.keyPackage(), initPrivateKey: try Self.initKey(), psk: Self.noPSK)
        #expect(throws: MLSCryptoError.invalidSignature) { try decrypted.verify(signerKey: try MessageFixtures.signer(9).publicKey) }
    }

    @Test func aWelcomeForSomeoneElseOrUnderAnotherKeyIsRefused() throws {
        let welcome = try Self.welcome()
        #expect(throws: WelcomeError.wrongInitKey) {
            try welcome.decrypt(for: try Self.keyPackage(), initPrivateKey: try MessageFixtures.hpkeKey(3), psk: Self.noPSK)
        }
        var other = welcome
        other.secrets[0].newMember[0] ^= 1
        #expect(throws: WelcomeError.noSecretsForKeyPackage) {
            try other.decrypt(for: try Self.keyPackage(), initPrivateKey: try Self.initKey(), psk: Self.noPSK)
        }
        var suite3 = welcome
        suite3.cipherSuite = CipherSuiteID(3)
        #expect(throws: MLSValidationError.cipherSuiteMismatch(expected: CipherSuiteID(1), got: CipherSuiteID(3))) {
            try suite3.decrypt(for: try Self.keyPackage(), initPrivateKey: try Self.initKey(), psk: Self.noPSK)
        }
        // The group info is the HPKE context: changing it breaks the group secrets first.
        var tampered = welcome
        tampered.encryptedGroupInfo[0] ^= 1
        #expect(throws: WelcomeError.groupSecretsDecryptionFailed) {
            try tampered.decrypt(for: try Self.keyPackage(), initPrivateKey: try Self.initKey(), psk: Self.noPSK)
        }
        // GroupSecrets whose joiner secret is not the epoch's: the GroupInfo does not open.
        #expect(throws: WelcomeError.groupInfoDecryptionFailed) {
            try Self.join(try Self.welcome(groupSecretsJoiner: SecretBytes([UInt8](repeating: 0x45, count: 32))))
        }
    }
}
