import Logging
import NIOCore
import SIMPCore
import SIMPRedis

/// One group entry copied into a member's inbox, to push to that member's sessions here.
struct GroupCopy: Sendable {
    var seq: UInt64
    /// Its bytes are the entry with the member's inbox seq.
    var push: Push
}

/// Carries a node's group messages and membership changes through Redis: a group's messages
/// are numbered in its order by one script in its slot, then copied into every member's inbox
/// in that order. The driver of `GroupRelayMachine`, which decides (retries, gap repairs,
/// resumes, answers): it hands each event to the machine with the time the router's clock
/// gives, read once per event, carries out the actions it returns, in order, and feeds each
/// store answer back as an event. It decides nothing. Confined to the router's loop.
final class GroupRelay: @unchecked Sendable {
    private let store: MessageStore
    private let loop: any EventLoop
    private var machine: GroupRelayMachine
    /// The router's clock (`Router.now`), read once per event.
    private let now: @Sendable () -> Moment
    /// The delivery engine's events (`groupCopied`, `groupAnswered`, `groupRecheck`).
    var engine: @Sendable (DeliveryEvent) -> Void = { _ in }
    /// The members' numbering floors here (`Session.numberingFloor`), read as a copy leaves
    /// and handed to the store as data.
    var floors: @Sendable (_ members: [String]) -> [String: UInt64] = { _ in [:] }

    /// Membership changes under way, by the ticket the machine's answers name.
    private var changes: [UInt64: EventLoopPromise<MessageStore.GroupChangeResult>] = [:]
    private var nextTicket: UInt64 = 1
    /// What the machine asked for and is not yet carried out: an event fed while actions are
    /// being carried out (a future that completed at once) adds its actions to these, in order.
    private var pending: [GroupRelayMachine.Action] = []
    private var performing = false

    init(store: MessageStore, loop: any EventLoop, metrics: ServerMetrics, logger: Logger, maxBatch: Int,
         now: @escaping @Sendable () -> Moment) {
        self.store = store
        self.loop = loop
        self.now = now
        self.machine = GroupRelayMachine(maxBatch: maxBatch, metrics: metrics, logger: logger)
    }

    func enqueue(_ request: StoreRequest, group: String) {
        feed(.relay(request, group: group))
    }

    /// The member confirmed while its copies of `group` were held: copy on from the log.
    func resume(member: String, group: String) {
        feed(.resume(member: member, group: group))
    }

    /// Makes one membership change and copies its entries to whom they concern; answered once
    /// they are copied.
    func change(_ change: GroupRelayMachine.Change) -> EventLoopFuture<MessageStore.GroupChangeResult> {
        let ticket = nextTicket
        nextTicket += 1
        let promise = loop.makePromise(of: MessageStore.GroupChangeResult.self)
        changes[ticket] = promise
        feed(.changeAsked(change, ticket: ticket))
        return promise.futureResult
    }

    private func feed(_ event: GroupRelayMachine.Event) {
        loop.assertInEventLoop()
        pending.append(contentsOf: machine.handle(event, at: now()))
        guard !performing else { return }
        performing = true
        var next = 0
        while next < pending.count {
            let action = pending[next]
            next += 1
            carryOut(action)
        }
        pending.removeAll(keepingCapacity: true)
        performing = false
    }

    private func carryOut(_ action: GroupRelayMachine.Action) {
        switch action {
        case .storeInGroup(let group, let batch):
            store.storeInGroup(group, batch, on: loop).whenSuccess { [self] stored in
                feed(.stored(group: group, batch, outcomes: stored.outcomes, members: stored.members))
            }
        case .copy(let job, let group, let items):
            store.deliver(group: group, items, floors: floors(items.map(\.member)), on: loop).whenSuccess { [self] results in
                feed(.copied(job: job, items, results))
            }
        case .readLog(let job, let group, let after, let upTo):
            store.groupLog(group, after: after, upTo: upTo, on: loop).whenComplete { [self] result in
                feed(.logRead(job: job, result.mapError { $0 }))
            }
        case .readForResume(let key, let limit):
            store.groupMark(of: key.member, in: key.group, on: loop).flatMap { [store, loop] state in
                store.groupLog(key.group, after: state.mark, upTo: .max, limit: limit, on: loop)
                    .map { (mark: state.mark, isMember: state.isMember, log: $0) }
            }.whenComplete { [self] result in
                feed(.resumeRead(key, result.mapError { $0 }))
            }
        case .releaseHeld(let member, let group):
            store.releaseHeld(member, group: group, on: loop).whenFailure { _ in }
        case .change(let ticket, let change, let users, let lapses):
            store.changeGroup(change.action, group: change.group, by: change.by, users: users, maxMembers: change.maxMembers,
                              nowMillis: change.nowMillis, invitationLapses: lapses, on: loop).whenComplete { [self] result in
                feed(.changed(ticket: ticket, group: change.group, result.mapError { $0 }))
            }
        case .changeAnswered(let ticket, let result):
            changes.removeValue(forKey: ticket)?.completeWith(result)
        case .publish(let notice, let nodes):
            store.publish(notice, to: nodes, on: loop)
        case .copied(let member, let copies):
            engine(.groupCopied(member: member, copies))
        case .answer(let request, let envelopes):
            engine(.groupAnswered(request, envelopes))
        case .recheck(let member):
            engine(.groupRecheck(member: member))
        case .later(let due):
            loop.execute { [self] in feed(.due(due)) }
        case .after(let delay, let due):
            loop.scheduleTask(in: delay) { [self] in feed(.due(due)) }
        }
    }
}
