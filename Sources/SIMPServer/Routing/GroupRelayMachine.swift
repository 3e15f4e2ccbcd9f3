import Logging
import NIOCore
import SIMPCore
import SIMPRedis

/// The group relay's decisions, pure: events in (a message or a membership change to carry,
/// a member to resume, a store's answer, a timer; each with the time it happened, read once by
/// the driver), actions out (`GroupRelayMachine.Action`), in the order they are to be carried
/// out. It composes `GroupQueue` (what goes when: one batch per group in flight) and
/// `GroupFanout` (who gets which entries, the answers), and decides what the driver used to:
/// when a store or a copy that Redis could not take is tried again and when it is given up
/// (`GroupFanout.retryDelay`, `retryFor`), how a copy stopped at a gap is repaired (the log
/// read again, `gapAttempts` times), when held copies are resumed from the log and when a
/// resume goes on, and when a sender or a change is answered. `GroupRelay` is its driver.
/// No Redis, no clock: randomness (a change entry's id) is given at its creation.
/// (It counts and logs through the sinks it is given; those are not decisions.)
struct GroupRelayMachine {
    /// A membership change asked by a control request.
    struct Change: Sendable, Equatable {
        var action: MessageStore.GroupChangeAction
        var group: String
        var by: String
        /// Whom the entries name as making the change (an accept names who invited).
        var entryBy: String
        var users: [String]
        /// Users a create or add invites rather than adds.
        var invited: [String]
        var maxMembers: Int
        var nowMillis: Int64
    }

    /// A timer or an end-of-tick task the driver was asked to run.
    enum Due: Hashable, Sendable {
        /// The group's next batch may go (asked at the end of the tick a message arrived in,
        /// so the messages of one tick go together).
        case flush(group: String)
        /// The wait after an outage is over: the group's batch goes again.
        case storeAgain(group: String)
        /// A copy's wait after a failure is over: its members whose copies failed are tried again.
        case copyAgain(job: UInt64)
    }

    enum Event {
        /// A message to a group from a session here (`DeliveryAction.relay`).
        case relay(StoreRequest, group: String)
        /// A membership change; `ticket` names it in the answer (`changeAnswered`).
        case changeAsked(Change, ticket: UInt64)
        /// The member confirmed while its copies of `group` were held (`DeliveryAction.resumeGroupCopies`).
        case resume(member: String, group: String)
        case due(Due)
        /// The store's answer to `storeInGroup`: outcomes in batch order and the members after it.
        case stored(group: String, [StoreRequest], outcomes: [GroupStoreOutcome], members: [String])
        /// The store's answer to `copy`: per member, what its copy did.
        case copied(job: UInt64, [(member: String, entries: [GroupEntry])], [Result<MessageStore.MemberCopy, RedisError>])
        /// The store's answer to `readLog`.
        case logRead(job: UInt64, Result<[(seq: UInt64, bytes: [UInt8])], any Error>)
        /// The store's answer to `readForResume`: the member's mark and the log after it.
        case resumeRead(GroupFanout.Resume, Result<(mark: UInt64, isMember: Bool, log: [(seq: UInt64, bytes: [UInt8])]), any Error>)
        /// The store's answer to `change`.
        case changed(ticket: UInt64, group: String, Result<MessageStore.GroupChangeResult, any Error>)
    }

    enum Action {
        // The store; each answer comes back as an event.
        /// Number one group's batch in its order (answered with `stored`).
        case storeInGroup(group: String, [StoreRequest])
        /// Copy entries into these members' inboxes (answered with `copied`); the driver adds
        /// each member's numbering floor here, as data.
        case copy(job: UInt64, group: String, [(member: String, entries: [GroupEntry])])
        /// Read the group's log after `after` up to `upTo` (answered with `logRead`).
        case readLog(job: UInt64, group: String, after: UInt64, upTo: UInt64)
        /// Read the member's mark, then up to `limit` log entries after it (answered with `resumeRead`).
        case readForResume(GroupFanout.Resume, limit: Int)
        /// The member's copies of the group are no longer held (not waited for).
        case releaseHeld(member: String, group: String)
        /// Make a membership change with these entries (answered with `changed`).
        case change(ticket: UInt64, Change, users: [(name: String, entry: [UInt8])], invitationLapses: Int64)
        case changeAnswered(ticket: UInt64, Result<MessageStore.GroupChangeResult, any Error>)
        /// Tell these nodes something (not waited for).
        case publish(NodeNotice, to: [String])

