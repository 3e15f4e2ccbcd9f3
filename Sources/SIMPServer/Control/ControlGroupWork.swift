import NIOCore
import SIMPCore

/// Carries out a group request's steps (`GroupFlow`) for `ControlWorker`: the store's reads and
/// writes and the router's changes, each result fed back to the flow. It decides nothing: the
/// flow says what comes next, what is refused and what is answered.
struct ControlGroupWork {
    let router: Router
    /// The connection's loop, for LIST's and MEMBERS' reads.
    let loop: any EventLoop
    /// The ids of the invitations' notices (`ControlContext.ids`).
    let ids: @Sendable () -> UInt64

    func run(_ request: Simp_GroupRequest, by user: String, id: UInt64, nowMillis: Int64) -> EventLoopFuture<Simp_Envelope> {
        let settings = router.store.settings
        let flow = GroupFlow(request, user: user, maxMembers: settings.maxGroupMembers, maxGroups: settings.maxGroupsPerUser,
                             nowMillis: nowMillis)
        return carryOut(flow.start(), flow).map { Simp_Envelope(requestID: id, .groupAnswer($0)) }
    }

    /// Runs `next` and the steps it leads to, one after another. The standings, invitations and
    /// changes run on the router's loop, as its changes must.
    private func carryOut(_ next: GroupFlow.Next, _ flow: GroupFlow) -> EventLoopFuture<Simp_GroupAnswer> {
        let (router, store, user, nowMillis) = (router, router.store, flow.user, flow.nowMillis)
        switch next {
        case .readList:
            let groups = store.groups(of: user, on: loop)
            let invitations = store.invitations(of: user, .list, nowMillis: nowMillis, on: loop)
            return then(groups.and(invitations).map { .list(groups: $0, invitations: $1) }, flow)
        case .readMembers(let group):
            return then(store.groupMembers(group, on: loop).map { .members($0) }, flow)
        case .readStandings(let users, let toward):
            return then(store.groupStanding(of: users, toward: toward, on: router.loop).map { .standings($0) }, flow)
        case .readInvitations:
            return then(store.invitations(of: user, .list, nowMillis: nowMillis, on: router.loop).map { .invitations($0) }, flow)
        case .change(let change):
            return then(router.loop.flatSubmit { router.changeGroup(change) }.map { .changed($0) }, flow)
        case .forgetInvitation(let group):
            return then(store.invitations(of: user, .forget(group: group), nowMillis: nowMillis, on: router.loop).map { _ in .forgotten }, flow)
        case .invite(let invitations):
            invite(invitations, nowMillis: nowMillis)
            var flow = flow
            let after = flow.next()
            return carryOut(after, flow)
        case .answer(let answer):
            return loop.makeSucceededFuture(answer)
        case .refuse(let code, let reason):
            return loop.makeFailedFuture(ServerError(code, reason))
        }
    }

    /// Feeds the step's result to the flow and carries out what it says next.
    private func then(_ result: EventLoopFuture<GroupFlow.Result>, _ flow: GroupFlow) -> EventLoopFuture<Simp_GroupAnswer> {
        result.flatMap { result in
            var flow = flow
            let next = flow.finished(result)
            return carryOut(next, flow)
        }
    }

    /// Each invitation into its invitee's list, then its notice; the answer does not wait for them.
    private func invite(_ invitations: [GroupFlow.Invitation], nowMillis: Int64) {
        let router = self.router
        for invitation in invitations {
            let notice = GroupFlow.notice(invitation, id: ids(), nowMillis: nowMillis)
            let record = MessageStore.InvitationStep.record(group: invitation.group, by: invitation.by, lapses: invitation.lapses)
            router.store.invitations(of: invitation.invitee, record, nowMillis: nowMillis, on: router.loop)
                .whenComplete { _ in router.notify(notice) }
        }
    }
}
