/// RFC 9420 section 8: the secrets of one epoch, derived from its `epoch_secret`:
///
/// | label            | secret                 | use                                        |
/// |------------------|------------------------|--------------------------------------------|
/// | "sender data"    | `sender_data_secret`   | sender data encryption (6.3.2)             |
/// | "encryption"     | `encryption_secret`    | root of the secret tree (9)                |
/// | "exporter"       | `exporter_secret`      | `MLS-Exporter` (8.5)                       |
/// | "external"       | `external_secret`      | the external init key pair (8.3)           |
/// | "confirm"        | `confirmation_key`     | the confirmation tag (6.1)                 |
/// | "membership"     | `membership_key`       | the membership tag (6.2)                   |
/// | "resumption"     | `resumption_psk`       | resumption PSKs of later groups (8.6)      |
/// | "authentication" | `epoch_authenticator`  | authenticating the epoch out of band (8.7) |
///
/// and `init_secret = DeriveSecret(epoch_secret, "init")` for the next epoch. `epoch_secret`
/// itself is not kept. `joiner_secret` and `welcome_secret` are here for the committer, who sends
/// them in a Welcome (12.4.3); a group state keeps only its ``KeptEpochSecrets`` (section 9.2)
/// and drops this value once the Welcome is sealed or opened.
///
/// Nothing here prints a secret: `description` names the suite and epoch only, and the mirror has
/// no children.
public struct EpochSecrets: Sendable, CustomStringConvertible, CustomReflectable {
    public let suite: MLSCipherSuite
    /// The epoch of the GroupContext these secrets were derived with.
    public let epoch: UInt64
    public let joinerSecret: SecretBytes
    public let welcomeSecret: SecretBytes
    public let senderDataSecret: SecretBytes
    public let encryptionSecret: SecretBytes
    public let exporterSecret: SecretBytes
    public let externalSecret: SecretBytes
    public let confirmationKey: SecretBytes
    public let membershipKey: SecretBytes
    public let resumptionPSK: SecretBytes
    public let epochAuthenticator: SecretBytes
    /// `init_secret_[n]`, the input of the next epoch's key schedule.
    public let initSecret: SecretBytes

    /// The epoch's secrets from the previous epoch's `init_secret` and this epoch's
    /// `commit_secret` (nil: all zero, a commit without a path), `psk_secret` (nil: all zero,
    /// no PSK) and GroupContext, whose cipher suite must be `suite`.
    public init(
        suite: MLSCipherSuite, initSecret: SecretBytes, commitSecret: SecretBytes?, pskSecret: SecretBytes?,
        groupContext: GroupContext
    ) throws {
        try Self.checkSuite(suite, groupContext)
        let context = try groupContext.mlsEncoded()
        let joiner = try KeySchedule.joinerSecret(suite: suite, initSecret: initSecret, commitSecret: commitSecret, groupContext: context)
        try self.init(suite: suite, joinerSecret: joiner, pskSecret: pskSecret, encodedGroupContext: context, epoch: groupContext.epoch)
    }

    /// The epoch's secrets from `joiner_secret` (a new member's, from a Welcome), `psk_secret`
    /// and the GroupContext, whose cipher suite must be `suite`.
    public init(suite: MLSCipherSuite, joinerSecret: SecretBytes, pskSecret: SecretBytes?, groupContext: GroupContext) throws {
        try Self.checkSuite(suite, groupContext)
        try self.init(
            suite: suite, joinerSecret: joinerSecret, pskSecret: pskSecret, encodedGroupContext: try groupContext.mlsEncoded(),
            epoch: groupContext.epoch)
    }

    init(suite: MLSCipherSuite, joinerSecret: SecretBytes, pskSecret: SecretBytes?, encodedGroupContext: [UInt8], epoch: UInt64) throws {
        self.suite = suite
        self.epoch = epoch
        self.joinerSecret = joinerSecret
        let extracted = try KeySchedule.joinerExtract(suite: suite, joinerSecret: joinerSecret, pskSecret: pskSecret)
        welcomeSecret = SecretBytes(try suite.deriveSecret(secret: extracted, label: Array("welcome".utf8)))
        let epochSecret = try suite.expandWithLabel(
            secret: extracted, label: Array("epoch".utf8), context: encodedGroupContext, length: suite.hashLength)
        func derive(_ label: String) throws -> SecretBytes {
            SecretBytes(try suite.deriveSecret(secret: epochSecret, label: Array(label.utf8)))
        }
        senderDataSecret = try derive("sender data")
        encryptionSecret = try derive("encryption")
        exporterSecret = try derive("exporter")
        externalSecret = try derive("external")
        confirmationKey = try derive("confirm")
        membershipKey = try derive("membership")
        resumptionPSK = try derive("resumption")
        epochAuthenticator = try derive("authentication")
        initSecret = try derive("init")
    }

    static func checkSuite(_ suite: MLSCipherSuite, _ context: GroupContext) throws {
        guard context.cipherSuite == suite.id else {
            throw KeyScheduleError.cipherSuiteMismatch(groupContext: context.cipherSuite, suite: suite.id)
        }
    }

    /// RFC 9420 section 8.5:
    ///
    ///     MLS-Exporter(Label, Context, Length) =
    ///            ExpandWithLabel(DeriveSecret(exporter_secret, Label), "exported", Hash(Context), Length)
    ///
    /// `length` is at most `255 * KDF.Nh`.
    public func export(label: [UInt8], context: [UInt8], length: Int) throws -> SecretBytes {
        let labelSecret = try suite.deriveSecret(secret: exporterSecret.bytes, label: label)
        return SecretBytes(try suite.expandWithLabel(
            secret: labelSecret, label: Array("exported".utf8), context: suite.hash(context), length: length))
    }

    /// RFC 9420 section 8.3: `external_priv, external_pub = KEM.DeriveKeyPair(external_secret)`.
    /// The public key goes in the epoch's `external_pub` GroupInfo extension.
    public func externalKeyPair() throws -> HPKEPrivateKey {
        try suite.deriveHPKEKeyPair(ikm: externalSecret.bytes)
    }

    /// The key and nonce that encrypt the GroupInfo of a Welcome to this epoch (12.4.3.1).
    public func welcomeKeyAndNonce() throws -> (key: SecretBytes, nonce: SecretBytes) {
        try KeySchedule.welcomeKeyAndNonce(suite: suite, welcomeSecret: welcomeSecret)
    }

    /// RFC 9420 section 6.1: `confirmation_tag = MAC(confirmation_key, GroupContext.confirmed_transcript_hash)`.
    public func confirmationTag(confirmedTranscriptHash: [UInt8]) -> [UInt8] {
        suite.mac(key: confirmationKey.bytes, data: confirmedTranscriptHash)
    }

    /// Whether `tag` is this epoch's confirmation tag over `confirmedTranscriptHash`, compared in
    /// constant time.
    public func verifyConfirmationTag(_ tag: [UInt8], confirmedTranscriptHash: [UInt8]) -> Bool {
        suite.verifyMAC(key: confirmationKey.bytes, data: confirmedTranscriptHash, tag: tag)
    }

    public var description: String { "EpochSecrets(suite \(suite.id), epoch \(epoch), redacted)" }
    public var customMirror: Mirror { Mirror(self, children: [:], displayStyle: .struct) }
}
