import Foundation

/// Checks of message protection (RFC 9420 section 6) against `message-protection.json`.
extension MLSTestVectors {
    // MARK: message-protection.json

    struct MessageProtectionCase: Decodable {
        let cipher_suite: UInt16
        let group_id: Hex
        let epoch: UInt64
        let tree_hash: Hex
        let confirmed_transcript_hash: Hex
        let signature_priv: Hex
        let signature_pub: Hex
        let encryption_secret: Hex
        let sender_data_secret: Hex
        let membership_key: Hex
        let proposal: Hex
        let proposal_pub: Hex
        let proposal_priv: Hex
        let commit: Hex
        let commit_pub: Hex
        let commit_priv: Hex
        let application: Hex
        let application_priv: Hex
    }

    /// The keys and content of one message-protection case.
    struct ProtectionSetup {
        let suite: MLSCipherSuite
        let context: GroupContext
        let signer: SignaturePrivateKey
        let signatureKey: SignaturePublicKey
        let membershipKey: SecretBytes
        let senderDataSecret: SecretBytes
        let encryptionSecret: SecretBytes

        /// A fresh copy of the epoch's keys: a secret tree of 2 leaves, nothing used yet.
        func keys() throws -> MessageProtection {
            guard let size = TreeSize(leafCount: 2) else { throw CaseError(reason: "no tree of 2 leaves") }
            let tree = try SecretTree(suite: suite, encryptionSecret: encryptionSecret, size: size)
            return try MessageProtection(
                suite: suite, groupContext: context, membershipKey: membershipKey, senderDataSecret: senderDataSecret, secretTree: tree)
        }

        /// The vector's sender is leaf 1; any other leaf is not in the group.
        func resolve(_ leaf: LeafIndex) throws -> SignaturePublicKey {
            guard leaf == Self.sender else { throw CaseError(reason: "sender data names \(leaf)") }
            return signatureKey
        }

        static let sender = LeafIndex(1)
    }

