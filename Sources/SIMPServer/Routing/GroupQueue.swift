import NIOCore
import SIMPCore
import SIMPRedis

/// A node's group stores, pure: per group in arrival order, one batch in flight per group (a
/// sender's messages keep their order), a resend of a message under way answered by the first.
/// `GroupRelayMachine` composes it.
struct GroupQueue {
    private var queued: [String: [StoreRequest]] = [:]
    private var busy: Set<String> = []
    /// Messages queued or being stored here: a resend meanwhile is answered by the first.
    private var underWay: Set<StoreTracker.Key> = []
    /// Messages in one group script call (Lua's unpack takes some thousands of values).
    let maxBatch: Int

    init(maxBatch: Int) {
        self.maxBatch = maxBatch
    }

    /// Queues the message; true when its group's next batch may go now (none is in flight).
    mutating func enqueue(_ request: StoreRequest, group: String) -> Bool {
        guard underWay.insert(StoreTracker.Key(request)).inserted else { return false }
        queued[group, default: []].append(request)
        return !busy.contains(group)
    }

    /// The group's next batch, oldest first; nil while one is in flight or none waits.
    mutating func nextBatch(_ group: String) -> [StoreRequest]? {
        guard !busy.contains(group), let waiting = queued.removeValue(forKey: group), !waiting.isEmpty else { return nil }
        let batch = Array(waiting.prefix(maxBatch))
        if waiting.count > batch.count { queued[group] = Array(waiting.dropFirst(batch.count)) }
        busy.insert(group)
        return batch
    }

    /// The message's outcome is final: a resend of it is a new store.
    mutating func answered(_ request: StoreRequest) {
        underWay.remove(StoreTracker.Key(request))
    }

    /// The group's batch is done; what Redis could not take now goes first in the next. Returns
    /// how long to wait before it (`GroupFanout.retryDelay` after an outage), then `resume`.
    mutating func finished(_ group: String, retry: [StoreRequest]) -> TimeAmount? {
        guard !retry.isEmpty else {
            busy.remove(group)
            return nil
        }
        queued[group] = retry + (queued[group] ?? [])
        return GroupFanout.retryDelay
    }

    /// The wait after an outage is over: the group's next batch may go.
    mutating func resume(_ group: String) {
        busy.remove(group)
    }
}

extension GroupFanout {
    /// What a stored batch leads to: the messages to store again (Redis did not answer, for
    /// up to `retryFor`), those settled with their outcome, the entries to copy, and whether a
    /// resend found a message stored already (its copies may never have been pushed).
    struct StoredBatch {
        var retry: [StoreRequest] = []
        var settled: [(StoreRequest, GroupStoreOutcome)] = []
        var entries: [(seq: UInt64, bytes: [UInt8])] = []
        var resent = false
    }

    static func stored(_ batch: [StoreRequest], _ outcomes: [GroupStoreOutcome], now: NIODeadline) -> StoredBatch {
        var result = StoredBatch()
        for (request, outcome) in zip(batch, outcomes) {
            switch outcome {
            case .stored(let seq, _):
                result.settled.append((request, .stored(seq: seq, entry: StoredMessage.appending(groupSeq: seq, to: request.bytes))))
            case .unavailable where retries(since: request.ambiguousSince, now: now):
                var again = request
                again.ambiguousSince = request.ambiguousSince ?? now
                result.retry.append(again)
            default:
                result.settled.append((request, outcome))
            }
        }
        // A duplicate whose entry the log no longer holds was copied long ago.
        result.entries = result.settled.compactMap { _, outcome in
            switch outcome {
            case .stored(let seq, let entry), .duplicate(let seq, let entry): entry.isEmpty ? nil : (seq, entry)
            default: nil
            }
        }
        result.resent = result.settled.contains { if case .duplicate = $0.1 { true } else { false } }
        return result
    }

