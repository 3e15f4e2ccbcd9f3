/// The passive client vectors (mls-implementations `test-vectors.md`, "Passive Client"),
/// checked with ``MLSGroup``.
extension MLSTestVectors {
    struct PassiveClientCase: Decodable {
        struct ExternalPSK: Decodable {
            let psk_id: Hex
            let psk: Hex
        }
        let cipher_suite: UInt16
        let external_psks: [ExternalPSK]
        let key_package: Hex
        let signature_priv: Hex
        let encryption_priv: Hex
        let init_priv: Hex
        let welcome: Hex
        let ratchet_tree: Hex?
        let initial_epoch_authenticator: Hex
        let epochs: [EpochCase]
    }

    struct EpochCase: Decodable {
        let proposals: [Hex]
        let commit: Hex
        let epoch_authenticator: Hex
    }

    /// passive-client-welcome.json: the client joins from `welcome` with its key package and
    /// private keys (and `ratchet_tree` when the GroupInfo carries none, and the external PSKs),
    /// validating the tree, and reaches `initial_epoch_authenticator`. Cases with epochs after
    /// the join are skipped until commits by reference are processed.
    static func checkPassiveClientWelcome(_ parsed: Result<PassiveClientCase, CaseError>) -> Outcome {
        let c: PassiveClientCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        guard c.epochs.isEmpty else { return .skipped(reason: "epochs after the join not processed yet") }
        do {
            guard case .keyPackage(let received) = try decodeField("key_package", c.key_package, MLSMessage.self),
                  case .welcome(let welcome) = try decodeField("welcome", c.welcome, MLSMessage.self)
            else { return .failed(reason: "key_package or welcome: wrong message") }
            let bundle = try MLSKeyPackageBundle(
                keyPackage: try received.validate(suite: suite), initPrivateKey: try HPKEPrivateKey(rawRepresentation: c.init_priv.bytes),
                encryptionPrivateKey: try HPKEPrivateKey(rawRepresentation: c.encryption_priv.bytes),
                signer: try SignaturePrivateKey(rawRepresentation: c.signature_priv.bytes))
            let tree = try c.ratchet_tree.map { try decodeField("ratchet_tree", $0, RatchetTree.self) }
            let group = try MLSGroup(joining: welcome, with: bundle, ratchetTree: tree) { id in
                guard case .external(let name) = id.kind, let psk = c.external_psks.first(where: { $0.psk_id.bytes == name }) else {
                    throw MLSGroupError.unknownPSK
                }
                return SecretBytes(psk.psk.bytes)
            }
            guard group.epochAuthenticator.matches(c.initial_epoch_authenticator.bytes) else {
                return .failed(reason: "initial_epoch_authenticator")
            }
        } catch let e as CaseError {
            return .failed(reason: e.reason)
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }
}
