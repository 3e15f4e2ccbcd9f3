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
/// in that order (`GroupQueue` decides what goes when, `GroupFanout` who gets what; this
/// driver carries it out). The sender is answered once the
/// message is in every member's inbox, so a resend after a crash (found stored before) makes
/// the copies that are missing. One batch per group is in flight here at a time: a sender's
/// messages keep their order. Confined to the router's loop.
final class GroupRelay: @unchecked Sendable {
    private let store: MessageStore
    private let loop: any EventLoop
    private let logger: Logger
    /// Pushes copies to a member's sessions here.
    var copied: @Sendable (_ member: String, _ copies: [GroupCopy]) -> Void = { _, _ in }
    /// Answers a sender's device.
    var answer: @Sendable (_ request: StoreRequest, _ envelopes: [Simp_Envelope]) -> Void = { _, _ in }
    /// A member's sessions here read their inbox: entries found copied already may never have
    /// been pushed (the node that copied them died).
    var recheck: @Sendable (_ member: String) -> Void = { _ in }
    /// Copies of the group to these members were held at their bound (counted).
    var held: @Sendable (_ members: Int) -> Void = { _ in }
    /// A member's held copies of a group are resumed (counted).
    var resumed: @Sendable () -> Void = {}
    /// A member's numbering floor here (`Session.numberingFloor`).
    var floor: @Sendable (_ member: String) -> UInt64? = { _ in nil }

    private var queue: GroupQueue
    /// Resumes of held copies under way.
    private var resuming: Set<GroupFanout.Resume> = []
    /// Gap repairs of one copy before it is left to the next message's (or resend's).
    static let gapAttempts = 3

    init(store: MessageStore, loop: any EventLoop, logger: Logger, maxBatch: Int) {
        self.store = store
        self.loop = loop
        self.logger = logger
        self.queue = GroupQueue(maxBatch: maxBatch)
    }

    func enqueue(_ request: StoreRequest, group: String) {
        guard queue.enqueue(request, group: group) else { return }
        loop.execute { [self] in flush(group) }
    }

    private func flush(_ group: String) {
        guard let batch = queue.nextBatch(group) else { return }
        store.storeInGroup(group, batch, on: loop).whenSuccess { [self] stored in
            let now = NIODeadline.now()
            let result = GroupFanout.stored(batch, stored.outcomes, now: now)
            let plan = GroupFanout.messageEntries(result.entries, members: stored.members)
            copyAll(group, plan, since: now, recheckFound: result.resent) { [self] complete in
                let recipients = max(0, stored.members.count - 1)
                for (request, outcome) in result.settled {
                    queue.answered(request)
                    guard GroupFanout.answersNow(outcome, copiesComplete: complete) else { continue }
                    answer(request, GroupFanout.answers(id: request.id, group: group, outcome: outcome, recipients: recipients))
                }
                finish(group, retry: result.retry)
            }
        }
    }

    /// The next batch of the group goes; what Redis could not take now goes first, a moment later.
    private func finish(_ group: String, retry: [StoreRequest]) {
        guard let wait = queue.finished(group, retry: retry) else { return flush(group) }
        loop.scheduleTask(in: wait) { [self] in
            queue.resume(group)
            flush(group)
        }
    }

    /// Copies until every copy is made, or gives up after `GroupFanout.retryFor` (a message not
    /// in every inbox then is not answered: its sender's resend, found stored, copies again).
    /// Only the members whose copies failed are tried again.
    private func copyAll(_ group: String, _ plan: [String: [GroupEntry]], since: NIODeadline, recheckFound: Bool = false,
                         done: @escaping @Sendable (Bool) -> Void) {
        deliver(group, plan, recheckFound: recheckFound) { [self] incomplete, _ in
            guard !incomplete.isEmpty, GroupFanout.retries(since: since, now: .now()) else { return done(incomplete.isEmpty) }
            let rest = plan.filter { incomplete.contains($0.key) }
            loop.scheduleTask(in: GroupFanout.retryDelay) { [self] in copyAll(group, rest, since: since, recheckFound: recheckFound, done: done) }
        }
    }

    /// The member confirmed while its copies of `group` were held: what it lacks is copied from
    /// the log, a page at a time while it has room (`GroupFanout.resumePage`), as far as the
    /// log keeps it (older entries are passed over: their copy follows a gap). One resume per
    /// member and group at a time.
    func resume(member: String, group: String) {
        let key = GroupFanout.Resume(member: member, group: group)
        guard resuming.insert(key).inserted else { return }
        resumed()
        store.groupMark(of: member, in: group, on: loop).flatMap { [self] state in
            store.groupLog(group, after: state.mark, upTo: .max, limit: GroupFanout.resumePage, on: loop).map { (state, $0) }
        }.whenComplete { [self] result in
            guard case .success(let (state, log)) = result else {
                resuming.remove(key)
                return
            }
            let entries = GroupFanout.missing(for: member, after: state.mark, isMember: state.isMember, log: log)
            guard !entries.isEmpty else {
                resuming.remove(key)
                store.releaseHeld(member, group: group, on: loop).whenFailure { _ in }
                return
            }
            deliver(group, [member: entries], recheckFound: false) { [self] incomplete, held in
                resuming.remove(key)
                if GroupFanout.resumesAgain(read: log.count, incomplete: incomplete.contains(member), held: held.contains(member)) {
                    resume(member: member, group: group)
                }
            }
        }
    }

