import Foundation

/// Checks of the key schedule (RFC 9420 section 8), PSKs (8.4), the secret tree (9) and the
/// sender data keys (6.3.2) against `key-schedule.json`, `psk_secret.json` and `secret-tree.json`.
extension MLSTestVectors {
    /// The parsed case, or the failed outcome of one that did not parse, or the skipped outcome of
    /// one whose cipher suite is not implemented.
    static func parsedCase<T>(_ parsed: Result<T, CaseError>, suite: (T) -> UInt16) -> ParsedCase<T> {
        switch parsed {
        case .failure(let e): return .done(.failed(reason: e.reason))
        case .success(let c):
            guard let s = MLSCipherSuite(CipherSuiteID(suite(c))) else {
                return .done(.skipped(reason: "cipher suite \(suite(c)) not implemented"))
            }
            return .check(c, s)
        }
    }

    enum ParsedCase<T> {
        case check(T, MLSCipherSuite)
        case done(Outcome)
    }

    // MARK: key-schedule.json

    struct KeyScheduleCase: Decodable {
        struct Exporter: Decodable { let label: String; let context: Hex; let length: Int; let secret: Hex }
        struct Epoch: Decodable {
            let tree_hash: Hex
            let commit_secret: Hex
            let psk_secret: Hex
            let confirmed_transcript_hash: Hex
            let group_context: Hex
            let joiner_secret: Hex
            let welcome_secret: Hex
            let init_secret: Hex
            let sender_data_secret: Hex
            let encryption_secret: Hex
            let exporter_secret: Hex
            let epoch_authenticator: Hex
            let external_secret: Hex
            let confirmation_key: Hex
            let membership_key: Hex
            let resumption_psk: Hex
            let external_pub: Hex
            let exporter: Exporter
        }
        let cipher_suite: UInt16
        let group_id: Hex
        let initial_init_secret: Hex
        let epochs: [Epoch]
    }

    /// Each epoch `i` in order: the GroupContext (epoch `i`, no extensions) encodes to
    /// `group_context`; from the previous `init_secret` (first `initial_init_secret`),
    /// `commit_secret` and `psk_secret` come every secret of the epoch, `external_pub` is the
    /// public key of `DeriveKeyPair(external_secret)`, and `MLS-Exporter` gives `exporter.secret`
    /// (the vector's `exporter.label` is a string that happens to look like hex: its UTF-8 bytes are
    /// the label, as test-vectors.md has it).
    static func checkKeySchedule(_ parsed: Result<KeyScheduleCase, CaseError>) -> Outcome {
        let c: KeyScheduleCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        if c.epochs.isEmpty { return .failed(reason: "no epochs") }
        var initSecret = SecretBytes(c.initial_init_secret.bytes)
        for (i, e) in c.epochs.enumerated() {
            let at = "epoch \(i): "
            do {
                let context = GroupContext(
                    cipherSuite: suite.id, groupID: c.group_id.bytes, epoch: UInt64(i), treeHash: e.tree_hash.bytes,
                    confirmedTranscriptHash: e.confirmed_transcript_hash.bytes, extensions: [])
                guard try context.mlsEncoded() == e.group_context.bytes else { return .failed(reason: at + "group_context") }
                let secrets = try EpochSecrets(
                    suite: suite, initSecret: initSecret, commitSecret: SecretBytes(e.commit_secret.bytes),
                    pskSecret: SecretBytes(e.psk_secret.bytes), groupContext: context)
                let expected: [(String, SecretBytes, Hex)] = [
                    ("joiner_secret", secrets.joinerSecret, e.joiner_secret),
                    ("welcome_secret", secrets.welcomeSecret, e.welcome_secret),
                    ("init_secret", secrets.initSecret, e.init_secret),
                    ("sender_data_secret", secrets.senderDataSecret, e.sender_data_secret),
                    ("encryption_secret", secrets.encryptionSecret, e.encryption_secret),
                    ("exporter_secret", secrets.exporterSecret, e.exporter_secret),
                    ("epoch_authenticator", secrets.epochAuthenticator, e.epoch_authenticator),
                    ("external_secret", secrets.externalSecret, e.external_secret),
                    ("confirmation_key", secrets.confirmationKey, e.confirmation_key),
                    ("membership_key", secrets.membershipKey, e.membership_key),
                    ("resumption_psk", secrets.resumptionPSK, e.resumption_psk),
                ]
                for (name, ours, theirs) in expected where !ours.matches(theirs.bytes) {
                    return .failed(reason: at + name)
                }
                // A joiner gets the same epoch from joiner_secret and psk_secret alone.
                let joined = try EpochSecrets(
                    suite: suite, joinerSecret: SecretBytes(e.joiner_secret.bytes), pskSecret: SecretBytes(e.psk_secret.bytes),
                    groupContext: context)
                guard joined.encryptionSecret.matches(e.encryption_secret.bytes),
                      try KeySchedule.welcomeSecret(
                          suite: suite, joinerSecret: SecretBytes(e.joiner_secret.bytes), pskSecret: SecretBytes(e.psk_secret.bytes)
                      ).matches(e.welcome_secret.bytes)
                else { return .failed(reason: at + "secrets from joiner_secret") }
                guard try secrets.externalKeyPair().publicKey.rawRepresentation == e.external_pub.bytes else {
                    return .failed(reason: at + "external_pub")
                }
                let x = e.exporter
                guard try secrets.export(label: Array(x.label.utf8), context: x.context.bytes, length: x.length).matches(x.secret.bytes) else {
                    return .failed(reason: at + "exporter")
                }
                initSecret = secrets.initSecret
            } catch {
                return .failed(reason: at + "error: \(error)")
            }
        }
        return .passed
    }

