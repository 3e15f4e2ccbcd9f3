/// RFC 9420 section 8.2: the transcript hashes, which bind each epoch to the commits before it.
///
///     confirmed_transcript_hash_[epoch] =
///         Hash(interim_transcript_hash_[epoch - 1] || ConfirmedTranscriptHashInput_[epoch]);
///     interim_transcript_hash_[epoch] =
///         Hash(confirmed_transcript_hash_[epoch] || InterimTranscriptHashInput_[epoch]);
///
/// with
///
///     struct {
///         WireFormat wire_format;
///         FramedContent content; /* with content_type == commit */
///         opaque signature<V>;
///     } ConfirmedTranscriptHashInput;
///
///     struct { MAC confirmation_tag; } InterimTranscriptHashInput;
///
/// The confirmation tag itself is checked against `confirmed` with the epoch's
/// `confirmation_key`: `EpochSecrets.verifyConfirmationTag(_:confirmedTranscriptHash:)`.
public struct TranscriptHashes: Sendable, Equatable {
    public var confirmed: [UInt8]
    public var interim: [UInt8]

    public init(confirmed: [UInt8], interim: [UInt8]) {
        self.confirmed = confirmed
        self.interim = interim
    }

    /// The hashes of the epoch `commit` starts, from the interim transcript hash of the epoch
    /// before. Throws ``MLSValidationError/notACommit`` unless `commit` is a commit (and so
    /// carries a confirmation tag).
    public static func after(
        _ commit: AuthenticatedContent, interimBefore: [UInt8], suite: MLSCipherSuite
    ) throws -> TranscriptHashes {
        guard commit.content.contentType == .commit, let tag = commit.auth.confirmationTag else {
            throw MLSValidationError.notACommit
        }
        let confirmed = suite.hash(interimBefore + (try confirmedInput(commit)))
        return TranscriptHashes(confirmed: confirmed, interim: try interim(confirmed: confirmed, confirmationTag: tag, suite: suite))
    }

    /// `interim_transcript_hash = Hash(confirmed_transcript_hash || InterimTranscriptHashInput)`:
    /// also what a new member computes from a GroupInfo (section 12.4.3.1).
    public static func interim(confirmed: [UInt8], confirmationTag: [UInt8], suite: MLSCipherSuite) throws -> [UInt8] {
        var interimInput = TLSWriter()
        try interimInput.writeOpaque(confirmationTag)
        return suite.hash(confirmed + interimInput.bytes)
    }

    /// `ConfirmedTranscriptHashInput` of a commit.
    static func confirmedInput(_ commit: AuthenticatedContent) throws -> [UInt8] {
        var w = TLSWriter()
        try commit.wireFormat.encode(to: &w)
        try commit.content.encode(to: &w)
        try w.writeOpaque(commit.auth.signature)
        return w.bytes
    }
}
