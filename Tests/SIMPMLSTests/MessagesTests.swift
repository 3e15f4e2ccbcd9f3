import SIMPMLS
import Testing

/// Strict decoding of the RFC 9420 wire structures: every malformed input throws
/// `MLSDecodingError`, and whatever decodes encodes back to the same bytes.
@Suite struct MessagesTests {
    func message(_ field: String) throws -> [UInt8] {
        try #require(try MessageFixtures.vectorMessages().first { $0.field == field }).bytes
    }

    @Test(arguments: ["mls_welcome", "mls_group_info", "mls_key_package", "public_message_application",
                      "public_message_proposal", "public_message_commit", "private_message"])
    func aByteAfterAWholeMessageIsAnError(field: String) throws {
        #expect(throws: MLSDecodingError.trailingBytes(count: 1)) { try MLSMessage(mlsDecoding: try message(field) + [0]) }
    }

    @Test func everyProperPrefixOfEveryVectorStructureFails() throws {
        for (field, bytes) in try MessageFixtures.vectorMessages() {
            for n in 0..<bytes.count {
                #expect(try MessageFixtures.decodeAndEncode(field: field, Array(bytes.prefix(n))) == nil, "\(field) prefix \(n)")
            }
        }
    }

    @Test(arguments: [UInt16(0), 6, 0xFFFF])
    func anUnknownWireFormatIsAnError(format: UInt16) throws {
        var bytes = try message("mls_welcome")
        bytes[2] = UInt8(format >> 8)
        bytes[3] = UInt8(format & 0xFF)
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "WireFormat", value: UInt64(format))) {
            try MLSMessage(mlsDecoding: bytes)
        }
    }

    @Test func aVersionOtherThanMLS10IsAnError() throws {
        var bytes = try message("mls_key_package")
        bytes[1] = 2
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "ProtocolVersion", value: 2)) { try MLSMessage(mlsDecoding: bytes) }
    }

    @Test(arguments: [UInt16(0), 8, 0x0A0A, 0xF000])
    func aProposalOfAnUnknownTypeIsAnError(type: UInt16) {
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "ProposalType", value: UInt64(type))) {
            try Proposal(mlsDecoding: [UInt8(type >> 8), UInt8(type & 0xFF), 0x00])
        }
    }

    @Test func everyProposalTypeRoundTripsWithItsType() throws {
        let proposals: [Proposal] = [
            .add(AddProposal(keyPackage: try MessageFixtures.keyPackage())),
            .update(UpdateProposal(leafNode: try MessageFixtures.keyPackage().leafNode)),
            .remove(RemoveProposal(removed: 5)),
            .preSharedKey(PreSharedKeyProposal(psk: PreSharedKeyID(kind: .external(pskID: [1, 2]), nonce: [3]))),
            .preSharedKey(PreSharedKeyProposal(psk: PreSharedKeyID(
                kind: .resumption(usage: .branch, groupID: [4], epoch: 9), nonce: [5]))),
            .reInit(ReInitProposal(groupID: [6], cipherSuite: CipherSuiteID(3), extensions: [Extension(extensionType: 0xF000, extensionData: [7])])),
            .externalInit(ExternalInitProposal(kemOutput: [8, 9])),
            .groupContextExtensions(GroupContextExtensionsProposal(extensions: [])),
        ]
        #expect(proposals.map(\.proposalType.rawValue) == [1, 2, 3, 4, 4, 5, 6, 7])
        for proposal in proposals {
            let bytes = try proposal.mlsEncoded()
            #expect(bytes.prefix(2) == [0, UInt8(proposal.proposalType.rawValue)])
            #expect(try Proposal(mlsDecoding: bytes) == proposal)
        }
    }

    @Test func aPSKOfAnUnknownTypeOrUsageIsAnError() {
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "PSKType", value: 3)) { try PreSharedKeyID(mlsDecoding: [3, 0, 0]) }
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "ResumptionPSKUsage", value: 4)) {
            try PreSharedKeyID(mlsDecoding: [2, 4, 0] + [UInt8](repeating: 0, count: 8) + [0])
        }
    }

    @Test func aCredentialOfAnUnknownTypeIsAnErrorButTheTypeItselfIsNot() throws {
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "CredentialType", value: 3)) { try Credential(mlsDecoding: [0, 3, 0]) }
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "CredentialType", value: 0)) { try Credential(mlsDecoding: [0, 0, 0]) }
        // Capabilities name types (GREASE, private use) this build has no case for.
        let capabilities = Capabilities(
            versions: [1, 0x0A0A], cipherSuites: [CipherSuiteID(0x0A0A)], extensions: [0x0A0A], proposals: [ProposalType(0x1A1A)],
            credentials: [CredentialType(0x2A2A), .basic, .x509])
        #expect(try Capabilities(mlsDecoding: try capabilities.mlsEncoded()) == capabilities)
        let x509 = Credential.x509(certificates: [Certificate(certData: [1, 2, 3]), Certificate(certData: [])])
        #expect(try Credential(mlsDecoding: try x509.mlsEncoded()) == x509)
        #expect(try x509.mlsEncoded() == [0, 2, 5, 3, 1, 2, 3, 0])
    }

    @Test func senderTypesAreNumberedAsRFC9420Section6() throws {
        #expect(SenderType.newMemberProposal.rawValue == 3)
        #expect(SenderType.newMemberCommit.rawValue == 4)
        #expect(try Sender.member(leafIndex: 258).mlsEncoded() == [1, 0, 0, 1, 2])
        #expect(try Sender.external(senderIndex: 1).mlsEncoded() == [2, 0, 0, 0, 1])
        #expect(try Sender.newMemberProposal.mlsEncoded() == [3])
        #expect(try Sender.newMemberCommit.mlsEncoded() == [4])
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "SenderType", value: 5)) { try Sender(mlsDecoding: [5]) }
    }

    func publicMessage(sender: Sender, tag: [UInt8]?, commit: Bool = false) -> PublicMessage {
        let content = FramedContent(
            groupID: [1], epoch: 2, sender: sender, authenticatedData: [],
            content: commit ? .commit(Commit(proposals: [], path: nil)) : .application([3]))
        return PublicMessage(
            content: content, auth: FramedContentAuthData(signature: [4], confirmationTag: commit ? [5] : nil), membershipTag: tag)
    }

    @Test func theMembershipTagIsThereExactlyForAMemberSender() throws {
        let member = publicMessage(sender: .member(leafIndex: 0), tag: [9, 9])
        let bytes = try member.mlsEncoded()
        #expect(try PublicMessage(mlsDecoding: bytes) == member)
        // A member's message without its tag is cut short.
        #expect(throws: MLSDecodingError.self) { try PublicMessage(mlsDecoding: Array(bytes.dropLast(3))) }
        for sender in [Sender.external(senderIndex: 0), .newMemberProposal, .newMemberCommit] {
            let untagged = publicMessage(sender: sender, tag: nil, commit: sender == .newMemberCommit)
            let encoded = try untagged.mlsEncoded()
            #expect(try PublicMessage(mlsDecoding: encoded) == untagged)
            // A tag after a non-member's message is a trailing value.
            #expect(throws: MLSDecodingError.trailingBytes(count: 3)) { try PublicMessage(mlsDecoding: encoded + [2, 9, 9]) }
            #expect(throws: MLSEncodingError.self) {
                try publicMessage(sender: sender, tag: [9], commit: sender == .newMemberCommit).mlsEncoded()
            }
        }
        #expect(throws: MLSEncodingError.self) { try publicMessage(sender: .member(leafIndex: 0), tag: nil).mlsEncoded() }
    }

    @Test func aConfirmationTagIsThereExactlyForACommit() throws {
        let commit = publicMessage(sender: .member(leafIndex: 1), tag: [1], commit: true)
        #expect(try PublicMessage(mlsDecoding: try commit.mlsEncoded()) == commit)
        var untagged = commit
        untagged.auth.confirmationTag = nil
        #expect(throws: MLSEncodingError.self) { try untagged.mlsEncoded() }
        var tagged = publicMessage(sender: .member(leafIndex: 1), tag: [1])
        tagged.auth.confirmationTag = [1]
        #expect(throws: MLSEncodingError.self) { try tagged.mlsEncoded() }
    }

    @Test func anUnknownContentTypeIsAnError() throws {
        var bytes = try message("public_message_application")
        guard case .publicMessage(let decoded) = try MLSMessage(mlsDecoding: bytes) else {
            Issue.record("not a public message")
            return
        }
        // version, wire_format, then FramedContent up to content_type.
        var w = TLSWriter()
        try w.writeOpaque(decoded.content.groupID)
        w.writeUInt64(decoded.content.epoch)
        try decoded.content.sender.encode(to: &w)
        try w.writeOpaque(decoded.content.authenticatedData)
        let at = 4 + w.bytes.count
        #expect(bytes[at] == 1)
        bytes[at] = 4
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "ContentType", value: 4)) { try MLSMessage(mlsDecoding: bytes) }
    }

    @Test func authenticatedContentIsOnlyInPublicOrPrivateWireFormats() throws {
        let content = publicMessage(sender: .member(leafIndex: 0), tag: [1]).authenticatedContent
        var bytes = try content.mlsEncoded()
        #expect(try AuthenticatedContent(mlsDecoding: bytes) == content)
        bytes[1] = 3
        #expect(throws: MLSDecodingError.invalidValue("framed content in wire format 3")) { try AuthenticatedContent(mlsDecoding: bytes) }
    }

    @Test func theRatchetTreeIsNotEmptyEndsWithANodeAndHasLeavesAtEvenIndices() throws {
        let leaf = Node.leaf(try MessageFixtures.keyPackage().leafNode)
        let parent = Node.parent(ParentNode(encryptionKey: HPKEPublicKeyIn(bytes: [1]), parentHash: [], unmergedLeaves: [2]))
        let tree = try RatchetTree(nodes: [leaf, parent, nil, nil, leaf])
        #expect(try RatchetTree(mlsDecoding: try tree.mlsEncoded()) == tree)
        #expect(tree.size?.leafCount == 4)
        #expect(try RatchetTree(nodes: [leaf]).size?.leafCount == 1)
        #expect(try RatchetTree(nodes: [leaf, parent]).size?.leafCount == 2)
        #expect(throws: MLSDecodingError.invalidValue("ratchet_tree is empty")) { try RatchetTree(mlsDecoding: [0]) }
        // [leaf, blank], written by hand since the initializer refuses it too.
        var w = TLSWriter()
        try w.writeVector { v in
            try v.writeOptional(leaf) { try $1.encode(to: &$0) }
            v.writeUInt8(0)
        }
        #expect(throws: MLSDecodingError.invalidValue("ratchet_tree ends with a blank node")) { try RatchetTree(mlsDecoding: w.bytes) }
        #expect(throws: MLSDecodingError.invalidValue("ratchet_tree node 0 is not a leaf node")) { try RatchetTree(nodes: [parent]) }
        #expect(throws: MLSDecodingError.invalidValue("ratchet_tree node 1 is not a parent node")) { try RatchetTree(nodes: [leaf, leaf, leaf]) }
    }

    @Test func privateMessagePaddingIsZeros() throws {
        let content = PrivateMessageContent(
            content: .application([1, 2]), auth: FramedContentAuthData(signature: [3], confirmationTag: nil), paddingLength: 5)
        let plaintext = try content.encoded()
        #expect(plaintext == [2, 1, 2, 1, 3, 0, 0, 0, 0, 0])
        #expect(try PrivateMessageContent(decoding: plaintext, contentType: .application) == content)
        var dirty = plaintext
        dirty[8] = 1
        #expect(throws: MLSDecodingError.nonZeroPadding) {
            try PrivateMessageContent(decoding: dirty, contentType: .application)
        }
        // The same bytes read as a commit: the content is not a commit.
        #expect(throws: MLSDecodingError.self) { try PrivateMessageContent(decoding: plaintext, contentType: .commit) }
    }

    @Test func theRatchetTreeInEveryVectorGroupInfoDecodes() throws {
        var trees = 0
        for (field, bytes) in try MessageFixtures.vectorMessages(cases: 300) where field == "mls_group_info" {
            guard case .groupInfo(let info) = try MLSMessage(mlsDecoding: bytes) else {
                Issue.record("not a group info")
                continue
            }
            if try info.ratchetTree() != nil { trees += 1 }
        }
        #expect(trees == 300)
    }

    @Test func secretsDoNotShowInDescriptions() {
        let secret: [UInt8] = [0xAB, 0xCD, 0xEF, 0x12]
        let secrets = GroupSecrets(joinerSecret: secret, pathSecret: PathSecret(pathSecret: secret), psks: [])
        for text in [String(describing: secrets), "\(secrets)", String(describing: PathSecret(pathSecret: secret))] {
            #expect(!text.contains("171"))
            #expect(!text.lowercased().contains("abcd"))
            #expect(text.contains("redacted"))
        }
    }

    /// Vector messages with random bytes changed: each throws or decodes, and what decodes
    /// encodes back to exactly its input (no input traps, no two encodings of one value).
    @Test func mutatedVectorMessagesThrowOrRoundTrip() throws {
        var rng = SeededGenerator(seed: 0x4D4C53)
        let messages = try MessageFixtures.vectorMessages(cases: 3)
        var decoded = 0
        for _ in 0..<3000 {
            let (field, original) = messages[Int.random(in: 0..<messages.count, using: &rng)]
            var bytes = original
            for _ in 0...Int.random(in: 0..<3, using: &rng) where !bytes.isEmpty {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            if let again = try MessageFixtures.decodeAndEncode(field: field, bytes) {
                decoded += 1
                #expect(again == bytes, "\(field) decoded but encodes differently")
            }
        }
        #expect(decoded > 0)
    }
}
