/// Why the group state machine refused an operation or a message (RFC 9420 sections 11, 12).
/// No case carries key or secret bytes.
public enum MLSGroupError: Error, Equatable, Sendable {
    /// A commit we sent came back: the committer keeps the state ``MLSGroup/commit(adding:removing:randomness:)`` returned.
    case ownCommit
    /// Content of a type or sender this state machine does not take here (for example a
    /// proposal sent on its own, or a commit in a PrivateMessage).
    case unsupportedContent
    /// A commit names a proposal by reference that is not in this epoch's cache.
    case unknownProposalReference
    /// Two Updates or Removes for one leaf, or an Update from a removed member (section 12.2).
    case conflictingProposals(leaf: UInt32)
    /// An Update's leaf node is not of source `update`, or keeps the old encryption key.
    case invalidUpdate(leaf: UInt32)
    /// A proposal type this state machine does not apply yet (PSK, ReInit, ExternalInit,
    /// GroupContextExtensions) (section 12.1).
    case unsupportedProposal(ProposalType)
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
}
