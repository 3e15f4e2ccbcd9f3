/// RFC 9420 section 6.1: signing framed content, and the content whose signature has been checked.
extension AuthenticatedContent {
    /// `content` signed by `signer` for `wireFormat`: `SignWithLabel(., "FramedContentTBS",
    /// FramedContentTBS)`, the TBS covering `context` for senders `member` and
    /// `new_member_commit` (section 6.1). A commit's `confirmationTag` is required; the other
    /// content types carry none.
    public init(
        signing content: FramedContent, wireFormat: WireFormat, context: GroupContext, signer: SignaturePrivateKey,
        suite: MLSCipherSuite, confirmationTag: [UInt8]?
    ) throws {
        guard (content.contentType == .commit) == (confirmationTag != nil) else {
            throw MLSEncodingError.inconsistent("a confirmation tag is present exactly for a commit")
        }
        let tbs = FramedContentTBS(
            wireFormat: wireFormat, content: content, context: FramedContentTBS.coversContext(content.sender) ? context : nil)
        let signature = try suite.signWithLabel(signer, label: FramedContentTBS.label, content: try tbs.mlsEncoded())
        self.init(wireFormat: wireFormat, content: content, auth: FramedContentAuthData(signature: signature, confirmationTag: confirmationTag))
    }

    /// RFC 9420 section 6.1, who may send what: `external` and `new_member_proposal` senders only
    /// proposals, `new_member_commit` only commits, members anything. (Which proposal types an
    /// external or new member may send is for proposal validation, section 12.1.)
    static func checkSenderMaySend(_ content: FramedContent) throws {
        let allowed: Bool
        switch content.sender {
        case .member: allowed = true
        case .external, .newMemberProposal: allowed = content.contentType == .proposal
        case .newMemberCommit: allowed = content.contentType == .commit
        }
        guard allowed else { throw MessageProtectionError.senderNotAllowed(content.sender.senderType, content.contentType) }
    }
}

/// Content from a PublicMessage or PrivateMessage that ``MessageProtection`` has unprotected:
/// its group and epoch are the keys', its membership tag (public) or AEAD (private) verified,
/// and its signature verified under the key the caller resolved for its sender (RFC 9420
/// sections 6.1-6.3). A commit's confirmation tag is not checked here: it needs the next epoch's
/// `confirmation_key` (section 12.4.2).
public struct VerifiedAuthenticatedContent: Sendable, Equatable {
    public let authenticatedContent: AuthenticatedContent

    fileprivate init(checked: AuthenticatedContent) { authenticatedContent = checked }

    public var content: FramedContent { authenticatedContent.content }
    public var sender: Sender { authenticatedContent.content.sender }
    public var wireFormat: WireFormat { authenticatedContent.wireFormat }

    /// Checks the signature of `content` under `signatureKey` over the FramedContentTBS with
    /// `context` where the sender's type requires it (section 6.1).
    static func verifying(
        _ content: AuthenticatedContent, context: GroupContext, signatureKey: SignaturePublicKey, suite: MLSCipherSuite
    ) throws -> VerifiedAuthenticatedContent {
        let signed = try content.signedContent(context: FramedContentTBS.coversContext(content.content.sender) ? context : nil)
        _ = try signed.verify(with: signatureKey, suite: suite)
        return VerifiedAuthenticatedContent(checked: content)
    }
}
