import NIOCore
import SIMPCore

/// Carries out a group request for `ControlWorker`: LIST and MEMBERS are reads; the changes go
/// through the router's loop, which copies their entries into the members' inboxes before the
/// answer. Who is added, invited or left out is `GroupConsent`'s to say, what is refused
/// `GroupRequestRules`'.
struct ControlGroupWork {
    let router: Router
    /// The connection's loop, for the reads.
    let loop: any EventLoop
    /// The ids of the invitations' notices (`ControlContext.ids`).
    let ids: @Sendable () -> UInt64

    func run(_ request: Simp_GroupRequest, by user: String, id: UInt64, nowMillis: Int64) -> EventLoopFuture<Simp_Envelope> {
        let router = self.router
        switch request.action {
        case .list:
            let groups = router.store.groups(of: user, on: loop)
            let invitations = router.store.invitations(of: user, .list, nowMillis: nowMillis, on: loop)
            return groups.and(invitations).map { groups, invitations in
                var answer = Simp_GroupAnswer()
                answer.groups = groups
                answer.invitations = invitations
                return Simp_Envelope(requestID: id, .groupAnswer(answer))
            }
        case .members:
            return router.store.groupMembers(request.group, on: loop).flatMapThrowing { members in
                guard let members else { throw ServerError(.noSuchGroup, "no such group: #\(request.group)") }
                guard members.contains(where: { $0.name == user }) else { throw ServerError(.notAMember, "you are not a member of #\(request.group)") }
                var answer = Simp_GroupAnswer()
                answer.group = request.group
                answer.members = members
                return Simp_Envelope(requestID: id, .groupAnswer(answer))
            }
        case .create, .add:
            return addToGroup(request, by: user, id: id, nowMillis: nowMillis)
        case .accept, .decline:
            return answerInvitation(request, by: user, id: id, nowMillis: nowMillis)
        default:
            return changeGroup(request, by: user, id: id, nowMillis: nowMillis)
        }
    }

    /// A create or add: each user named is added, invited, or (it blocked the adder) neither,
    /// by where it stands toward the adder (`GroupConsent`); the invited get a GROUP_INVITED
    /// notice on every device.
    private func addToGroup(_ request: Simp_GroupRequest, by user: String, id: UInt64, nowMillis: Int64) -> EventLoopFuture<Simp_Envelope> {
        let (router, ids) = (self.router, self.ids)
        let action = GroupRequestRules.action(of: request)
        let (maxMembers, maxGroups) = (router.store.settings.maxGroupMembers, router.store.settings.maxGroupsPerUser)
        // Each user once, in the order named: a name twice would make two entries.
        var seen: Set<String> = [user]
        let others = request.users.filter { seen.insert($0).inserted }
        let creates = action == .create
        let reads = (creates ? [user] : []) + others
        return router.store.groupStanding(of: reads, toward: user, on: router.loop).flatMap { standings in
            var standings = standings
            if creates, let problem = GroupConsent.joinProblem(groups: standings.removeFirst()?.groups ?? 0, maxGroups: maxGroups) {
                return router.loop.makeFailedFuture(problem)
            }
            switch GroupConsent.plan(others, standings: standings, maxGroups: maxGroups) {
            case .failure(let refusal):
                return router.loop.makeFailedFuture(refusal)
            case .success(let plan):
                return router.changeGroup(action, group: request.group, by: user, users: (creates ? [user] : []) + plan.added,
                                          invited: plan.invited, maxMembers: maxMembers, nowMillis: nowMillis).map { ($0, plan) }
            }
        }.flatMapThrowing { (result: MessageStore.GroupChangeResult, plan: GroupConsent.Plan) -> Simp_Envelope in
            switch result {
            case .refused(let code):
                throw ServerError(code, GroupRequestRules.reason(code, group: request.group, max: maxMembers))
            case .changed(let changes, let members, let invited):
                Self.tellInvited(invited, group: request.group, by: user, nowMillis: nowMillis, router: router, ids: ids)
                let answered = Set(invited).union(plan.dropped)
                var answer = Simp_GroupAnswer()
                answer.group = request.group
                answer.members = members
                answer.invited = others.filter { answered.contains($0) }
                answer.groupSeq = changes.map(\.seq).max() ?? 0
                return Simp_Envelope(requestID: id, .groupAnswer(answer))
            }
        }
    }

