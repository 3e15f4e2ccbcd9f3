import SIMPCore

/// A group request, step by step: what to read or change next, which invitations to record and
/// tell, and what the user is answered. Pure: `ControlGroupWork` carries out each step and
/// feeds its result back. Who is added, invited or left out is `GroupConsent`'s to say, what
/// the group's script refused `GroupRequestRules`' to word.
///
/// LIST and MEMBERS are one read each. A create or add reads where each named user stands
/// toward the adder first, an accept where the user stands itself (it may be in too many
/// groups) and who invited it; then the change goes through the router, which copies its
/// entries into the members' inboxes before the answer. An accept or decline takes the
/// invitation out of the user's list whatever the change came to.
struct GroupFlow: Sendable {
    /// An invitation a create or add made: recorded in the invitee's list, then told with a
    /// `GROUP_INVITED` notice on every device.
    struct Invitation: Sendable, Equatable {
        var invitee: String
        var group: String
        var by: String
        /// When it lapses (ms since the epoch).
        var lapses: Int64
    }

    /// What a step found.
    enum Result: Sendable {
        /// LIST: the user's groups and the invitations waiting for it.
        case list(groups: [String], invitations: [Simp_GroupInvitation])
        /// MEMBERS: the group's members; nil, no such group.
        case members([Simp_GroupMember]?)
        /// Where each user read stands (nil: no such user), in the order asked.
        case standings([GroupConsent.Standing?])
        /// The invitations waiting for the user.
        case invitations([Simp_GroupInvitation])
        case changed(MessageStore.GroupChangeResult)
        /// The user's copy of its invitation is out of its list.
        case forgotten
    }

    enum Next: Sendable, Equatable {
        /// Read the user's groups and its invitations.
        case readList
        case readMembers(group: String)
        /// Read where each of `users` stands toward `toward` (`Scripts.groupStanding`).
        case readStandings([String], toward: String)
        /// Read the invitations waiting for the user.
        case readInvitations
        /// Make the change through the router (`GroupRelay`).
        case change(GroupRelayMachine.Change)
        /// Record each invitation and then tell its invitee; nothing waits for them: go on (`next()`).
        case invite([Invitation])
        /// Take the user's invitation to the group out of its list.
        case forgetInvitation(group: String)
        case answer(Simp_GroupAnswer)
        case refuse(Simp_ErrorCode, String)
    }

    let action: Simp_GroupRequest.Action
    /// What the change, if any, is to the group's script.
    let changeAction: MessageStore.GroupChangeAction
    let group: String
    let user: String
    /// The users named, each once in the order named: a name twice would make two entries.
    /// A create or add leaves the adder out (it is not its own invitee).
    let named: [String]
    let maxMembers: Int
    let maxGroups: Int
    /// The request's time (ms since the epoch): entries and invitations are stamped with it.
    let nowMillis: Int64
    /// Users a create or add left out unseen: answered as invited, so a block is not told.
    private var dropped: [String] = []
    /// An accept's or decline's change, answered once the invitation is forgotten.
    private var change: MessageStore.GroupChangeResult?
    /// What is left after an `invite`.
    private var pending: Next?

    init(_ request: Simp_GroupRequest, user: String, maxMembers: Int, maxGroups: Int, nowMillis: Int64) {
        action = request.action
        changeAction = GroupRequestRules.action(of: request)
        group = request.group
        self.user = user
        var seen: Set<String> = request.action == .create || request.action == .add ? [user] : []
        named = (request.action == .leave ? [user] : request.users).filter { seen.insert($0).inserted }
        self.maxMembers = maxMembers
        self.maxGroups = maxGroups
        self.nowMillis = nowMillis
    }

    /// The first step.
    func start() -> Next {
        switch action {
        case .list: .readList
        case .members: .readMembers(group: group)
        case .create: .readStandings([user] + named, toward: user)
        case .add: .readStandings(named, toward: user)
        // Its own standing: an accept must not take the user past its groups.
        case .accept: .readStandings([user], toward: user)
        case .decline: .change(changing([user]))
        case .remove, .leave, .admin, .UNRECOGNIZED: .change(changing(named))
        }
    }