        // The delivery engine (`DeliveryEvent.groupCopied`, `groupAnswered`, `groupRecheck`).
        case copied(member: String, [GroupCopy])
        case answer(StoreRequest, [Simp_Envelope])
        case recheck(member: String)

        // Time: `later` runs at the end of this loop tick, `after` when its time has come;
        // both come back as `Event.due`.
        case later(Due)
        case after(TimeAmount, Due)
    }

    /// What a copy is for: what is answered, or goes on, once it is done.
    enum Purpose {
        /// A stored batch: its settled messages are answered (a numbered one only when every
        /// copy was made), then the group's next batch goes, with what Redis could not take first.
        case batch(settled: [(StoreRequest, GroupStoreOutcome)], recipients: Int, retry: [StoreRequest])
        /// A membership change, answered once its copies are done (made or given up).
        case change(ticket: UInt64, MessageStore.GroupChangeResult)
        /// Held copies resumed from a page of `read` log entries.
        case resume(GroupFanout.Resume, read: Int)
    }

    /// One copy under way: a pass over `plan` (with gap repairs), passes again for the members
    /// whose copies failed while `since` is recent (none for a resume).
    struct CopyJob {
        var group: String
        var purpose: Purpose
        /// What this pass copies.
        var plan: [String: [GroupEntry]]
        /// When its first pass began: passes are tried again for `GroupFanout.retryFor` after it.
        var since: NIODeadline?
        /// Entries found copied already make the member's sessions read their inbox.
        var recheckFound: Bool
        /// This pass's round: 1, then one more per gap repair.
        var attempt = 1
        /// This pass's members whose copies failed (or stayed behind a gap), and those held.
        var failed: Set<String> = []
        var held: Set<String> = []
        /// The members whose copies stopped at a gap, while their log read is under way.
        var gaps: [String: GroupFanout.Gap] = [:]
    }

    /// Gap repairs of one copy before it is left to the next message's (or resend's).
    static let gapAttempts = 3

    let metrics: ServerMetrics
    let logger: Logger
    let randomBytes: @Sendable (Int) -> [UInt8]

    private(set) var queue: GroupQueue
    /// Resumes of held copies under way.
    private(set) var resuming: Set<GroupFanout.Resume> = []
    private(set) var jobs: [UInt64: CopyJob] = [:]
    private var nextJob: UInt64 = 1
    private var actions: [Action] = []

    init(maxBatch: Int, metrics: ServerMetrics, logger: Logger,
         randomBytes: @escaping @Sendable (Int) -> [UInt8] = { count in (0..<count).map { _ in UInt8.random(in: 0...255) } }) {
        self.queue = GroupQueue(maxBatch: maxBatch)
        self.metrics = metrics
        self.logger = logger
        self.randomBytes = randomBytes
    }

    /// The one entry: an event and the time it happened in, the actions to carry out (in order) out.
    mutating func handle(_ event: Event, at now: Moment) -> [Action] {
        switch event {
        case .relay(let request, let group):
            if queue.enqueue(request, group: group) { actions.append(.later(.flush(group: group))) }
        case .changeAsked(let change, let ticket):
            ask(change, ticket: ticket)
        case .resume(let member, let group):
            resume(GroupFanout.Resume(member: member, group: group))
        case .due(.flush(let group)):
            flush(group)
        case .due(.storeAgain(let group)):
            queue.resume(group)
            flush(group)
        case .due(.copyAgain(let id)):
            if let job = jobs[id] { pass(id, job) }
        case .stored(let group, let batch, let outcomes, let members):
            stored(group, batch, outcomes, members: members, now: now)
        case .copied(let id, let items, let results):
            copied(id, items, results, now: now)
        case .logRead(let id, let result):
            logRead(id, result, now: now)
        case .resumeRead(let key, let result):
            resumeRead(key, result, now: now)
        case .changed(let ticket, let group, let result):
            changed(ticket, group: group, result, now: now)
        }
        defer { actions.removeAll(keepingCapacity: true) }
        return actions
    }

