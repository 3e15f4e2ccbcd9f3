/// RFC 9420 section 6.2:
///
///     struct {
///         FramedContent content;
///         FramedContentAuthData auth;
///         select (PublicMessage.content.sender.sender_type) {
///             case member: MAC membership_tag;
///             case external:
///             case new_member_commit:
///             case new_member_proposal: struct{};
///         };
///     } PublicMessage;
///
/// `membershipTag` is present exactly for a member sender, on decoding and encoding. Neither
/// the signature nor the tag is checked by decoding.
public struct PublicMessage: Sendable, Equatable, MLSCodable {
    public var content: FramedContent
    public var auth: FramedContentAuthData
    public var membershipTag: [UInt8]?

    public init(content: FramedContent, auth: FramedContentAuthData, membershipTag: [UInt8]?) {
        self.content = content
        self.auth = auth
        self.membershipTag = membershipTag
    }

    /// Whether a public message from `sender` carries a membership tag.
    public static func carriesMembershipTag(_ sender: Sender) -> Bool {
        if case .member = sender { true } else { false }
    }

    public init(from reader: inout TLSReader) throws {
        content = try FramedContent(from: &reader)
        auth = try FramedContentAuthData(from: &reader, contentType: content.contentType)
        membershipTag = Self.carriesMembershipTag(content.sender) ? try reader.readOpaque() : nil
    }

    public func encode(to writer: inout TLSWriter) throws {
        guard Self.carriesMembershipTag(content.sender) == (membershipTag != nil) else {
            throw MLSEncodingError.inconsistent("a membership tag is present exactly for a member sender")
        }
        try content.encode(to: &writer)
        try auth.encode(to: &writer, contentType: content.contentType)
        if let membershipTag { try writer.writeOpaque(membershipTag) }
    }

    /// The content with its wire format, as signed and as hashed into the transcript.
    public var authenticatedContent: AuthenticatedContent {
        AuthenticatedContent(wireFormat: .publicMessage, content: content, auth: auth)
    }

    /// `AuthenticatedContentTBM` (RFC 9420 section 6.2), what the membership tag covers:
    /// `struct { FramedContentTBS content_tbs; FramedContentAuthData auth; }`.
    public func membershipTagInput(context: GroupContext) throws -> [UInt8] {
        var w = TLSWriter()
        try FramedContentTBS(wireFormat: .publicMessage, content: content, context: context).encode(to: &w)
        try auth.encode(to: &w, contentType: content.contentType)
        return w.bytes
    }

    /// Checks `membership_tag = MAC(membership_key, AuthenticatedContentTBM)` for a member
    /// sender, in constant time. Throws ``MLSValidationError/invalidMembershipTag``.
    public func verifyMembershipTag(membershipKey: [UInt8], context: GroupContext, suite: MLSCipherSuite) throws {
        guard let membershipTag,
              suite.verifyMAC(key: membershipKey, data: try membershipTagInput(context: context), tag: membershipTag)
        else { throw MLSValidationError.invalidMembershipTag }
    }
}
