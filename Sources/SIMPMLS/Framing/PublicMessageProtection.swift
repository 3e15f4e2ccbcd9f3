/// RFC 9420 section 6.2: encoding signed content as a PublicMessage with a membership tag, and
/// decoding one back to content whose tag and signature are checked.
extension MessageProtection {
    /// The PublicMessage of `content`, which must be signed for `mls_public_message`, of this
    /// group and epoch, and not application data (section 6). A member's message carries
    /// `membership_tag = MAC(membership_key, AuthenticatedContentTBM)`.
    public func protect(_ content: AuthenticatedContent) throws -> PublicMessage {
        guard content.wireFormat == .publicMessage else {
            throw MessageProtectionError.wrongWireFormat(expected: .publicMessage, got: content.wireFormat)
        }
        try checkPublicContent(content.content)
        var message = PublicMessage(content: content.content, auth: content.auth, membershipTag: nil)
        if PublicMessage.carriesMembershipTag(content.content.sender) {
            message.membershipTag = suite.mac(key: membershipKey.bytes, data: try message.membershipTagInput(context: groupContext))
        }
        return message
    }

    /// The content of `message` once checked, in this order: its group and epoch are these
    /// keys'; it is not application data and its sender may send its content type; a member's
    /// membership tag verifies (constant time, ``MLSValidationError/invalidMembershipTag``);
    /// the signature verifies under `signatureKey`, which the caller resolved for
    /// `message.content.sender` (a member's leaf, an external sender, or the leaf of a new
    /// member's key package or commit path, section 6.1).
    public func unprotect(_ message: PublicMessage, signatureKey: SignaturePublicKey) throws -> VerifiedAuthenticatedContent {
        try checkPublicContent(message.content)
        if PublicMessage.carriesMembershipTag(message.content.sender) {
            try message.verifyMembershipTag(membershipKey: membershipKey.bytes, context: groupContext, suite: suite)
        }
        return try .verifying(message.authenticatedContent, context: groupContext, signatureKey: signatureKey, suite: suite)
    }

    func checkPublicContent(_ content: FramedContent) throws {
        try checkGroupAndEpoch(groupID: content.groupID, epoch: content.epoch)
        guard content.contentType != .application else { throw MessageProtectionError.applicationDataInPublicMessage }
        try AuthenticatedContent.checkSenderMaySend(content)
    }
}
