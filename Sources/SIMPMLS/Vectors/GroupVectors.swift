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

    /// The passive client files (passive-client-welcome.json, passive-client-handling-commit.json,
    /// passive-client-random.json): the client joins from `welcome` with its key package and
    /// private keys (and `ratchet_tree` when the GroupInfo carries none, and the external PSKs),
    /// validating the tree, and reaches `initial_epoch_authenticator`; then, for each epoch, it
    /// processes each of `proposals` (each must be cached as a proposal) and `commit` (which
    /// must begin the next epoch), reaching the epoch's `epoch_authenticator`.
    static func checkPassiveClient(_ parsed: Result<PassiveClientCase, CaseError>) -> Outcome {
        let c: PassiveClientCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        let psk: (PreSharedKeyID) throws -> SecretBytes = { id in
            guard case .external(let name) = id.kind, let psk = c.external_psks.first(where: { $0.psk_id.bytes == name }) else {
                throw MLSGroupError.unknownPSK
            }
            return SecretBytes(psk.psk.bytes)
        }
        do {
            guard case .keyPackage(let received) = try decodeField("key_package", c.key_package, MLSMessage.self),
                  case .welcome(let welcome) = try decodeField("welcome", c.welcome, MLSMessage.self)
            else { return .failed(reason: "key_package or welcome: wrong message") }
            let bundle = try MLSKeyPackageBundle(
                keyPackage: try received.validate(suite: suite), initPrivateKey: try HPKEPrivateKey(rawRepresentation: c.init_priv.bytes),
                encryptionPrivateKey: try HPKEPrivateKey(rawRepresentation: c.encryption_priv.bytes),
                signer: try SignaturePrivateKey(rawRepresentation: c.signature_priv.bytes))
            let tree = try c.ratchet_tree.map { try decodeField("ratchet_tree", $0, RatchetTree.self) }
            var group = try MLSGroup(joining: welcome, with: bundle, ratchetTree: tree, psk: psk)
            // A passive client of the vectors takes every valid message, new members' too.
            group.policy = .acceptingEverything
            guard group.epochAuthenticator.matches(c.initial_epoch_authenticator.bytes) else {
                return .failed(reason: "initial_epoch_authenticator")
            }
            for (i, epoch) in c.epochs.enumerated() {
                if let reason = try process(epoch, index: i, group: &group, psk: psk) { return .failed(reason: reason) }
            }
        } catch let e as CaseError {
            return .failed(reason: e.reason)
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }

    /// One epoch of a passive client case; the reason it fails, or nil.
    static func process(
        _ epoch: EpochCase, index i: Int, group: inout MLSGroup, psk: (PreSharedKeyID) throws -> SecretBytes
    ) throws -> String? {
        for (j, proposal) in epoch.proposals.enumerated() {
            let message = try decodeField("epochs[\(i)].proposals[\(j)]", proposal, MLSMessage.self)
            do {
                guard case .proposal = try group.process(message, psk: psk) else { return "epochs[\(i)].proposals[\(j)]: not a proposal" }
            } catch { return "epochs[\(i)].proposals[\(j)]: \(error)" }
        }
        let commit = try decodeField("epochs[\(i)].commit", epoch.commit, MLSMessage.self)
        do {
            guard case .newEpoch = try group.process(commit, psk: psk) else { return "epochs[\(i)].commit: no new epoch" }
        } catch { return "epochs[\(i)].commit: \(error)" }
        return group.epochAuthenticator.matches(epoch.epoch_authenticator.bytes) ? nil : "epochs[\(i)].epoch_authenticator"
    }
}
