/// Why a Welcome could not be opened or joined (RFC 9420 section 12.4.3.1). Never carries a
/// secret. A cipher suite that differs is ``MLSValidationError/cipherSuiteMismatch(expected:got:)``,
/// a GroupInfo signature ``MLSCryptoError/invalidSignature``.
public enum WelcomeError: Error, Equatable, Sendable {
    /// No entry of `secrets` names the key package.
    case noSecretsForKeyPackage
    /// The private key given is not the key package's `init_key`'s.
    case wrongInitKey
    /// `encrypted_group_secrets` did not decrypt under `init_key`, or is not a GroupSecrets.
    case groupSecretsDecryptionFailed
    /// `encrypted_group_info` did not open under the welcome key and nonce, or is not a GroupInfo.
    case groupInfoDecryptionFailed
    /// More than one PSK of type `resumption` with usage `reinit` or `branch`.
    case moreThanOneReinitOrBranchPSK
    /// A PreSharedKeyID of the GroupSecrets whose `psk_nonce` is not `KDF.Nh` bytes (section
    /// 8.4: "the length of the psk_nonce MUST be equal to KDF.Nh").
    case invalidPSKNonce(expected: Int, got: Int)
    /// A `reinit` or `branch` PSK in a Welcome to an epoch other than 1.
    case reinitOrBranchNotInEpoch1(epoch: UInt64)
    /// The GroupInfo's confirmation tag is not `MAC(confirmation_key, confirmed_transcript_hash)`
    /// of the epoch its `joiner_secret` gives.
    case invalidConfirmationTag
}

extension Welcome {
    /// The label of `EncryptWithLabel` for GroupSecrets (RFC 9420 section 12.4.3.1).
    public static let groupSecretsLabel = Array("Welcome".utf8)

    /// A committer's Welcome to the epoch of `epochSecrets` (RFC 9420 section 12.4.3.1):
    /// `groupInfo` (signed) sealed with the epoch's `welcome_key` and `welcome_nonce`, and for
    /// each new member its GroupSecrets encrypted to its key package's `init_key`
    /// (`EncryptWithLabel(init_key, "Welcome", encrypted_group_info, group_secrets)`), with 32
    /// bytes of fresh randomness each. The GroupSecrets must carry the epoch's `joiner_secret`
    /// and the PSKs `epochSecrets` was derived with.
    public init(
        sealing groupInfo: GroupInfoIn, epochSecrets: EpochSecrets,
        newMembers: [(keyPackage: KeyPackage, groupSecrets: GroupSecrets, randomness: [UInt8])]
    ) throws {
        let suite = epochSecrets.suite
        let welcome = try epochSecrets.welcomeKeyAndNonce()
        let encryptedGroupInfo = try suite.seal(
            key: welcome.key.bytes, nonce: welcome.nonce.bytes, aad: [], plaintext: try groupInfo.mlsEncoded())
        let secrets = try newMembers.map { member in
            guard member.keyPackage.suite == suite else {
                throw MLSValidationError.cipherSuiteMismatch(expected: suite.id, got: member.keyPackage.suite.id)
            }
            let ciphertext = try suite.encryptWithLabel(
                member.keyPackage.initKey, label: Self.groupSecretsLabel, context: encryptedGroupInfo,
                plaintext: try member.groupSecrets.mlsEncoded(), randomness: member.randomness)
            return EncryptedGroupSecrets(newMember: try member.keyPackage.reference(), encryptedGroupSecrets: ciphertext)
        }
        self.init(cipherSuite: suite.id, secrets: secrets, encryptedGroupInfo: encryptedGroupInfo)
    }

    /// The first steps of joining (RFC 9420 section 12.4.3.1), for `keyPackage`, one of ours,
    /// whose `init_key` is `initPrivateKey`'s: the Welcome's suite is the key package's; the
    /// entry named by the key package's reference decrypts to GroupSecrets; `psk` gives the value
    /// of each PSK it names (and throws for one the client does not have), at most one of them a
    /// `reinit` or `branch` resumption PSK; the welcome key and nonce from `joiner_secret` and
    /// `psk_secret` open the GroupInfo.
    ///
    /// The GroupInfo is unchecked until ``DecryptedWelcome/verify(signerKey:)``.
    public func decrypt(
        for keyPackage: KeyPackage, initPrivateKey: HPKEPrivateKey, psk: (PreSharedKeyID) throws -> SecretBytes
    ) throws -> DecryptedWelcome {
        let suite = keyPackage.suite
        guard cipherSuite == suite.id else { throw MLSValidationError.cipherSuiteMismatch(expected: suite.id, got: cipherSuite) }
        guard initPrivateKey.publicKey == keyPackage.initKey else { throw WelcomeError.wrongInitKey }
        guard let entry = secrets(for: try keyPackage.reference()) else { throw WelcomeError.noSecretsForKeyPackage }
        let groupSecrets: GroupSecrets
        do {
            groupSecrets = try GroupSecrets(mlsDecoding: try suite.decryptWithLabel(
                initPrivateKey, label: Self.groupSecretsLabel, context: encryptedGroupInfo, ciphertext: entry.encryptedGroupSecrets))
        } catch {
            throw WelcomeError.groupSecretsDecryptionFailed
        }
        // Section 8.4: each psk_nonce is KDF.Nh bytes, checked before any PSK is looked up.
        if let bad = groupSecrets.psks.first(where: { $0.nonce.count != suite.hashLength }) {
            throw WelcomeError.invalidPSKNonce(expected: suite.hashLength, got: bad.nonce.count)
        }
        let reinitOrBranch = groupSecrets.psks.filter(Self.isReinitOrBranch)
        guard reinitOrBranch.count <= 1 else { throw WelcomeError.moreThanOneReinitOrBranchPSK }
        let pskSecret = try suite.pskSecret(try groupSecrets.psks.map { PreSharedKey(id: $0, secret: try psk($0)) })
        let joinerSecret = SecretBytes(groupSecrets.joinerSecret)
        let welcomeSecret = try KeySchedule.welcomeSecret(suite: suite, joinerSecret: joinerSecret, pskSecret: pskSecret)
        let welcome = try KeySchedule.welcomeKeyAndNonce(suite: suite, welcomeSecret: welcomeSecret)
        let groupInfo: GroupInfoIn
        do {
            groupInfo = try GroupInfoIn(mlsDecoding: try suite.open(
                key: welcome.key.bytes, nonce: welcome.nonce.bytes, aad: [], ciphertext: encryptedGroupInfo))
        } catch {
            throw WelcomeError.groupInfoDecryptionFailed
        }
        return DecryptedWelcome(
            suite: suite, groupInfo: groupInfo, groupSecrets: groupSecrets, pskSecret: pskSecret,
            hasReinitOrBranchPSK: !reinitOrBranch.isEmpty)
    }

