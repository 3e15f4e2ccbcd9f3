/// Why a message could not be protected or was refused on receipt (RFC 9420 section 6). Never
/// carries key, nonce or plaintext bytes.
///
/// Other refusals keep their own types: a membership tag that does not verify is
/// ``MLSValidationError/invalidMembershipTag``, a signature ``MLSCryptoError/invalidSignature``,
/// padding with a non-zero byte ``MLSDecodingError/nonZeroPadding``, a replayed or expired
/// generation ``SecretTreeError``.
public enum MessageProtectionError: Error, Equatable, Sendable {
    /// The message's `group_id` is not the group's.
    case wrongGroup
    /// The message's epoch is not the one these keys are for (section 12.4.2: "equal to the
    /// `epoch` field of the current GroupContext"). A message of an older epoch is for the keys
    /// of that epoch, if the application keeps them.
    case wrongEpoch(expected: UInt64, got: UInt64)
    /// Content signed for one wire format protected as another (the signature covers it, 6.1).
    case wrongWireFormat(expected: WireFormat, got: WireFormat)
    /// Application data as a PublicMessage: "Applications MUST use PrivateMessage to encrypt
    /// application messages" (section 6).
    case applicationDataInPublicMessage
    /// A sender that may not send this content type (section 6.1: `external` and
    /// `new_member_proposal` send proposals, `new_member_commit` commits), or a PrivateMessage
    /// from a sender that is not a member (6.3.2: "Sender.sender_type is `member`").
    case senderNotAllowed(SenderType, ContentType)
    /// `encrypted_sender_data` did not open under the key and nonce of its ciphertext sample,
    /// or its plaintext is not a `SenderData` (6.3.2).
    case senderDataDecryptionFailed
    /// `ciphertext` did not open under the sender's ratchet key and the guarded nonce (6.3.1).
    case contentDecryptionFailed
    /// The sender chose a negative amount of padding.
    case invalidPaddingLength(Int)
}
