import Foundation

/// messages.json: every structure decodes strictly and encodes back to the same bytes.
extension MLSTestVectors {
    struct MessagesCase: Decodable {
        let mls_welcome: Hex
        let mls_group_info: Hex
        let mls_key_package: Hex
        let ratchet_tree: Hex
        let group_secrets: Hex
        let add_proposal: Hex
        let update_proposal: Hex
        let remove_proposal: Hex
        let pre_shared_key_proposal: Hex
        let re_init_proposal: Hex
        let external_init_proposal: Hex
        let group_context_extensions_proposal: Hex
        let commit: Hex
        let public_message_application: Hex
        let public_message_proposal: Hex
        let public_message_commit: Hex
        let private_message: Hex
    }

    static func checkMessages(_ parsed: Result<MessagesCase, CaseError>) -> Outcome {
        let c: MessagesCase
        switch parsed {
        case .success(let v): c = v
        case .failure(let e): return .failed(reason: e.reason)
        }
        do {
            try expectMessage("mls_welcome", c.mls_welcome, .welcome)
            try expectMessage("mls_group_info", c.mls_group_info, .groupInfo)
            try expectMessage("mls_key_package", c.mls_key_package, .keyPackage)
            _ = try roundTrip("ratchet_tree", c.ratchet_tree, RatchetTree.self)
            _ = try roundTrip("group_secrets", c.group_secrets, GroupSecrets.self)
            _ = try roundTrip("add_proposal", c.add_proposal, AddProposal.self)
            _ = try roundTrip("update_proposal", c.update_proposal, UpdateProposal.self)
            _ = try roundTrip("remove_proposal", c.remove_proposal, RemoveProposal.self)
            _ = try roundTrip("pre_shared_key_proposal", c.pre_shared_key_proposal, PreSharedKeyProposal.self)
            _ = try roundTrip("re_init_proposal", c.re_init_proposal, ReInitProposal.self)
            _ = try roundTrip("external_init_proposal", c.external_init_proposal, ExternalInitProposal.self)
            _ = try roundTrip(
                "group_context_extensions_proposal", c.group_context_extensions_proposal, GroupContextExtensionsProposal.self)
            _ = try roundTrip("commit", c.commit, Commit.self)
            try expectPublicMessage("public_message_application", c.public_message_application, .application)
            try expectPublicMessage("public_message_proposal", c.public_message_proposal, .proposal)
            try expectPublicMessage("public_message_commit", c.public_message_commit, .commit)
            try expectMessage("private_message", c.private_message, .privateMessage)
        } catch let e as CaseError {
            return .failed(reason: e.reason)
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }

    /// `bytes` decoded as one whole `T`, which must encode back to `bytes`.
    static func roundTrip<T: MLSCodable>(_ field: String, _ bytes: Hex, _: T.Type) throws -> T {
        let value: T
        do { value = try T(mlsDecoding: bytes.bytes) } catch {
            throw CaseError(reason: "\(field): does not decode: \(error)")
        }
        let again: [UInt8]
        do { again = try value.mlsEncoded() } catch {
            throw CaseError(reason: "\(field): does not encode: \(error)")
        }
        guard again == bytes.bytes else { throw CaseError(reason: "\(field): encodes to different bytes") }
        return value
    }

    static func expectMessage(_ field: String, _ bytes: Hex, _ format: WireFormat) throws {
        let message = try roundTrip(field, bytes, MLSMessage.self)
        guard message.wireFormat == format else { throw CaseError(reason: "\(field): wire format \(message.wireFormat)") }
    }

    static func expectPublicMessage(_ field: String, _ bytes: Hex, _ type: ContentType) throws {
        guard case .publicMessage(let message) = try roundTrip(field, bytes, MLSMessage.self) else {
            throw CaseError(reason: "\(field): not a public message")
        }
        guard message.content.contentType == type else {
            throw CaseError(reason: "\(field): content type \(message.content.contentType)")
        }
    }
}

/// transcript-hashes.json (RFC 9420 section 8.2).
extension MLSTestVectors {
    struct TranscriptHashesCase: Decodable {
        let cipher_suite: UInt16
        let confirmation_key: Hex
        let authenticated_content: Hex
        let interim_transcript_hash_before: Hex
        let confirmed_transcript_hash_after: Hex
        let interim_transcript_hash_after: Hex
    }

    /// Passes when `authenticated_content` is a commit, the hashes computed from it and
    /// `interim_transcript_hash_before` are the vector's, and its confirmation tag is the MAC of
    /// the confirmed transcript hash under `confirmation_key`.
    static func checkTranscriptHashes(_ parsed: Result<TranscriptHashesCase, CaseError>) -> Outcome {
        let c: TranscriptHashesCase
        switch parsed {
        case .success(let v): c = v
        case .failure(let e): return .failed(reason: e.reason)
        }
        guard let suite = MLSCipherSuite(CipherSuiteID(c.cipher_suite)) else {
            return .skipped(reason: "cipher suite \(c.cipher_suite) not implemented")
        }
        do {
            let content = try roundTrip("authenticated_content", c.authenticated_content, AuthenticatedContent.self)
            guard content.content.contentType == .commit, let tag = content.auth.confirmationTag else {
                return .failed(reason: "authenticated_content is not a commit")
            }
            let hashes = try TranscriptHashes.after(content, interimBefore: c.interim_transcript_hash_before.bytes, suite: suite)
            guard hashes.confirmed == c.confirmed_transcript_hash_after.bytes else {
                return .failed(reason: "confirmed_transcript_hash_after")
            }
            guard hashes.interim == c.interim_transcript_hash_after.bytes else {
                return .failed(reason: "interim_transcript_hash_after")
            }
            // confirmation_tag = MAC(confirmation_key, confirmed_transcript_hash) (section 6.1).
            guard suite.verifyMAC(key: c.confirmation_key.bytes, data: hashes.confirmed, tag: tag) else {
                return .failed(reason: "confirmation_tag")
            }
        } catch let e as CaseError {
            return .failed(reason: e.reason)
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }
}

/// deserialization.json: variable-length integer headers (RFC 9420 section 2.1.2).
extension MLSTestVectors {
    struct DeserializationCase: Decodable {
        let vlbytes_header: Hex
        let length: Int
    }

    /// Passes when the header decodes, whole, to `length`, and `length` encodes to the header.
    static func checkDeserialization(_ parsed: Result<DeserializationCase, CaseError>) -> Outcome {
        let c: DeserializationCase
        switch parsed {
        case .success(let v): c = v
        case .failure(let e): return .failed(reason: e.reason)
        }
        do {
            var reader = TLSReader(c.vlbytes_header.bytes)
            let length = try reader.readVarint()
            try reader.finish()
            guard length == c.length else { return .failed(reason: "decoded length \(length)") }
            guard try MLSVarint.encode(c.length) == c.vlbytes_header.bytes else { return .failed(reason: "encoded header") }
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }
}
