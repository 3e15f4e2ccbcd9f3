/// What a group state keeps of its epoch's ``EpochSecrets`` once the epoch is set up (RFC 9420
/// sections 8 and 9.2: a secret is deleted once it is no longer needed).
///
/// Kept: `init_secret` (the next epoch's key schedule, section 8), `exporter_secret`
/// (`MLS-Exporter`, 8.5), `external_secret` (`external_pub` and external commits, 8.3),
/// `resumption_psk` (8.6) and `epoch_authenticator` (8.7). `membership_key` and
/// `sender_data_secret` live in the epoch's ``MessageProtection``, and `encryption_secret` only as
/// the root of its secret tree, which deletes it once its children are derived (9.2).
///
/// Dropped: `joiner_secret` and `welcome_secret` (a committer seals its Welcome with them at
/// commit time, a joiner has used them once the GroupInfo opened, 12.4.3.1), `psk_secret` (an
/// input of `epoch_secret` only), `epoch_secret` itself and `confirmation_key` (the epoch's
/// confirmation tag is computed and checked when the epoch begins, 6.1, 12.4.2; the tag is kept).
struct KeptEpochSecrets: Sendable {
    let suite: MLSCipherSuite
    let epoch: UInt64
    let exporterSecret: SecretBytes
    let externalSecret: SecretBytes
    let resumptionPSK: SecretBytes
    let epochAuthenticator: SecretBytes
    /// `init_secret_[n]`, the input of the next epoch's key schedule.
    let initSecret: SecretBytes

    init(_ secrets: EpochSecrets) {
        suite = secrets.suite
        epoch = secrets.epoch
        exporterSecret = secrets.exporterSecret
        externalSecret = secrets.externalSecret
        resumptionPSK = secrets.resumptionPSK
        epochAuthenticator = secrets.epochAuthenticator
        initSecret = secrets.initSecret
    }

    /// RFC 9420 section 8.3: `external_priv, external_pub = KEM.DeriveKeyPair(external_secret)`.
    func externalKeyPair() throws -> HPKEPrivateKey {
        try suite.deriveHPKEKeyPair(ikm: externalSecret.bytes)
    }

    /// The secrets in the order of the saved state: `exporter_secret`, `external_secret`,
    /// `resumption_psk`, `epoch_authenticator`, `init_secret`, each `opaque<V>`.
    func encodeState(to w: inout TLSWriter) throws {
        for secret in [exporterSecret, externalSecret, resumptionPSK, epochAuthenticator, initSecret] {
            try w.writeOpaque(secret.bytes)
        }
    }

    init(suite: MLSCipherSuite, epoch: UInt64, stateFrom r: inout TLSReader) throws {
        func read(_ name: String) throws -> SecretBytes {
            let secret = SecretBytes(try r.readOpaque())
            try KeySchedule.checkLength(secret, name, suite)
            return secret
        }
        self.suite = suite
        self.epoch = epoch
        exporterSecret = try read("exporter_secret")
        externalSecret = try read("external_secret")
        resumptionPSK = try read("resumption_psk")
        epochAuthenticator = try read("epoch_authenticator")
        initSecret = try read("init_secret")
    }
}
