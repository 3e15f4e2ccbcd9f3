import NIOCore
import SIMPCore
import SIMPRedis

/// When a write or a read counts as on the replicas (`--redis-min-replicas`), pure: the
/// store's replication policy, which `MessageStore` carries out.
struct ReplicaRule: Sendable, Equatable {
    /// Replicas that must have a store before it counts as done (0: none asked for).
    var minReplicas: Int
    /// How long WAIT waits for them.
    var timeoutMillis: Int64

    /// A store counts as done once WAIT saw `minReplicas` replicas take it.
    func counts(replicas: Int64) -> Bool {
        replicas >= Int64(minReplicas)
    }

    /// What a request's store answers, given what the script did and how many replicas took it.
    /// A store the replicas did not confirm in time is in doubt: the master has it, a failover
    /// may lose it. It is stored again (found as a duplicate) and waited for again, like any
    /// store whose answer was lost.
    func answer(_ made: StoreOutcome, replicas: Int64) -> StoreOutcome {
        guard !counts(replicas: replicas) else { return made }
        switch made {
        case .stored, .duplicate:
            return .unavailable(RedisError(.notReady, "stored, but \(replicas) of \(minReplicas) Redis replicas confirmed it within \(timeoutMillis) ms",
                                           mayHaveRun: true))
        default: return made
        }
    }

    /// An inbox read for a session counts when WAIT saw `minReplicas` replicas, or when the
    /// shard has fewer online than that (one failed over and not yet given a new replica): no
    /// replica is there to take over without what it read, and what it holds was accepted (it
    /// stores nothing new meanwhile), so holding it back would strand it until an operator acts.
    func readCounts(confirmedBy: Int64, online: Int64) -> Bool {
        confirmedBy >= Int64(minReplicas) || online < Int64(minReplicas)
    }
}

/// What a store batch's replies come to, pure: per request, the outcome its sender is answered
/// with (`ReplicaRule.answer`) and what Redis did (for the senders' history copies); the
/// notices to send to the recipients' other nodes (only for a store that counts as done: one
/// the replicas did not confirm will be stored again, and announced then); each recipient's
/// inbox depth after it.
struct StoreSettlement {
    var outcomes: [StoreOutcome]
    var made: [StoreOutcome]
    var notices: [(node: String, user: String)] = []
    var depths: [Int] = []

    /// `groups`: the batch's positions per recipient (`MessageStore.byRecipient`), one answer each.
    init(_ batch: [StoreRequest], groups: [[Int]], answers: [RedisReplicated], rule: ReplicaRule) {
        made = [StoreOutcome](repeating: .unavailable(RedisError(.protocolViolation, "no reply")), count: batch.count)
        outcomes = made
        for (indices, answer) in zip(groups, answers) {
            if let depth = MessageStore.inboxDepth(answer.reply) { depths.append(depth) }
            let replicated = rule.counts(replicas: answer.replicas)
            if replicated { notices += MessageStore.recipientNodes(answer.reply).map { ($0, batch[indices[0]].to) } }
            let parts = MessageStore.outcomes(answer.reply, count: indices.count)
            for (index, outcome) in zip(indices, parts) {
                made[index] = MessageStore.withStoredBytes(outcome, batch[index])
                outcomes[index] = rule.answer(made[index], replicas: answer.replicas)
            }
        }
    }
}

/// When notices whose SPUBLISH failed (their channel's master just failed over, say) are sent
/// again, pure: `attempts` in all, the n-th retry 250 ms x n after the n-th send. A lost notice
/// leaves the message unpushed until its recipient's next message or reconnect; one that
/// reached a node twice costs it one more inbox read.
struct NoticeRetry: Equatable, Sendable {
    static let attempts = 5

    /// The send these replies answer: 1 for the first.
    var attempt = 1

    /// What a send's replies come to (nil: the pipeline failed as a whole): the notices to send
    /// again, when, and as which attempt; nil when all were taken, or after the last attempt.
    func next<Notice>(_ sent: [Notice], replies: [RedisValue]?) -> (after: TimeAmount, again: [Notice], retry: NoticeRetry)? {
        let failed = replies.map { replies in zip(sent, replies).filter { (try? $0.1.checked()) == nil }.map(\.0) } ?? sent
        guard !failed.isEmpty, attempt < Self.attempts else { return nil }
        return (.milliseconds(250 * Int64(attempt)), failed, NoticeRetry(attempt: attempt + 1))
    }
}

/// What a numbering repair's move comes to (`MessageStore.repairNumbering`), pure: done when it
/// moved entries past the client's `lastSeq` or had none to move; otherwise a store changed the
/// inbox between the check and the move (the move's script refuses then), so the check runs
/// again, `attempts` in all, and after the last the repair fails.
struct NumberingRepair: Equatable, Sendable {
    static let attempts = 3

    /// The check and move this outcome answers: 1 for the first.
    var attempt = 1

    enum Next: Equatable, Sendable {
        case done(moved: Int)
        case again(NumberingRepair)
        case failed
    }

    /// `moved`: the entries the move moved; `entries`: how many the check found to move.
    func next(moved: Int, entries: Int) -> Next {
        if moved > 0 || entries == 0 { return .done(moved: moved) }
        return attempt < Self.attempts ? .again(NumberingRepair(attempt: attempt + 1)) : .failed
    }
}