    /// For each of the proposal, the commit and the application data, as test-vectors.md says,
    /// with member 1 as the sender and the GroupContext of the case (no extensions):
    ///
    /// - `*_pub` unprotects (membership tag, signature) to the raw content; the raw content
    ///   signed with `signature_priv` and protected as a PublicMessage unprotects to it again;
    ///   application data refuses to be protected as a PublicMessage;
    /// - `*_priv` unprotects with a fresh secret tree (2 leaves) to the raw content; the raw
    ///   content protected as a PrivateMessage by another fresh tree, encoded and decoded as an
    ///   MLSMessage, unprotects with a third to it again.
    static func checkMessageProtection(_ parsed: Result<MessageProtectionCase, CaseError>) -> Outcome {
        let c: MessageProtectionCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        do {
            let signer = try SignaturePrivateKey(rawRepresentation: c.signature_priv.bytes)
            let signatureKey = try SignaturePublicKeyIn(bytes: c.signature_pub.bytes).validate(for: suite)
            guard signer.publicKey == signatureKey else { return .failed(reason: "signature_pub is not signature_priv's") }
            let setup = ProtectionSetup(
                suite: suite,
                context: GroupContext(
                    cipherSuite: suite.id, groupID: c.group_id.bytes, epoch: c.epoch, treeHash: c.tree_hash.bytes,
                    confirmedTranscriptHash: c.confirmed_transcript_hash.bytes, extensions: []),
                signer: signer, signatureKey: signatureKey, membershipKey: SecretBytes(c.membership_key.bytes),
                senderDataSecret: SecretBytes(c.sender_data_secret.bytes), encryptionSecret: SecretBytes(c.encryption_secret.bytes))
            let proposal = MessageContent.proposal(try decodeField("proposal", c.proposal, Proposal.self))
            let commit = MessageContent.commit(try decodeField("commit", c.commit, Commit.self))
            let application = MessageContent.application(c.application.bytes)

            try checkPublic("proposal_pub", c.proposal_pub, proposal, setup)
            try checkPrivate("proposal_priv", c.proposal_priv, proposal, setup)
            try checkPublic("commit_pub", c.commit_pub, commit, setup)
            try checkPrivate("commit_priv", c.commit_priv, commit, setup)
            try checkPublicRefused("application", application, setup)
            try checkPrivate("application_priv", c.application_priv, application, setup)
        } catch let e as CaseError {
            return .failed(reason: e.reason)
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }

    static func decodeField<T: MLSDecodable>(_ name: String, _ hex: Hex, _: T.Type) throws -> T {
        do { return try T(mlsDecoding: hex.bytes) } catch { throw CaseError(reason: "\(name): does not decode: \(error)") }
    }

    /// `content` from member 1 in the case's group and epoch, no authenticated data.
    static func framed(_ content: MessageContent, _ setup: ProtectionSetup) -> FramedContent {
        FramedContent(
            groupID: setup.context.groupID, epoch: setup.context.epoch, sender: .member(leafIndex: ProtectionSetup.sender.value),
            authenticatedData: [], content: content)
    }

    /// A commit's confirmation tag is not checked by unprotecting (it needs the next epoch's
    /// key), so our commits carry `KDF.Nh` bytes that stand in for it.
    static func placeholderTag(_ content: MessageContent, _ suite: MLSCipherSuite) -> [UInt8]? {
        content.contentType == .commit ? [UInt8](repeating: 0xC7, count: suite.hashLength) : nil
    }

    static func checkPublic(_ name: String, _ hex: Hex, _ raw: MessageContent, _ setup: ProtectionSetup) throws {
        guard case .publicMessage(let message) = try decodeField(name, hex, MLSMessage.self) else {
            throw CaseError(reason: "\(name): not a PublicMessage")
        }
        let keys = try setup.keys()
        let theirs: VerifiedAuthenticatedContent
        do { theirs = try keys.unprotect(message, signatureKey: setup.signatureKey) } catch {
            throw CaseError(reason: "\(name): does not unprotect: \(error)")
        }
        guard theirs.content.content == raw, theirs.sender == .member(leafIndex: ProtectionSetup.sender.value) else {
            throw CaseError(reason: "\(name): content")
        }
        let signed = try AuthenticatedContent(
            signing: framed(raw, setup), wireFormat: .publicMessage, context: setup.context, signer: setup.signer, suite: setup.suite,
            confirmationTag: placeholderTag(raw, setup.suite))
        let ours = try PublicMessage(mlsDecoding: try keys.protect(signed).mlsEncoded())
        let back: VerifiedAuthenticatedContent
        do { back = try keys.unprotect(ours, signatureKey: setup.signatureKey) } catch {
            throw CaseError(reason: "\(name): ours does not unprotect: \(error)")
        }
        guard back.authenticatedContent == signed else { throw CaseError(reason: "\(name): ours round trip") }
    }

    static func checkPublicRefused(_ name: String, _ raw: MessageContent, _ setup: ProtectionSetup) throws {
        let signed = try AuthenticatedContent(
            signing: framed(raw, setup), wireFormat: .publicMessage, context: setup.context, signer: setup.signer, suite: setup.suite,
            confirmationTag: nil)
        do {
            _ = try setup.keys().protect(signed)
        } catch MessageProtectionError.applicationDataInPublicMessage {
            return
        }
        throw CaseError(reason: "\(name): protected as a PublicMessage")
    }

    /// Fixed reuse guard and padding for our own messages: test inputs, not secrets.
    static let checkReuseGuard: [UInt8] = [0x0A, 0x0B, 0x0C, 0x0D]
    static let checkPadding = 7

    static func checkPrivate(_ name: String, _ hex: Hex, _ raw: MessageContent, _ setup: ProtectionSetup) throws {
        guard case .privateMessage(let message) = try decodeField(name, hex, MLSMessage.self) else {
            throw CaseError(reason: "\(name): not a PrivateMessage")
        }
        var receiver = try setup.keys()
        let theirs: VerifiedAuthenticatedContent
        do { theirs = try receiver.unprotect(message, signatureKey: setup.resolve) } catch let e as CaseError {
            throw e
        } catch {
            throw CaseError(reason: "\(name): does not unprotect: \(error)")
        }
        guard theirs.content.content == raw, theirs.sender == .member(leafIndex: ProtectionSetup.sender.value),
              theirs.wireFormat == .privateMessage
        else { throw CaseError(reason: "\(name): content") }

        let signed = try AuthenticatedContent(
            signing: framed(raw, setup), wireFormat: .privateMessage, context: setup.context, signer: setup.signer, suite: setup.suite,
            confirmationTag: placeholderTag(raw, setup.suite))
        var sender = try setup.keys()
        let sealed = try sender.protect(signed, paddingLength: checkPadding, reuseGuard: checkReuseGuard)
        guard case .privateMessage(let ours) = try MLSMessage(mlsDecoding: try MLSMessage.privateMessage(sealed).mlsEncoded()) else {
            throw CaseError(reason: "\(name): ours is not a PrivateMessage")
        }
        var other = try setup.keys()
        let back: VerifiedAuthenticatedContent
        do { back = try other.unprotect(ours, signatureKey: setup.resolve) } catch {
            throw CaseError(reason: "\(name): ours does not unprotect: \(error)")
        }
        guard back.authenticatedContent == signed else { throw CaseError(reason: "\(name): ours round trip") }
    }
}

/// Checks of joining from a Welcome (RFC 9420 section 12.4.3.1) against `welcome.json`.
extension MLSTestVectors {
    // MARK: welcome.json

