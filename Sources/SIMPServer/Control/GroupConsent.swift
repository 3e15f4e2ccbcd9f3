import SIMPCore

/// Who a group create or add puts in the group at once, who it invites, and who it leaves
/// out unseen (docs/PROTOCOL.md section 4, Groups). Pure: the standings are read from each
/// user's slot first (`Scripts.groupStanding`).
enum GroupConsent {
    /// How an invitation lasts before it lapses (ms).
    static let invitationLifetime: Int64 = 7 * 24 * 3600 * 1000
    /// Invitations a user's list keeps (past it, the soonest to lapse goes).
    static let invitationsKept = 200

    /// Where a named user stands toward the adder.
    struct Standing: Equatable, Sendable {
        /// It blocked the adder: nothing of the adder's reaches it, not even an invitation.
        var blockedAdder = false
        /// It takes messages from contacts only: a stranger's invitation is not shown either.
        var contactsOnly = false
        var adds = GroupAdds.contacts
        /// The adder is its contact.
        var isContact = false
        /// The groups it is in.
        var groups = 0
    }

    enum Decision: Equatable, Sendable {
        /// In the group now (its setting lets the adder).
        case add
        /// Invited: it joins if it accepts.
        case invite
        /// Neither: answered to the adder as invited, so a block is not told.
        case drop
    }

    static func decide(_ standing: Standing, maxGroups: Int) -> Decision {
        if standing.blockedAdder || (standing.contactsOnly && !standing.isContact) { return .drop }
        // A user in as many groups as it may be joins another only by its own accept.
        if standing.groups >= maxGroups { return .invite }
        switch standing.adds {
        case .everyone: return .add
        case .contacts: return standing.isContact ? .add : .invite
        case .nobody: return .invite
        }
    }

    /// What a create or add comes to for the users named (the adder left out).
    struct Plan: Equatable, Sendable {
        var added: [String] = []
        var invited: [String] = []
        var dropped: [String] = []
        /// What the adder is told was invited: the invited and the dropped, in the order named.
        var answered: [String] = []
    }

    /// The plan, or the refusal: a user named who does not exist.
    static func plan(_ users: [String], standings: [Standing?], maxGroups: Int) -> Result<Plan, ServerError> {
        var plan = Plan()
        for (user, standing) in zip(users, standings) {
            guard let standing else { return .failure(ServerError(.unknownUser, "no such user: \(user)")) }
            switch decide(standing, maxGroups: maxGroups) {
            case .add: plan.added.append(user)
            case .invite: plan.invited.append(user); plan.answered.append(user)
            case .drop: plan.dropped.append(user); plan.answered.append(user)
            }
        }
        return .success(plan)
    }

    /// Why a user may not create or join one more group; nil when it may.
    static func joinProblem(groups: Int, maxGroups: Int) -> ServerError? {
        guard groups >= maxGroups else { return nil }
        return ServerError(.tooManyGroups, "you are in \(groups) groups, the most a user may be in (\(maxGroups)); leave one first")
    }
}