    // MARK: psk_secret.json

    struct PSKSecretCase: Decodable {
        struct PSK: Decodable { let psk_id: Hex; let psk: Hex; let psk_nonce: Hex }
        let cipher_suite: UInt16
        let psks: [PSK]
        let psk_secret: Hex
    }

    /// Each PSK is external with the vector's `psk_id` and `psk_nonce`; combined in order they give
    /// `psk_secret`.
    static func checkPSKSecret(_ parsed: Result<PSKSecretCase, CaseError>) -> Outcome {
        let c: PSKSecretCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        do {
            let psks = c.psks.map {
                PreSharedKey(id: PreSharedKeyID(kind: .external(pskID: $0.psk_id.bytes), nonce: $0.psk_nonce.bytes), secret: SecretBytes($0.psk.bytes))
            }
            // Each id round-trips through its encoding.
            for psk in psks {
                guard try PreSharedKeyID(mlsDecoding: try psk.id.mlsEncoded()) == psk.id else {
                    return .failed(reason: "PreSharedKeyID encoding")
                }
            }
            guard try suite.pskSecret(psks).matches(c.psk_secret.bytes) else { return .failed(reason: "psk_secret") }
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }

    // MARK: secret-tree.json

    struct SecretTreeCase: Decodable {
        struct SenderData: Decodable { let sender_data_secret: Hex; let ciphertext: Hex; let key: Hex; let nonce: Hex }
        struct Generation: Decodable {
            let generation: UInt32
            let handshake_key: Hex
            let handshake_nonce: Hex
            let application_key: Hex
            let application_nonce: Hex
        }
        let cipher_suite: UInt16
        let sender_data: SenderData
        let encryption_secret: Hex
        let leaves: [[Generation]]
    }

    /// `sender_data` key and nonce; then one secret tree of as many leaves as `leaves` has entries,
    /// from `encryption_secret`: each leaf's listed generations, in the listed order, give the
    /// vector's handshake and application keys and nonces (the ratchets skip forward within the
    /// default window).
    static func checkSecretTree(_ parsed: Result<SecretTreeCase, CaseError>) -> Outcome {
        let c: SecretTreeCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        do {
            let s = c.sender_data
            let senderData = try suite.senderDataKeyAndNonce(senderDataSecret: SecretBytes(s.sender_data_secret.bytes), ciphertext: s.ciphertext.bytes)
            guard senderData.key.matches(s.key.bytes) else { return .failed(reason: "sender_data key") }
            guard senderData.nonce.matches(s.nonce.bytes) else { return .failed(reason: "sender_data nonce") }

            guard c.leaves.count <= Int(UInt32.max), let size = TreeSize(leafCount: UInt32(c.leaves.count)) else {
                return .failed(reason: "\(c.leaves.count) leaves is not a tree size")
            }
            var tree = try SecretTree(suite: suite, encryptionSecret: SecretBytes(c.encryption_secret.bytes), size: size)
            for (i, generations) in c.leaves.enumerated() {
                let leaf = LeafIndex(UInt32(i))
                for g in generations {
                    let at = "leaf \(i) generation \(g.generation): "
                    let handshake = try tree.key(leaf: leaf, type: .handshake, generation: g.generation)
                    guard handshake.key.matches(g.handshake_key.bytes) else { return .failed(reason: at + "handshake_key") }
                    guard handshake.nonce.matches(g.handshake_nonce.bytes) else { return .failed(reason: at + "handshake_nonce") }
                    let application = try tree.key(leaf: leaf, type: .application, generation: g.generation)
                    guard application.key.matches(g.application_key.bytes) else { return .failed(reason: at + "application_key") }
                    guard application.nonce.matches(g.application_nonce.bytes) else { return .failed(reason: at + "application_nonce") }
                }
            }
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }
}
