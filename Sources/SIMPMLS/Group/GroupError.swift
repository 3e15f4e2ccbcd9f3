/// Why the group state machine refused an operation or a message (RFC 9420 sections 11, 12).
/// No case carries key or secret bytes.
public enum MLSGroupError: Error, Equatable, Sendable {
    /// A commit we sent came back: the committer keeps the state ``MLSGroup/commit(adding:removing:proposals:includingPath:psk:randomness:)`` returned.
    case ownCommit
    /// A proposal or application message we sent came back.
    case ownMessage
    /// Content of a type or sender this state machine does not take here.
    case unsupportedContent
    /// Another member's proposal or commit in a wire format the group's policy does not accept
    /// (``MLSGroupPolicy/acceptedHandshakeWireFormats``), or a policy asking to send handshake
    /// messages in a wire format other than public or private.
    case wireFormatNotAllowed(WireFormat)
    /// A commit names a proposal by reference that is not in this epoch's cache.
    case unknownProposalReference
    /// Two Updates or Removes for one leaf, or an Update from a removed member (section 12.2).
    case conflictingProposals(leaf: UInt32)
    /// An Update's leaf node is not of source `update`, or keeps the old encryption key.
    case invalidUpdate(leaf: UInt32)
    /// A proposal this sender may not send or this commit may not carry: an Update from a
    /// non-member, a type an external sender may not propose (section 12.1.8), anything but an
    /// Add from a new member, an ExternalInit outside an external commit, or anything but
    /// ExternalInit, one Remove and PSKs in one (section 12.2).
    case proposalNotAllowed(ProposalType, sender: SenderType)
    /// Two Adds of one client (the same signature key), or an Add of a client already in the
    /// group and not removed by the same commit (section 12.2).
    case duplicateAdd
    /// A key package, leaf or GroupContextExtensions proposal that does not fit the group's
    /// capabilities: a required capability or credential type not supported, a credential type
    /// other members do not support, an extension a member does not support (sections 7.3,
    /// 11.1, 12.1.7).
    case unsupportedCapabilities
    /// Two PreSharedKey proposals of one PreSharedKeyID (section 12.2).
    case duplicatePSK
    /// A PSK whose `psk_nonce` is not `KDF.Nh` bytes, or a resumption PSK of usage `reinit` or
    /// `branch` outside a reinitialization or branch (section 12.1.4).
    case invalidPSK
    /// More than one GroupContextExtensions proposal (section 12.2).
    case multipleGroupContextExtensions
    /// A ReInit with other proposals, or of a lower protocol version (sections 12.1.5, 12.2).
    case invalidReInit
    /// The group was reinitialized by a committed ReInit: it may send nothing more (12.4.2).
    case groupReinitialized
    /// An external commit without exactly one ExternalInit, with a proposal by reference or
    /// without a path (section 12.4.3.2).
    case invalidExternalCommit
    /// A GroupInfo without the `external_pub` extension, needed for an external commit.
    case missingExternalPub
    /// An external commit or a new member's proposal, which the group's policy does not take
    /// (``MLSGroupPolicy/acceptsExternalCommits``, ``MLSGroupPolicy/acceptsNewMemberProposals``).
    case newMemberNotAccepted
    /// An external commit that removes a member (a resync, section 12.4.3.2) whose new leaf is
    /// not that member's: another credential, or the same encryption key.
    case invalidResync(leaf: UInt32)
    /// A proposal from `external(index)` when the group's `external_senders` extension has no
    /// such entry (section 12.1.8.1).
    case unknownExternalSender(UInt32)
    /// An Update by value in a commit: the committer's own Update may not be committed by value
    /// and another member's must be sent by reference (section 12.2).
    case updateByValue
    /// A Remove of a blank or absent leaf, a repeated Remove, or a Remove of the committer
    /// (section 12.2).
    case invalidRemove(leaf: UInt32)
    /// A commit without a path whose proposals require one (section 12.4).
    case pathRequired
    /// The commit's confirmation tag is not the new epoch's (section 12.4.2).
    case invalidConfirmationTag
    /// The Welcome's GroupInfo has no `ratchet_tree` extension (section 12.4.3.3); fetching the
    /// tree elsewhere is not supported.
    case missingRatchetTree
    /// The Welcome's GroupInfo signer is not a member of its tree.
    case unknownSigner(leaf: UInt32)
    /// The joiner's key package leaf is not in the Welcome's tree.
    case joinerNotInTree
    /// A message's sender is not a member of the epoch's tree.
    case unknownSender(leaf: UInt32)
    /// The epoch counter is at its maximum.
    case epochExhausted
    /// A Welcome names a PSK the client does not have.
    case unknownPSK
    /// The private keys given are not the key package's.
    case keyPackageKeysMismatch
    /// The saved state bytes are not a state of this version.
    case invalidSavedState
    /// An application message of an earlier epoch of this group whose keys this member does
    /// not keep: outside ``MLSGroupPolicy/pastEpochsKept``, or dropped by
    /// ``MLSGroup/forgetPastEpochs()`` (sections 9.2, 12.4.2).
    case pastEpochNotKept(epoch: UInt64)
    /// The application's ``MLSGroup/proposalApprover`` refused a proposal of this type from
    /// `sender` that the commit carries.
    case proposalRefused(ProposalType, sender: Sender)
}