    static func isReinitOrBranch(_ id: PreSharedKeyID) -> Bool {
        if case .resumption(let usage, _, _) = id.kind { usage == .reinit || usage == .branch } else { false }
    }
}

/// A Welcome decrypted for one of our key packages (RFC 9420 section 12.4.3.1): its GroupInfo
/// as received, not yet checked. Holds secrets; its description shows none.
public struct DecryptedWelcome: Sendable, CustomStringConvertible, CustomReflectable {
    public let suite: MLSCipherSuite
    public let groupInfo: GroupInfoIn
    public let groupSecrets: GroupSecrets
    let pskSecret: SecretBytes
    let hasReinitOrBranchPSK: Bool

    /// The checks of section 12.4.3.1 that need no ratchet tree: the GroupInfo's signature
    /// verifies under `signerKey` (the caller takes it from the leaf `groupInfo.signer` of the
    /// group's tree, and must refuse a blank leaf) and its suite is the key package's; with a
    /// `reinit` or `branch` PSK its epoch is 1; the epoch's secrets from `joiner_secret` and
    /// `psk_secret` confirm its `confirmation_tag` over its `confirmed_transcript_hash`.
    ///
    /// Left to the caller: that `group_id` is new to the client, the tree's integrity (tree hash,
    /// parent hashes, leaf nodes) and the client's leaf in it, the path secret's keys, and the
    /// `reinit`/`branch` checks against the old group.
    public func verify(signerKey: SignaturePublicKey) throws -> JoinedEpoch {
        let info = try groupInfo.verify(with: signerKey, suite: suite)
        let context = info.groupContext
        if hasReinitOrBranchPSK, context.epoch != 1 { throw WelcomeError.reinitOrBranchNotInEpoch1(epoch: context.epoch) }
        let secrets = try EpochSecrets(
            suite: suite, joinerSecret: SecretBytes(groupSecrets.joinerSecret), pskSecret: pskSecret, groupContext: context)
        let tag = info.wire.confirmationTag
        guard secrets.verifyConfirmationTag(tag, confirmedTranscriptHash: context.confirmedTranscriptHash) else {
            throw WelcomeError.invalidConfirmationTag
        }
        return JoinedEpoch(
            groupInfo: info, epochSecrets: secrets, pathSecret: groupSecrets.pathSecret,
            interimTranscriptHash: try TranscriptHashes.interim(
                confirmed: context.confirmedTranscriptHash, confirmationTag: tag, suite: suite))
    }

    public var description: String { "DecryptedWelcome(suite \(suite.id), redacted)" }
    public var customMirror: Mirror { Mirror(self, children: [:], displayStyle: .struct) }
}

/// The epoch a new member joined through a Welcome whose GroupInfo and confirmation tag
/// ``DecryptedWelcome/verify(signerKey:)`` checked (RFC 9420 section 12.4.3.1). Holds secrets;
/// its description shows none.
public struct JoinedEpoch: Sendable, CustomStringConvertible, CustomReflectable {
    public let groupInfo: GroupInfo
    public let epochSecrets: EpochSecrets
    /// The path secret of the lowest common ancestor of the joiner's and the signer's leaves, if
    /// the commit had a path.
    public let pathSecret: PathSecret?
    /// `Hash(confirmed_transcript_hash || InterimTranscriptHashInput(confirmation_tag))`.
    public let interimTranscriptHash: [UInt8]

    public var groupContext: GroupContext { groupInfo.groupContext }

    public var description: String { "JoinedEpoch(suite \(epochSecrets.suite.id), epoch \(groupContext.epoch), redacted)" }
    public var customMirror: Mirror { Mirror(self, children: ["epoch": groupContext.epoch], displayStyle: .struct) }
}
