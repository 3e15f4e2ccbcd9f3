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
/// in that order (`GroupFanout` decides who gets what). The sender is answered once the
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
    /// A member's numbering floor here (`Session.numberingFloor`).
    var floor: @Sendable (_ member: String) -> UInt64? = { _ in nil }

    private var queued: [String: [StoreRequest]] = [:]
    private var busy: Set<String> = []
    /// Messages queued or being stored here: a resend meanwhile is answered by the first.
    private var underWay: Set<StoreTracker.Key> = []
    /// Messages in one group script call (Lua's unpack takes some thousands of values).
    private let maxBatch: Int
    /// Gap repairs of one copy before it is left to the next message's (or resend's).
    static let gapAttempts = 3

    init(store: MessageStore, loop: any EventLoop, logger: Logger, maxBatch: Int) {
        self.store = store
        self.loop = loop
        self.logger = logger
        self.maxBatch = maxBatch
    }

    func enqueue(_ request: StoreRequest, group: String) {
        guard underWay.insert(StoreTracker.Key(request)).inserted else { return }
        queued[group, default: []].append(request)
        guard !busy.contains(group) else { return }
        loop.execute { [self] in flush(group) }
    }

    private func flush(_ group: String) {
        guard !busy.contains(group), let waiting = queued.removeValue(forKey: group), !waiting.isEmpty else { return }
        let batch = Array(waiting.prefix(maxBatch))
        if waiting.count > batch.count { queued[group] = Array(waiting.dropFirst(batch.count)) }
        busy.insert(group)
        store.storeInGroup(group, batch, on: loop).whenSuccess { [self] stored in
            let now = NIODeadline.now()
            var retry: [StoreRequest] = []
            var settled: [(StoreRequest, GroupStoreOutcome)] = []
            for (request, outcome) in zip(batch, stored.outcomes) {
                switch outcome {
                case .stored(let seq, _):
                    settled.append((request, .stored(seq: seq, entry: StoredMessage.appending(groupSeq: seq, to: request.bytes))))
                case .unavailable where GroupFanout.retries(since: request.ambiguousSince, now: now):
                    var again = request
                    again.ambiguousSince = request.ambiguousSince ?? now
                    retry.append(again)
                default:
                    settled.append((request, outcome))
                }
            }
            // A duplicate whose entry the log no longer holds was copied long ago.
            let entries = settled.compactMap { _, outcome -> (seq: UInt64, bytes: [UInt8])? in
                switch outcome {
                case .stored(let seq, let entry), .duplicate(let seq, let entry): entry.isEmpty ? nil : (seq, entry)
                default: nil
                }
            }
            let answered = settled
            let again = retry
            let resent = settled.contains { if case .duplicate = $0.1 { true } else { false } }
            let plan = GroupFanout.messageEntries(entries, members: stored.members)
            copyAll(group, plan, since: now, recheckFound: resent) { [self] complete in
                let recipients = max(0, stored.members.count - 1)
                for (request, outcome) in answered {
                    underWay.remove(StoreTracker.Key(request))
                    guard complete || !outcome.isNumbered else { continue }
                    answer(request, GroupFanout.answers(id: request.id, group: group, outcome: outcome, recipients: recipients))
                }
                finish(group, retry: again)
            }
        }
    }

    /// The next batch of the group goes; what Redis could not take now goes first, a moment later.
    private func finish(_ group: String, retry: [StoreRequest]) {
        guard !retry.isEmpty else {
            busy.remove(group)
            return flush(group)
        }
        queued[group] = retry + (queued[group] ?? [])
        loop.scheduleTask(in: GroupFanout.retryDelay) { [self] in
            busy.remove(group)
            flush(group)
        }
    }

    /// Copies until every copy is made, or gives up after `GroupFanout.retryFor` (a message not
    /// in every inbox then is not answered: its sender's resend, found stored, copies again).
    /// Only the members whose copies failed are tried again.
    private func copyAll(_ group: String, _ plan: [String: [GroupEntry]], since: NIODeadline, recheckFound: Bool = false,
                         done: @escaping @Sendable (Bool) -> Void) {
        deliver(group, plan, recheckFound: recheckFound) { [self] incomplete in
            guard !incomplete.isEmpty, GroupFanout.retries(since: since, now: .now()) else { return done(incomplete.isEmpty) }
            let rest = plan.filter { incomplete.contains($0.key) }
            loop.scheduleTask(in: GroupFanout.retryDelay) { [self] in copyAll(group, rest, since: since, recheckFound: recheckFound, done: done) }
        }
    }

    /// Makes one membership change and copies its entries to whom they concern; answered once
    /// they are copied (a failed copy is repaired by the member's next entry).
    func change(_ action: MessageStore.GroupChangeAction, group: String, by: String, users: [String],
                maxMembers: Int) -> EventLoopFuture<MessageStore.GroupChangeResult> {
        let entries = users.map { ($0, Self.changeEntry(action, group: group, member: $0, by: by)) }
        return store.changeGroup(action, group: group, by: by, users: entries, maxMembers: maxMembers, on: loop).flatMap { [self] result in
            guard case .changed(let changes, let members) = result else { return loop.makeSucceededFuture(result) }
            let promise = loop.makePromise(of: MessageStore.GroupChangeResult.self)
            copyAll(group, GroupFanout.changeEntries(changes, members: members.map(\.name)), since: .now()) { _ in promise.succeed(result) }
            return promise.futureResult
        }
    }

    private static func changeEntry(_ action: MessageStore.GroupChangeAction, group: String, member: String, by: String) -> [UInt8] {
        var message = Simp_Message()
        switch action {
        case .create, .add: message.type = .groupAdded
        case .remove: message.type = .groupRemoved
        case .leave: message.type = .groupLeft
        case .admin: return []
        }
        message.content = member
        message.messageID = "g" + randomBytes(8).map { String($0, radix: 16) }.joined()
        message.fromUser = by
        message.toUser = GroupName.address(group)
        message.serverTime = Accounts.nowMillis()
        return (try? message.serializedBytes()) ?? []
    }

    /// Copies each member's entries; `done` with the members whose copies are not all made.
    /// `recheckFound`: entries found copied already make the member's sessions read their inbox
    /// (a resend of a stored message: the node that copied it may have died before pushing).
    private func deliver(_ group: String, _ plan: [String: [GroupEntry]], recheckFound: Bool, attempt: Int = 1,
                         done: @escaping @Sendable (Set<String>) -> Void) {
        let items = plan.map { (member: $0.key, entries: $0.value) }
        store.deliver(group: group, items, floor: floor, on: loop).whenSuccess { [self] results in
            var failed = Set<String>()
            var gaps: [String: (mark: UInt64, isMember: Bool, upTo: UInt64)] = [:]
            for (item, result) in zip(items, results) {
                switch result {
                case .success(let copy):
                    pushCopies(item.member, item.entries, copy, recheckFound: recheckFound)
                    if copy.gap { gaps[item.member] = (copy.mark, copy.isMember, item.entries.map(\.seq).max() ?? 0) }
                case .failure(let error):
                    failed.insert(item.member)
                    logger.warning("group entries not copied to a member; tried again",
                                   metadata: ["group": "\(group)", "member": "\(item.member)", "error": "\(error)"])
                }
            }
            guard !gaps.isEmpty else { return done(failed) }
            guard attempt < Self.gapAttempts else {
                logger.warning("group copies still behind after \(attempt) repairs", metadata: ["group": "\(group)"])
                return done(failed.union(gaps.keys))
            }
            let failedHere = failed
            repair(group, gaps, recheckFound: recheckFound, attempt: attempt) { done(failedHere.union($0)) }
        }
    }

    /// A member's copy stopped at a gap (another node's entry not copied yet, or one from while
    /// they were out): the log after their mark is read and what was theirs copied again.
    private func repair(_ group: String, _ gaps: [String: (mark: UInt64, isMember: Bool, upTo: UInt64)], recheckFound: Bool,
                        attempt: Int, done: @escaping @Sendable (Set<String>) -> Void) {
        let low = gaps.values.map(\.mark).min() ?? 0
        let high = gaps.values.map(\.upTo).max() ?? 0
        store.groupLog(group, after: low, upTo: high, on: loop).whenComplete { [self] result in
            guard case .success(let log) = result else { return done(Set(gaps.keys)) }
            var plan: [String: [GroupEntry]] = [:]
            for (member, gap) in gaps {
                let missing = GroupFanout.missing(for: member, after: gap.mark, isMember: gap.isMember, log: log.filter { $0.seq <= gap.upTo })
                if !missing.isEmpty { plan[member] = missing }
            }
            guard !plan.isEmpty else { return done([]) }
            deliver(group, plan, recheckFound: recheckFound, attempt: attempt + 1, done: done)
        }
    }

    private func pushCopies(_ member: String, _ entries: [GroupEntry], _ copy: MessageStore.MemberCopy, recheckFound: Bool) {
        var copies: [GroupCopy] = []
        for (entry, seq) in zip(entries, copy.seqs) where seq > 0 {
            guard let message = try? Simp_Message(serializedBytes: entry.bytes) else { continue }
            let bytes = StoredMessage.appending(seq: seq, to: entry.bytes)
            copies.append(GroupCopy(seq: seq, push: Push(stored: message, bytes: bytes, recipient: member)))
        }
        let foundCopied = recheckFound && zip(entries, copy.seqs).contains { entry, seq in seq == 0 && entry.seq <= copy.mark }
        if !copies.isEmpty { copied(member, copies) } else if foundCopied { recheck(member) }
        if !copy.nodes.isEmpty { store.publish(.inbox(user: member), to: copy.nodes, on: loop) }
    }
}
