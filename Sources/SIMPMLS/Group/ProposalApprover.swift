/// A proposal a commit carries, as the application is asked to approve it (RFC 9420 sections
/// 12.1.8, 12.2, 12.4.2): the proposal, who proposed it, and how the commit names it.
public struct MLSCommittedProposal: Sendable, Equatable {
    public let proposal: Proposal
    /// Who sent the proposal: a member (its leaf, `member`), an external sender (its index in
    /// the group's `external_senders` extension, section 12.1.8.1), a new member proposing its
    /// own Add (`new_member_proposal`), or, for a proposal by value, the committer itself
    /// (`member`, or `new_member_commit` in an external commit).
    public let sender: Sender
    /// The `ProposalRef` when the commit includes the proposal by reference (a proposal sent
    /// on its own in this epoch and cached); nil when the commit carries it by value.
    public let reference: [UInt8]?

    public init(proposal: Proposal, sender: Sender, reference: [UInt8]?) {
        self.proposal = proposal
        self.sender = sender
        self.reference = reference
    }
}

/// The application's approval of the proposals a commit carries (section 12.2: "the
/// application ... may reject the commit"; 12.1.8: which external or new-member proposals to
/// accept is the application's policy), for example to refuse a Remove an external sender
/// proposes, or an Add the application's access rules forbid.
///
/// ``MLSGroup/proposalApprover``, when set, is asked about each proposal of a commit after the
/// proposal and the list passed the RFC's checks: when another member's (or an external)
/// commit is processed, a refusal refuses the commit
/// (``MLSGroupError/proposalRefused(_:sender:)``, the state unchanged); when this member commits,
/// a refused cached proposal is left out (``MLSGroup/CommitOutput/dropped``). This member's own
/// proposals by value (the caller's `adding`, `removing`, `proposals`) are not asked about.
public protocol MLSProposalApprover: Sendable {
    /// Throws to refuse `proposal` in a commit sent by `committer`.
    func approve(_ proposal: MLSCommittedProposal, committer: Sender) throws
}

extension MLSGroup.ResolvedProposal {
    /// This resolved proposal as the application sees it.
    var committed: MLSCommittedProposal {
        if case .reference(let reference) = proposalOrRef {
            return MLSCommittedProposal(proposal: proposal, sender: sender, reference: reference)
        }
        return MLSCommittedProposal(proposal: proposal, sender: sender, reference: nil)
    }
}

extension MLSGroup {
    /// Whether ``proposalApprover`` (if any) approves `entry` in a commit of `committer`.
    func approves(_ entry: ResolvedProposal, committer: Sender) -> Bool {
        guard let approver = proposalApprover else { return true }
        do {
            try approver.approve(entry.committed, committer: committer)
            return true
        } catch {
            return false
        }
    }

    /// Asks ``proposalApprover`` about every proposal of a received commit's valid list
    /// (section 12.4.2); its refusal becomes ``MLSGroupError/proposalRefused(_:sender:)``.
    func approve(_ list: [ResolvedProposal], committer: Sender) throws {
        guard let approver = proposalApprover else { return }
        for entry in list {
            do { try approver.approve(entry.committed, committer: committer) } catch {
                throw MLSGroupError.proposalRefused(entry.proposal.proposalType, sender: entry.sender)
            }
        }
    }
}
