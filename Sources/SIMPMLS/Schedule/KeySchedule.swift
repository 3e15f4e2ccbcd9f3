/// Why a key schedule step refused its input. Never carries secret bytes.
public enum KeyScheduleError: Error, Equatable, Sendable {
    /// An input secret (`init_secret`, `commit_secret`, `psk_secret`, `joiner_secret`, ...) is not
    /// `KDF.Nh` bytes long.
    case invalidSecretLength(name: String, expected: Int, got: Int)
    /// The GroupContext names another cipher suite than the one deriving.
    case cipherSuiteMismatch(groupContext: CipherSuiteID, suite: CipherSuiteID)
}

/// RFC 9420 section 8: the steps of the key schedule that come before an epoch's secrets.
///
///                       init_secret_[n-1]
///                             |
///                             V
///       commit_secret --> KDF.Extract
///                             |
///                             V
///                     ExpandWithLabel(., "joiner", GroupContext_[n], KDF.Nh)
///                             |
///                             V
///                        joiner_secret
///                             |
///                             V
///   psk_secret (or 0) --> KDF.Extract
///                             |
///                             +--> DeriveSecret(., "welcome") = welcome_secret
///                             |
///                             V
///                     ExpandWithLabel(., "epoch", GroupContext_[n], KDF.Nh)
///                             |
///                             V
///                        epoch_secret --> ``EpochSecrets``
///
/// In `KDF.Extract(salt, ikm)` the upper input is the salt and the left input the IKM.
public enum KeySchedule {
    /// `joiner_secret = ExpandWithLabel(KDF.Extract(init_secret_[n-1], commit_secret), "joiner",
    /// GroupContext_[n], KDF.Nh)`. `groupContext` is the encoded GroupContext of the new epoch.
    /// `commitSecret` is nil when the commit has no path: the RFC's all-zero `commit_secret`.
    public static func joinerSecret(
        suite: MLSCipherSuite, initSecret: SecretBytes, commitSecret: SecretBytes?, groupContext: [UInt8]
    ) throws -> SecretBytes {
        try checkLength(initSecret, "init_secret", suite)
        let commit = commitSecret ?? .zero(suite)
        try checkLength(commit, "commit_secret", suite)
        let extracted = suite.extract(salt: initSecret.bytes, ikm: commit.bytes)
        return SecretBytes(try suite.expandWithLabel(
            secret: extracted, label: Array("joiner".utf8), context: groupContext, length: suite.hashLength))
    }

    /// `KDF.Extract(joiner_secret, psk_secret)`, the secret both `welcome_secret` and
    /// `epoch_secret` come from. A nil `pskSecret` is the all-zero string (no PSK).
    static func joinerExtract(suite: MLSCipherSuite, joinerSecret: SecretBytes, pskSecret: SecretBytes?) throws -> [UInt8] {
        try checkLength(joinerSecret, "joiner_secret", suite)
        let psk = pskSecret ?? .zero(suite)
        try checkLength(psk, "psk_secret", suite)
        return suite.extract(salt: joinerSecret.bytes, ikm: psk.bytes)
    }

    /// `welcome_secret = DeriveSecret(KDF.Extract(joiner_secret, psk_secret), "welcome")`. A new
    /// member computes it from a Welcome's GroupSecrets before it knows the GroupContext.
    public static func welcomeSecret(suite: MLSCipherSuite, joinerSecret: SecretBytes, pskSecret: SecretBytes?) throws -> SecretBytes {
        let extracted = try joinerExtract(suite: suite, joinerSecret: joinerSecret, pskSecret: pskSecret)
        return SecretBytes(try suite.deriveSecret(secret: extracted, label: Array("welcome".utf8)))
    }

    /// The key and nonce that encrypt a Welcome's GroupInfo (RFC 9420 section 12.4.3.1):
    /// `welcome_key = ExpandWithLabel(welcome_secret, "key", "", AEAD.Nk)`,
    /// `welcome_nonce = ExpandWithLabel(welcome_secret, "nonce", "", AEAD.Nn)`.
    public static func welcomeKeyAndNonce(suite: MLSCipherSuite, welcomeSecret: SecretBytes) throws -> (key: SecretBytes, nonce: SecretBytes) {
        try checkLength(welcomeSecret, "welcome_secret", suite)
        let key = try suite.expandWithLabel(secret: welcomeSecret.bytes, label: Array("key".utf8), context: [], length: suite.aeadKeyLength)
        let nonce = try suite.expandWithLabel(secret: welcomeSecret.bytes, label: Array("nonce".utf8), context: [], length: suite.aeadNonceLength)
        return (SecretBytes(key), SecretBytes(nonce))
    }

    static func checkLength(_ secret: SecretBytes, _ name: String, _ suite: MLSCipherSuite) throws {
        guard secret.count == suite.hashLength else {
            throw KeyScheduleError.invalidSecretLength(name: name, expected: suite.hashLength, got: secret.count)
        }
    }
}