    /// Each user invited now: the invitation in its list, then a notice on every device.
    private static func tellInvited(_ invited: [String], group: String, by user: String, nowMillis: Int64, router: Router,
                                    ids: () -> UInt64) {
        let lapses = nowMillis + GroupConsent.invitationLifetime
        for invitee in invited {
            let notice = StoreRequest.notice(.groupInvited, from: user, to: invitee, owner: invitee, content: GroupName.address(group),
                                             id: ids(), nowMillis: nowMillis)
            router.store.invitations(of: invitee, .record(group: group, by: user, lapses: lapses), nowMillis: nowMillis, on: router.loop)
                .whenComplete { _ in router.notify(notice) }
        }
    }

    /// An accept (the user joins, unless it is in as many groups as it may be) or a decline of
    /// the user's invitation; either way the invitation leaves its list.
    private func answerInvitation(_ request: Simp_GroupRequest, by user: String, id: UInt64, nowMillis: Int64) -> EventLoopFuture<Simp_Envelope> {
        let router = self.router
        let action = GroupRequestRules.action(of: request)
        let (maxMembers, maxGroups) = (router.store.settings.maxGroupMembers, router.store.settings.maxGroupsPerUser)
        // Who invited the user: its entry says they added it (else it would read as a create).
        let inviter: EventLoopFuture<String?> = action == .accept
            ? router.store.groupStanding(of: [user], toward: user, on: router.loop).flatMapThrowing { standings in
                if let problem = GroupConsent.joinProblem(groups: standings.first??.groups ?? 0, maxGroups: maxGroups) { throw problem }
            }.flatMap {
                router.store.invitations(of: user, .list, nowMillis: nowMillis, on: router.loop).map { list in
                    list.first { $0.group == request.group }?.by
                }
            }
            : router.loop.makeSucceededFuture(nil)
        return inviter.flatMap { by in
            router.changeGroup(action, group: request.group, by: user, entryBy: by, users: [user], maxMembers: maxMembers, nowMillis: nowMillis)
        }.flatMap { result -> EventLoopFuture<MessageStore.GroupChangeResult> in
            // The list's copy goes whatever the group's record said (lapsed, or the group gone).
            router.store.invitations(of: user, .forget(group: request.group), nowMillis: nowMillis, on: router.loop).map { _ in result }
        }.flatMapThrowing { result -> Simp_Envelope in
            switch result {
            case .refused(let code):
                throw ServerError(code, GroupRequestRules.reason(code, group: request.group, max: maxMembers))
            case .changed(let changes, let members, _):
                var answer = Simp_GroupAnswer()
                answer.group = request.group
                answer.members = action == .accept ? members : []
                answer.groupSeq = changes.map(\.seq).max() ?? 0
                return Simp_Envelope(requestID: id, .groupAnswer(answer))
            }
        }
    }

    /// A remove, leave or admin.
    private func changeGroup(_ request: Simp_GroupRequest, by user: String, id: UInt64, nowMillis: Int64) -> EventLoopFuture<Simp_Envelope> {
        let router = self.router
        let action = GroupRequestRules.action(of: request)
        // Each user once, in the order named: a name twice would make two entries.
        var seen = Set<String>()
        let users = (action == .leave ? [user] : request.users).filter { seen.insert($0).inserted }
        let max = router.store.settings.maxGroupMembers
        return router.loop.flatSubmit { router.changeGroup(action, group: request.group, by: user, users: users, maxMembers: max, nowMillis: nowMillis) }
            .flatMapThrowing { (result: MessageStore.GroupChangeResult) -> Simp_Envelope in
                switch result {
                case .refused(let code):
                    throw ServerError(code, GroupRequestRules.reason(code, group: request.group, max: max))
                case .changed(let changes, let members, _):
                    var answer = Simp_GroupAnswer()
                    answer.group = request.group
                    answer.members = action == .leave ? [] : members
                    answer.groupSeq = changes.map(\.seq).max() ?? 0
                    return Simp_Envelope(requestID: id, .groupAnswer(answer))
                }
            }
    }
}