    /// Whether a settled message is answered once its copies are done: a numbered one only
    /// when every copy was made (else its sender's resend copies again), any other at once.
    static func answersNow(_ outcome: GroupStoreOutcome, copiesComplete: Bool) -> Bool {
        copiesComplete || !outcome.isNumbered
    }

    /// What one round of copies came to.
    struct CopyRound {
        /// Members whose copies failed in Redis (tried again).
        var failed: Set<String> = []
        /// Members whose copy stopped at a gap: their mark, whether they were a member at it,
        /// and the highest place of this round's entries.
        var gaps: [String: Gap] = [:]
        /// Per member, the copies to push to their sessions here.
        var copies: [(member: String, copies: [GroupCopy])] = []
        /// Members whose sessions read their inbox: entries found copied already on a resend.
        var recheck: [String] = []
        /// Per member, the other nodes where their devices are (they read their inbox).
        var notify: [(member: String, nodes: [String])] = []
        /// Members whose copies are held (their share of group copies is unconfirmed).
        var held: Set<String> = []
    }

    struct Gap: Equatable {
        var mark: UInt64
        var isMember: Bool
        var upTo: UInt64
    }

    /// Each member's copy result (`recheckFound`: the round copies a resend's entries).
    static func copied(_ items: [(member: String, entries: [GroupEntry])], _ results: [Result<MessageStore.MemberCopy, RedisError>],
                       recheckFound: Bool) -> CopyRound {
        var round = CopyRound()
        for (item, result) in zip(items, results) {
            switch result {
            case .success(let copy):
                let copies = pushes(item.member, item.entries, copy)
                let foundCopied = recheckFound && zip(item.entries, copy.seqs).contains { entry, seq in seq == 0 && entry.seq <= copy.mark }
                if !copies.isEmpty { round.copies.append((item.member, copies)) } else if foundCopied { round.recheck.append(item.member) }
                if !copy.nodes.isEmpty { round.notify.append((item.member, copy.nodes)) }
                if copy.gap { round.gaps[item.member] = Gap(mark: copy.mark, isMember: copy.isMember, upTo: item.entries.map(\.seq).max() ?? 0) }
                if copy.held { round.held.insert(item.member) }
            case .failure:
                round.failed.insert(item.member)
            }
        }
        return round
    }

    private static func pushes(_ member: String, _ entries: [GroupEntry], _ copy: MessageStore.MemberCopy) -> [GroupCopy] {
        var copies: [GroupCopy] = []
        for (entry, seq) in zip(entries, copy.seqs) where seq > 0 {
            guard let message = try? Simp_Message(serializedBytes: entry.bytes) else { continue }
            let bytes = StoredMessage.appending(seq: seq, to: entry.bytes)
            copies.append(GroupCopy(seq: seq, push: Push(stored: message, bytes: bytes, recipient: member)))
        }
        return copies
    }

    /// What the members at gaps lack, from the log read after the lowest of their marks.
    static func repairs(_ gaps: [String: Gap], log: [(seq: UInt64, bytes: [UInt8])]) -> [String: [GroupEntry]] {
        var plan: [String: [GroupEntry]] = [:]
        for (member, gap) in gaps {
            let missing = missing(for: member, after: gap.mark, isMember: gap.isMember, log: log.filter { $0.seq <= gap.upTo })
            if !missing.isEmpty { plan[member] = missing }
        }
        return plan
    }
}

extension GroupFanout {
    /// A member's held copies of one group, being resumed.
    struct Resume: Hashable, Sendable {
        var member: String
        var group: String
    }

    /// Log entries read per resume of held copies.
    static let resumePage = 256

    /// Whether a resume goes on with the next page: the page was full (more may follow) and
    /// the member took all of it (neither held again nor left behind a gap or a failure).
    static func resumesAgain(read: Int, incomplete: Bool, held: Bool) -> Bool {
        read >= resumePage && !incomplete && !held
    }
}
