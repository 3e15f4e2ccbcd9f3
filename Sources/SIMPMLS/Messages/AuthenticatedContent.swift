/// RFC 9420 section 6.1:
///
///     struct {
///         WireFormat wire_format;
///         FramedContent content;
///         FramedContentAuthData auth;
///     } AuthenticatedContent;
///
/// The content a member signed, with the wire format it was sent in (`mls_public_message` or
/// `mls_private_message`: no other format carries framed content, so others are rejected).
/// Its signature is not checked by decoding: ``signedContent(context:)`` gives it to verify.
public struct AuthenticatedContent: Sendable, Equatable, MLSCodable {
    public var wireFormat: WireFormat
    public var content: FramedContent
    public var auth: FramedContentAuthData

    public init(wireFormat: WireFormat, content: FramedContent, auth: FramedContentAuthData) {
        self.wireFormat = wireFormat
        self.content = content
        self.auth = auth
    }

    public init(from reader: inout TLSReader) throws {
        wireFormat = try reader.readEnum(WireFormat.self)
        guard wireFormat == .publicMessage || wireFormat == .privateMessage else {
            throw MLSDecodingError.invalidValue("framed content in wire format \(wireFormat.rawValue)")
        }
        content = try FramedContent(from: &reader)
        auth = try FramedContentAuthData(from: &reader, contentType: content.contentType)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try wireFormat.encode(to: &writer)
        try content.encode(to: &writer)
        try auth.encode(to: &writer, contentType: content.contentType)
    }

    /// What the sender signed, to be verified with the sender's signature key (RFC 9420
    /// section 6.1): `context` is the group's for senders `member` and `new_member_commit`, and
    /// nil for the others.
    public func signedContent(context: GroupContext?) throws -> SignedContentIn {
        let tbs = FramedContentTBS(wireFormat: wireFormat, content: content, context: context)
        return SignedContentIn(label: FramedContentTBS.label, content: try tbs.mlsEncoded(), signature: auth.signature)
    }

    /// The label of a `ProposalRef` (RFC 9420 section 5.2).
    public static let proposalReferenceLabel = Array("MLS 1.0 Proposal Reference".utf8)

    /// `ProposalRef = RefHash("MLS 1.0 Proposal Reference", AuthenticatedContent)` (RFC 9420
    /// section 12.4): how a commit names a proposal sent on its own.
    public func proposalReference(suite: MLSCipherSuite) throws -> [UInt8] {
        try suite.refHash(label: Self.proposalReferenceLabel, value: try mlsEncoded())
    }
}

/// RFC 9420 section 6.1, what a framed content's signature covers:
///
///     struct {
///         ProtocolVersion version = mls10;
///         WireFormat wire_format;
///         FramedContent content;
///         select (FramedContentTBS.content.sender.sender_type) {
///             case member:
///             case new_member_commit:   GroupContext context;
///             case external:
///             case new_member_proposal: struct{};
///         };
///     } FramedContentTBS;
///
/// Encoded only; `context` must be present exactly for senders `member` and `new_member_commit`.
public struct FramedContentTBS: Sendable, Equatable, MLSEncodable {
    /// `SignWithLabel`'s label.
    public static let label = Array("FramedContentTBS".utf8)

    public var version: ProtocolVersion
    public var wireFormat: WireFormat
    public var content: FramedContent
    public var context: GroupContext?

    public init(version: ProtocolVersion = .mls10, wireFormat: WireFormat, content: FramedContent, context: GroupContext?) {
        self.version = version
        self.wireFormat = wireFormat
        self.content = content
        self.context = context
    }

    /// Whether the signature of content from `sender` covers the group context.
    public static func coversContext(_ sender: Sender) -> Bool {
        switch sender {
        case .member, .newMemberCommit: true
        case .external, .newMemberProposal: false
        }
    }

    public func encode(to writer: inout TLSWriter) throws {
        guard Self.coversContext(content.sender) == (context != nil) else {
            throw MLSEncodingError.inconsistent("the group context is signed exactly for member and new_member_commit senders")
        }
        try version.encode(to: &writer)
        try wireFormat.encode(to: &writer)
        try content.encode(to: &writer)
        if let context { try context.encode(to: &writer) }
    }
}