    /// Makes one membership change and copies its entries to whom they concern; answered once
    /// they are copied (a failed copy is repaired by the member's next entry).
    func change(_ action: MessageStore.GroupChangeAction, group: String, by: String, entryBy: String, users: [String], invited: [String],
                maxMembers: Int, nowMillis: Int64) -> EventLoopFuture<MessageStore.GroupChangeResult> {
        // An invited user's entry is empty: the script records the invitation instead.
        let entries = users.map { ($0, Self.changeEntry(action, group: group, member: $0, by: entryBy, nowMillis: nowMillis)) }
            + invited.map { ($0, [UInt8]()) }
        return store.changeGroup(action, group: group, by: by, users: entries, maxMembers: maxMembers, nowMillis: nowMillis,
                                 invitationLapses: nowMillis + GroupConsent.invitationLifetime, on: loop).flatMap { [self] result in
            guard case .changed(let changes, let members, _) = result else { return loop.makeSucceededFuture(result) }
            let promise = loop.makePromise(of: MessageStore.GroupChangeResult.self)
            copyAll(group, GroupFanout.changeEntries(changes, members: members.map(\.name)), since: .now()) { _ in promise.succeed(result) }
            return promise.futureResult
        }
    }

    private static func changeEntry(_ action: MessageStore.GroupChangeAction, group: String, member: String, by: String,
                                    nowMillis: Int64) -> [UInt8] {
        var message = Simp_Message()
        switch action {
        case .create, .add, .accept: message.type = .groupAdded
        case .remove: message.type = .groupRemoved
        case .leave: message.type = .groupLeft
        case .admin, .decline: return []
        }
        message.content = member
        message.messageID = "g" + randomBytes(8).map { String($0, radix: 16) }.joined()
        message.fromUser = by
        message.toUser = GroupName.address(group)
        message.serverTime = nowMillis
        return (try? message.serializedBytes()) ?? []
    }

    /// Copies each member's entries; `done` with the members whose copies are not all made
    /// (failed, or behind a gap), and those whose copies are held (they have their share of
    /// group copies unconfirmed: the rest comes from the log when they confirm, `resume`).
    /// `recheckFound`: entries found copied already make the member's sessions read their inbox
    /// (a resend of a stored message: the node that copied it may have died before pushing).
    private func deliver(_ group: String, _ plan: [String: [GroupEntry]], recheckFound: Bool, attempt: Int = 1,
                         done: @escaping @Sendable (_ incomplete: Set<String>, _ held: Set<String>) -> Void) {
        let items = plan.map { (member: $0.key, entries: $0.value) }
        store.deliver(group: group, items, floor: floor, on: loop).whenSuccess { [self] results in
            let round = GroupFanout.copied(items, results, recheckFound: recheckFound)
            carryOut(round, group: group, errors: zip(items, results).compactMap { item, result in
                if case .failure(let error) = result { (item.member, error) } else { nil }
            })
            guard !round.gaps.isEmpty else { return done(round.failed, round.held) }
            guard attempt < Self.gapAttempts else {
                logger.warning("group copies still behind after \(attempt) repairs", metadata: ["group": "\(group)"])
                return done(round.failed.union(round.gaps.keys), round.held)
            }
            let (failedHere, heldHere) = (round.failed, round.held)
            repair(group, round.gaps, recheckFound: recheckFound, attempt: attempt) { done(failedHere.union($0), heldHere.union($1)) }
        }
    }

    private func carryOut(_ round: GroupFanout.CopyRound, group: String, errors: [(member: String, error: RedisError)]) {
        for (member, error) in errors {
            logger.warning("group entries not copied to a member; tried again",
                           metadata: ["group": "\(group)", "member": "\(member)", "error": "\(error)"])
        }
        for (member, copies) in round.copies { copied(member, copies) }
        if !round.held.isEmpty { held(round.held.count) }
        for member in round.recheck { recheck(member) }
        for (member, nodes) in round.notify { store.publish(.inbox(user: member), to: nodes, on: loop) }
    }

    /// A member's copy stopped at a gap (another node's entry not copied yet, or one from while
    /// they were out): the log after their mark is read and what was theirs copied again.
    private func repair(_ group: String, _ gaps: [String: GroupFanout.Gap], recheckFound: Bool,
                        attempt: Int, done: @escaping @Sendable (Set<String>, Set<String>) -> Void) {
        let low = gaps.values.map(\.mark).min() ?? 0
        let high = gaps.values.map(\.upTo).max() ?? 0
        store.groupLog(group, after: low, upTo: high, on: loop).whenComplete { [self] result in
            guard case .success(let log) = result else { return done(Set(gaps.keys), []) }
            let plan = GroupFanout.repairs(gaps, log: log)
            guard !plan.isEmpty else { return done([], []) }
            deliver(group, plan, recheckFound: recheckFound, attempt: attempt + 1, done: done)
        }
    }
}
