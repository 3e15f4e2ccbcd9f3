/// RFC 9420 section 12.4.3, a group info as received:
///
///     struct {
///         GroupContext group_context;
///         Extension extensions<V>;
///         MAC confirmation_tag;
///         uint32 signer;
///         /* SignWithLabel(., "GroupInfoTBS", GroupInfoTBS) */
///         opaque signature<V>;
///     } GroupInfo;
///
/// Its signature is unchecked; ``verify(with:suite:)`` makes a ``GroupInfo`` of it once the
/// caller has found the signer's key (the `signer` leaf's `signature_key` in the group's tree).
public struct GroupInfoIn: Sendable, Equatable, MLSCodable {
    public var groupContext: GroupContext
    public var extensions: [Extension]
    public var confirmationTag: [UInt8]
    /// The signer's leaf index.
    public var signer: UInt32
    public var signature: [UInt8]

    public init(groupContext: GroupContext, extensions: [Extension], confirmationTag: [UInt8], signer: UInt32, signature: [UInt8]) {
        self.groupContext = groupContext
        self.extensions = extensions
        self.confirmationTag = confirmationTag
        self.signer = signer
        self.signature = signature
    }

    public init(from reader: inout TLSReader) throws {
        groupContext = try GroupContext(from: &reader)
        extensions = try reader.readVector(of: Extension.self)
        confirmationTag = try reader.readOpaque()
        signer = try reader.readUInt32()
        signature = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        try toBeSigned.encode(to: &writer)
        try writer.writeOpaque(signature)
    }

    /// What the signature covers.
    public var toBeSigned: GroupInfoTBS {
        GroupInfoTBS(groupContext: groupContext, extensions: extensions, confirmationTag: confirmationTag, signer: signer)
    }

    /// The group's tree when the group info carries a `ratchet_tree` extension (section
    /// 12.4.3.3), decoded; nil without one. Throws if there are two or the tree is malformed.
    public func ratchetTree() throws -> RatchetTree? {
        let trees = extensions.filter { $0.extensionType == RatchetTree.extensionType }
        guard trees.count <= 1 else { throw MLSDecodingError.invalidValue("two ratchet_tree extensions") }
        return try trees.first.map { try RatchetTree(mlsDecoding: $0.extensionData) }
    }

    /// RFC 9420 section 12.4.3.1: the group context's cipher suite is `suite` and the
    /// signature verifies under `signerKey`.
    public func verify(with signerKey: SignaturePublicKey, suite: MLSCipherSuite) throws -> GroupInfo {
        guard groupContext.cipherSuite == suite.id else {
            throw MLSValidationError.cipherSuiteMismatch(expected: suite.id, got: groupContext.cipherSuite)
        }
        _ = try SignedContentIn(label: GroupInfoTBS.label, content: try toBeSigned.mlsEncoded(), signature: signature)
            .verify(with: signerKey, suite: suite)
        return GroupInfo(checked: self, suite: suite)
    }
}

/// RFC 9420 section 12.4.3: what a group info's signature covers, every field but the signature.
public struct GroupInfoTBS: Sendable, Equatable, MLSEncodable {
    /// `SignWithLabel`'s label.
    public static let label = Array("GroupInfoTBS".utf8)

    public var groupContext: GroupContext
    public var extensions: [Extension]
    public var confirmationTag: [UInt8]
    public var signer: UInt32

    public func encode(to writer: inout TLSWriter) throws {
        try groupContext.encode(to: &writer)
        try writer.writeVector(extensions)
        try writer.writeOpaque(confirmationTag)
        writer.writeUInt32(signer)
    }
}

/// A group info whose signature ``GroupInfoIn/verify(with:suite:)`` has checked. The
/// confirmation tag is checked later, against the joiner's key schedule (section 12.4.3.1).
public struct GroupInfo: Sendable, Equatable, MLSEncodable {
    public let wire: GroupInfoIn
    public let suite: MLSCipherSuite

    fileprivate init(checked wire: GroupInfoIn, suite: MLSCipherSuite) {
        self.wire = wire
        self.suite = suite
    }

    public var groupContext: GroupContext { wire.groupContext }

    public func encode(to writer: inout TLSWriter) throws { try wire.encode(to: &writer) }
}