    struct WelcomeCase: Decodable {
        let cipher_suite: UInt16
        let init_priv: Hex
        let signer_pub: Hex
        let key_package: Hex
        let welcome: Hex
    }

    /// Fixed randomness for sealing our own Welcome: a test input, not a secret.
    static let checkWelcomeRandomness = [UInt8](repeating: 0x3C, count: MLSCipherSuite.encapsulationRandomnessLength)

    /// `key_package` validates and `init_priv` is its `init_key`'s; the Welcome's entry for it
    /// decrypts with `init_priv`, its GroupSecrets name no PSK, and the welcome key and nonce
    /// from `joiner_secret` open the GroupInfo; its signature verifies under `signer_pub`; the
    /// epoch's `confirmation_key` from `joiner_secret` gives its confirmation tag over its
    /// `confirmed_transcript_hash`. Then the GroupInfo and GroupSecrets sealed again as our own
    /// Welcome (through MLSMessage's encoding) join the same epoch.
    static func checkWelcome(_ parsed: Result<WelcomeCase, CaseError>) -> Outcome {
        let c: WelcomeCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        do {
            guard case .keyPackage(let received) = try decodeField("key_package", c.key_package, MLSMessage.self) else {
                return .failed(reason: "key_package: not a KeyPackage")
            }
            let keyPackage: KeyPackage
            do { keyPackage = try received.validate(suite: suite) } catch { return .failed(reason: "key_package: \(error)") }
            let initKey = try HPKEPrivateKey(rawRepresentation: c.init_priv.bytes)
            let signerKey = try SignaturePublicKeyIn(bytes: c.signer_pub.bytes).validate(for: suite)
            guard case .welcome(let welcome) = try decodeField("welcome", c.welcome, MLSMessage.self) else {
                return .failed(reason: "welcome: not a Welcome")
            }
            let theirs = try join(welcome, "welcome", keyPackage, initKey, signerKey)

            let decrypted = try welcome.decrypt(for: keyPackage, initPrivateKey: initKey, psk: noPSK)
            let sealed = try Welcome(
                sealing: decrypted.groupInfo, epochSecrets: theirs.epochSecrets,
                newMembers: [(keyPackage, decrypted.groupSecrets, checkWelcomeRandomness)])
            guard case .welcome(let ours) = try MLSMessage(mlsDecoding: try MLSMessage.welcome(sealed).mlsEncoded()) else {
                return .failed(reason: "ours: not a Welcome")
            }
            let back = try join(ours, "ours", keyPackage, initKey, signerKey)
            guard back.groupInfo == theirs.groupInfo, back.epochSecrets.epochAuthenticator == theirs.epochSecrets.epochAuthenticator,
                  back.interimTranscriptHash == theirs.interimTranscriptHash
            else { return .failed(reason: "ours: round trip") }
        } catch let e as CaseError {
            return .failed(reason: e.reason)
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }

    static func noPSK(_ id: PreSharedKeyID) throws -> SecretBytes {
        throw CaseError(reason: "the GroupSecrets name a PSK")
    }

    static func join(
        _ welcome: Welcome, _ name: String, _ keyPackage: KeyPackage, _ initKey: HPKEPrivateKey, _ signerKey: SignaturePublicKey
    ) throws -> JoinedEpoch {
        let decrypted: DecryptedWelcome
        do { decrypted = try welcome.decrypt(for: keyPackage, initPrivateKey: initKey, psk: noPSK) } catch let e as CaseError {
            throw e
        } catch {
            throw CaseError(reason: "\(name): does not decrypt: \(error)")
        }
        do { return try decrypted.verify(signerKey: signerKey) } catch {
            throw CaseError(reason: "\(name): group info: \(error)")
        }
    }
}