    // MARK: messages

    private mutating func flush(_ group: String) {
        guard let batch = queue.nextBatch(group) else { return }
        actions.append(.storeInGroup(group: group, batch))
    }

    private mutating func stored(_ group: String, _ batch: [StoreRequest], _ outcomes: [GroupStoreOutcome], members: [String],
                                 now: Moment) {
        let result = GroupFanout.stored(batch, outcomes, now: now.deadline)
        let plan = GroupFanout.messageEntries(result.entries, members: members)
        start(CopyJob(group: group, purpose: .batch(settled: result.settled, recipients: max(0, members.count - 1), retry: result.retry),
                      plan: plan, since: now.deadline, recheckFound: result.resent))
    }

    // MARK: membership changes

    private mutating func ask(_ change: Change, ticket: UInt64) {
        // An invited user's entry is empty: the script records the invitation instead.
        let entries = change.users.map { ($0, changeEntry(change, member: $0)) } + change.invited.map { ($0, [UInt8]()) }
        actions.append(.change(ticket: ticket, change, users: entries,
                               invitationLapses: change.nowMillis + GroupConsent.invitationLifetime))
    }

    private func changeEntry(_ change: Change, member: String) -> [UInt8] {
        var message = Simp_Message()
        switch change.action {
        case .create, .add, .accept: message.type = .groupAdded
        case .remove: message.type = .groupRemoved
        case .leave: message.type = .groupLeft
        case .admin, .decline: return []
        }
        message.content = member
        message.messageID = "g" + randomBytes(8).map { String($0, radix: 16) }.joined()
        message.fromUser = change.entryBy
        message.toUser = GroupName.address(change.group)
        message.serverTime = change.nowMillis
        return (try? message.serializedBytes()) ?? []
    }

    /// A change is answered once its entries are copied (a failed copy is repaired by the
    /// member's next entry).
    private mutating func changed(_ ticket: UInt64, group: String, _ result: Result<MessageStore.GroupChangeResult, any Error>,
                                  now: Moment) {
        guard case .success(let made) = result, case .changed(let changes, let members, _) = made else {
            return actions.append(.changeAnswered(ticket: ticket, result))
        }
        start(CopyJob(group: group, purpose: .change(ticket: ticket, made),
                      plan: GroupFanout.changeEntries(changes, members: members.map(\.name)), since: now.deadline, recheckFound: false))
    }

    // MARK: held copies

    /// The member confirmed while its copies of the group were held: what it lacks is copied
    /// from the log, a page at a time while it has room (`GroupFanout.resumePage`), as far as
    /// the log keeps it. One resume per member and group at a time.
    private mutating func resume(_ key: GroupFanout.Resume) {
        guard resuming.insert(key).inserted else { return }
        metrics.groupCopiesResumed.increment()
        actions.append(.readForResume(key, limit: GroupFanout.resumePage))
    }

    private mutating func resumeRead(_ key: GroupFanout.Resume,
                                     _ result: Result<(mark: UInt64, isMember: Bool, log: [(seq: UInt64, bytes: [UInt8])]), any Error>,
                                     now: Moment) {
        guard case .success(let read) = result else {
            resuming.remove(key)
            return
        }
        let entries = GroupFanout.missing(for: key.member, after: read.mark, isMember: read.isMember, log: read.log)
        guard !entries.isEmpty else {
            resuming.remove(key)
            return actions.append(.releaseHeld(member: key.member, group: key.group))
        }
        start(CopyJob(group: key.group, purpose: .resume(key, read: read.log.count), plan: [key.member: entries], since: nil,
                      recheckFound: false))
    }

    // MARK: copies

    private mutating func start(_ job: CopyJob) {
        let id = nextJob
        nextJob += 1
        pass(id, job)
    }

    /// One pass over the job's plan; an empty plan is done at once.
    private mutating func pass(_ id: UInt64, _ job: CopyJob) {
        var job = job
        job.attempt = 1
        job.failed = []
        job.held = []
        job.gaps = [:]
        guard !job.plan.isEmpty else { return passDone(id, job, now: nil) }
        jobs[id] = job
        actions.append(.copy(job: id, group: job.group, job.plan.map { (member: $0.key, entries: $0.value) }))
    }