    /// The step asked for last came back with `result`.
    mutating func finished(_ result: Result) -> Next {
        switch result {
        case .list(let groups, let invitations):
            var answer = Simp_GroupAnswer()
            answer.groups = groups
            answer.invitations = invitations
            return .answer(answer)
        case .members(let members): return membersRead(members)
        case .standings(let standings): return action == .accept ? accepting(standings) : adding(standings)
        case .invitations(let list):
            // Who invited the user: its entry says they added it (else it would read as a create).
            return .change(changing([user], entryBy: list.first { $0.group == group }?.by))
        case .changed(let result): return changed(result)
        case .forgotten: return change.map(answered) ?? Self.unanswered
        }
    }

    /// The invitations were handed out.
    mutating func next() -> Next {
        defer { pending = nil }
        return pending ?? Self.unanswered
    }

    private static let unanswered = Next.refuse(.internal, "group request ended without an answer")

    private func changing(_ users: [String], entryBy: String? = nil, invited: [String] = []) -> GroupRelayMachine.Change {
        GroupRelayMachine.Change(action: changeAction, group: group, by: user, entryBy: entryBy ?? user, users: users,
                                 invited: invited, maxMembers: maxMembers, nowMillis: nowMillis)
    }

    private func membersRead(_ members: [Simp_GroupMember]?) -> Next {
        guard let members else { return .refuse(.noSuchGroup, "no such group: #\(group)") }
        guard members.contains(where: { $0.name == user }) else { return .refuse(.notAMember, "you are not a member of #\(group)") }
        var answer = Simp_GroupAnswer()
        answer.group = group
        answer.members = members
        return .answer(answer)
    }

    /// A create's or add's standings: the creator's own first (a create), then the users named.
    private mutating func adding(_ standings: [GroupConsent.Standing?]) -> Next {
        var standings = standings
        let creates = action == .create
        if creates, let problem = GroupConsent.joinProblem(groups: standings.removeFirst()?.groups ?? 0, maxGroups: maxGroups) {
            return .refuse(problem.code, problem.reason)
        }
        switch GroupConsent.plan(named, standings: standings, maxGroups: maxGroups) {
        case .failure(let refusal):
            return .refuse(refusal.code, refusal.reason)
        case .success(let plan):
            dropped = plan.dropped
            return .change(changing((creates ? [user] : []) + plan.added, invited: plan.invited))
        }
    }

    private func accepting(_ standings: [GroupConsent.Standing?]) -> Next {
        if let problem = GroupConsent.joinProblem(groups: standings.first??.groups ?? 0, maxGroups: maxGroups) {
            return .refuse(problem.code, problem.reason)
        }
        return .readInvitations
    }

    private mutating func changed(_ result: MessageStore.GroupChangeResult) -> Next {
        switch action {
        case .accept, .decline:
            // The list's copy goes whatever the group's record said (lapsed, or the group gone).
            change = result
            return .forgetInvitation(group: group)
        case .create, .add:
            guard case .changed(_, _, let invited) = result, !invited.isEmpty else { return answered(result) }
            pending = answered(result)
            return .invite(invited.map { Invitation(invitee: $0, group: group, by: user, lapses: nowMillis + GroupConsent.invitationLifetime) })
        default:
            return answered(result)
        }
    }

    /// The answer to what the change came to: the members after it (none to one who left or
    /// declined), the place of its last entry, and to an adder whom it invited (and left out).
    private func answered(_ result: MessageStore.GroupChangeResult) -> Next {
        switch result {
        case .refused(let code):
            return .refuse(code, GroupRequestRules.reason(code, group: group, max: maxMembers))
        case .changed(let changes, let members, let invited):
            var answer = Simp_GroupAnswer()
            answer.group = group
            answer.members = action == .leave || action == .decline ? [] : members
            answer.groupSeq = changes.map(\.seq).max() ?? 0
            if action == .create || action == .add {
                let told = Set(invited).union(dropped)
                answer.invited = named.filter { told.contains($0) }
            }
            return .answer(answer)
        }
    }

    /// The notice an `invite` tells its invitee with, as a store into its inbox; `id` and the
    /// time are the driver's.
    static func notice(_ invitation: Invitation, id: UInt64, nowMillis: Int64) -> StoreRequest {
        StoreRequest.notice(.groupInvited, from: invitation.by, to: invitation.invitee, owner: invitation.invitee,
                            content: GroupName.address(invitation.group), id: id, nowMillis: nowMillis)
    }
}