    /// Each member's copy result: pushes, notices and rechecks now; a member stopped at a gap
    /// has the log read after its mark and what was theirs copied again, `gapAttempts` times.
    private mutating func copied(_ id: UInt64, _ items: [(member: String, entries: [GroupEntry])],
                                 _ results: [Result<MessageStore.MemberCopy, RedisError>], now: Moment) {
        guard var job = jobs[id] else { return }
        let round = GroupFanout.copied(items, results, recheckFound: job.recheckFound)
        for (item, result) in zip(items, results) {
            guard case .failure(let error) = result else { continue }
            logger.warning("group entries not copied to a member; tried again",
                           metadata: ["group": "\(job.group)", "member": "\(item.member)", "error": "\(error)"])
        }
        for (member, copies) in round.copies { actions.append(.copied(member: member, copies)) }
        if !round.held.isEmpty { metrics.groupCopiesHeld.increment(by: Int64(round.held.count)) }
        for member in round.recheck { actions.append(.recheck(member: member)) }
        for (member, nodes) in round.notify { actions.append(.publish(.inbox(user: member), to: nodes)) }
        job.failed.formUnion(round.failed)
        job.held.formUnion(round.held)
        guard !round.gaps.isEmpty else { return passDone(id, job, now: now.deadline) }
        guard job.attempt < Self.gapAttempts else {
            logger.warning("group copies still behind after \(job.attempt) repairs", metadata: ["group": "\(job.group)"])
            job.failed.formUnion(round.gaps.keys)
            return passDone(id, job, now: now.deadline)
        }
        job.gaps = round.gaps
        jobs[id] = job
        actions.append(.readLog(job: id, group: job.group, after: round.gaps.values.map(\.mark).min() ?? 0,
                                upTo: round.gaps.values.map(\.upTo).max() ?? 0))
    }

    private mutating func logRead(_ id: UInt64, _ result: Result<[(seq: UInt64, bytes: [UInt8])], any Error>, now: Moment) {
        guard var job = jobs[id] else { return }
        guard case .success(let log) = result else {
            job.failed.formUnion(job.gaps.keys)
            return passDone(id, job, now: now.deadline)
        }
        let plan = GroupFanout.repairs(job.gaps, log: log)
        guard !plan.isEmpty else { return passDone(id, job, now: now.deadline) }
        job.attempt += 1
        job.gaps = [:]
        jobs[id] = job
        actions.append(.copy(job: id, group: job.group, plan.map { (member: $0.key, entries: $0.value) }))
    }

    /// A pass is done: the members whose copies failed are tried again a moment later while
    /// the job is recent (a message not in every inbox after `retryFor` is not answered: its
    /// sender's resend, found stored, copies again); else the job is done.
    private mutating func passDone(_ id: UInt64, _ job: CopyJob, now: NIODeadline?) {
        if let since = job.since, !job.failed.isEmpty, let now, GroupFanout.retries(since: since, now: now) {
            var next = job
            next.plan = job.plan.filter { job.failed.contains($0.key) }
            jobs[id] = next
            return actions.append(.after(GroupFanout.retryDelay, .copyAgain(job: id)))
        }
        jobs[id] = nil
        done(job)
    }

    private mutating func done(_ job: CopyJob) {
        switch job.purpose {
        case .batch(let settled, let recipients, let retry):
            for (request, outcome) in settled {
                queue.answered(request)
                guard GroupFanout.answersNow(outcome, copiesComplete: job.failed.isEmpty) else { continue }
                actions.append(.answer(request, GroupFanout.answers(id: request.id, group: job.group, outcome: outcome,
                                                                    recipients: recipients)))
            }
            // The next batch of the group goes; what Redis could not take now goes first, a moment later.
            guard let wait = queue.finished(job.group, retry: retry) else { return flush(job.group) }
            actions.append(.after(wait, .storeAgain(group: job.group)))
        case .change(let ticket, let result):
            actions.append(.changeAnswered(ticket: ticket, .success(result)))
        case .resume(let key, let read):
            resuming.remove(key)
            if GroupFanout.resumesAgain(read: read, incomplete: job.failed.contains(key.member), held: job.held.contains(key.member)) {
                resume(key)
            }
        }
    }
}
