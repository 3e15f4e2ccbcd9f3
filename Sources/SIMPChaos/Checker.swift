/// What the checker holds against the promise (docs/GUARANTEES.md), one kind per rule.
public enum ViolationKind: String, CaseIterable, Codable, Sendable {
    /// Accepted, never failed, and its recipient never showed it.
    case lostAccepted = "lost-accepted"
    /// Shown more than once by its recipient (over all of the recipient's runs).
    case duplicate
    /// Shown after a later message of the same sender to the same recipient.
    case reordered
    /// Failed for certain, yet its recipient showed it.
    case failedYetReceived = "failed-yet-received"
    /// Its sender was told `delivered`, yet its recipient never showed it.
    case deliveredNotShown = "delivered-not-shown"
    /// Neither delivered nor failed by the end of the run.
    case unresolved
    /// Two final states that exclude each other: delivered and failed, or accepted and then
    /// failed for certain (an accepted message stays accepted).
    case contradictory
    /// A recipient reported a sealed message it could not decrypt (`undecryptable`): in a run
    /// where every device was a member of the conversation when the message was sent, every
    /// message must decrypt (issue 44, item 5).
    case undecryptable
    /// In an end-to-end encrypted run, a message shown that was not decrypted: it travelled in
    /// plaintext.
    case notEncrypted = "not-encrypted"
}

public struct Violation: Equatable, Codable, Sendable, CustomStringConvertible {
    public var kind: ViolationKind
    public var id: String
    public var detail: String

    public var description: String { "\(kind.rawValue) \(id): \(detail)" }
}

/// The tally over every client's log.
public struct CheckReport: Equatable, Codable, Sendable {
    /// Distinct message ids the senders' logs know of.
    public var messages = 0
    public var accepted = 0
    public var delivered = 0
    /// Failed for certain (never to be delivered).
    public var failed = 0
    /// Failed with "it may still be delivered": either outcome is allowed.
    public var ambiguousFailed = 0
    /// Of those, the ones their recipient showed.
    public var ambiguousReceived = 0
    /// Shown by a recipient, sent by a client whose log has no line for it at all (killed
    /// between writing it to its outbox and printing its id).
    public var unloggedSends = 0
    /// Accepted and lost where the run said Redis might lose acknowledged writes (an AOF tail
    /// cut): the documented trade-off, not a violation.
    public var excusedLost = 0
    /// Delivered and never shown, but in its recipient's data directory: the client was killed
    /// between writing it and showing it (docs/GUARANTEES.md: "in the local history but was not
    /// shown"), the documented window, counted here and not as a violation.
    public var keptNotShown = 0
    /// Distinct messages shown decrypted (`"encrypted":true`) by their recipient.
    public var decrypted = 0
    /// `undecryptable` reports over every recipient's runs (each is also a violation).
    public var undecryptable = 0
    /// How many messages failed, by the reason's first words (up to its first colon).
    public var failureReasons: [String: Int] = [:]
    public var violations: [Violation] = []

    public func count(_ kind: ViolationKind) -> Int { violations.filter { $0.kind == kind }.count }
}

/// Checks the promise over the logs of all clients of a run: every accepted message shown
/// exactly once, in per-conversation order, or failed with a reason; nothing failed for certain
/// yet shown; no `delivered` for what was not shown; nothing left unresolved; every message a
/// recipient received decrypted (no `undecryptable`) and, in an end-to-end encrypted run, none
/// shown that was not decrypted. Pure: the runner reads the files, this only looks at events.
public enum Checker {
    static let ambiguity = "may still be delivered"

    /// `excused`: ids accepted where the run knowingly let Redis lose acknowledged writes.
    /// `keptOnDisk`: ids found in the recipients' data directories after the run.
    /// `endToEnd`: every client ran end-to-end encrypted, so every message shown must have been
    /// decrypted.
    public static func check(_ logs: [ClientLog], excused: Set<String> = [], keptOnDisk: Set<String> = [],
                             endToEnd: Bool = false) -> CheckReport {
        var fates: [String: SenderSide] = [:]
        var order: [String] = []
        for log in logs {
            for event in log.events {
                let id: String, to: String
                switch event {
                case .sent(let i, let t), .accepted(let i, let t, _), .delivered(let i, let t, _), .failed(let i, let t, _):
                    (id, to) = (i, t)
                default:
                    continue
                }
                if fates[id] == nil {
                    fates[id] = SenderSide(sender: log.user, recipient: to)
                    order.append(id)
                }
                switch event {
                case .sent: fates[id]!.sent = true
                case .accepted: fates[id]!.accepted = true
                case .delivered: fates[id]!.delivered = true
                case .failed(_, _, let reason): fates[id]!.failures.append(reason)
                default: break
                }
            }
        }

        var shown: [String: Int] = [:]
        var report = CheckReport()
        var unlogged = Set<String>()
        var decrypted = Set<String>()
        var undecryptable = Set<String>()
        for log in logs {
            // Per sender: the highest running count shown so far.
            var highest: [String: Int] = [:]
            for event in log.events {
                if case .undecryptable(let id, let from, let reason) = event {
                    report.undecryptable += 1
                    undecryptable.insert(id)
                    report.violations.append(Violation(kind: .undecryptable, id: id,
                                                       detail: "\(log.user) could not decrypt a message from \(from): \(reason)"))
                    continue
                }
                guard case .message(let id, let from, let text, _, let encrypted) = event else { continue }
                if encrypted {
                    decrypted.insert(id)
                } else if endToEnd {
                    report.violations.append(Violation(kind: .notEncrypted, id: id,
                                                       detail: "\(log.user) showed \(text) from \(from), not decrypted (it travelled in plaintext)"))
                }
                shown[id, default: 0] += 1
                if shown[id] == 2 {
                    report.violations.append(Violation(kind: .duplicate, id: id, detail: "\(log.user) showed \(text) from \(from) again"))
                }
                if fates[id] == nil { unlogged.insert(id) }
                guard shown[id] == 1, let index = MessageText.index(text, sender: from) else { continue }
                if let top = highest[from], index < top {
                    report.violations.append(Violation(kind: .reordered, id: id,
                                                       detail: "\(log.user) showed \(text) after \(MessageText.make(sender: from, index: top))"))
                }
                highest[from] = max(highest[from] ?? index, index)
            }
        }
        report.unloggedSends = unlogged.count
        report.decrypted = decrypted.count

        for id in order {
            let fate = fates[id]!
            let received = shown[id, default: 0] > 0
            let certainFailure = fate.failures.first { !$0.contains(ambiguity) }
            let ambiguous = !fate.failures.isEmpty && certainFailure == nil
            let where_ = "\(fate.sender) -> \(fate.recipient)"
            report.messages += 1
            if fate.accepted { report.accepted += 1 }
            if fate.delivered { report.delivered += 1 }
            if certainFailure != nil { report.failed += 1 }
            if let reason = fate.failures.first {
                report.failureReasons[String(reason.prefix { $0 != ":" }), default: 0] += 1
            }
            if ambiguous {
                report.ambiguousFailed += 1
                if received { report.ambiguousReceived += 1 }
            }
            if !received && undecryptable.contains(id) {
                // Its recipient had it and said it could not decrypt it: that violation is the
                // cause, not a loss.
                continue
            }
            if fate.delivered && !received && keptOnDisk.contains(id) {
                report.keptNotShown += 1
                continue
            }
            if let reason = certainFailure, received {
                report.violations.append(Violation(kind: .failedYetReceived, id: id, detail: "\(where_): failed (\(reason)) yet shown"))
            }
            if fate.delivered && !received {
                report.violations.append(Violation(kind: .deliveredNotShown, id: id, detail: "\(where_): delivered, never shown"))
            }
            if excused.contains(id) && !received {
                // Redis was let lose it: whatever the sender heard after is the trade-off too.
                if fate.accepted { report.excusedLost += 1 }
                continue
            }
            if fate.delivered && !fate.failures.isEmpty {
                report.violations.append(Violation(kind: .contradictory, id: id,
                                                   detail: "\(where_): delivered and failed (\(fate.failures[0]))"))
            } else if fate.accepted, let reason = certainFailure {
                report.violations.append(Violation(kind: .contradictory, id: id, detail: "\(where_): accepted, then failed (\(reason))"))
            }
            if fate.accepted && !received && fate.failures.isEmpty {
                report.violations.append(Violation(kind: .lostAccepted, id: id, detail: "\(where_): accepted, never shown"))
            }
            if !fate.delivered && fate.failures.isEmpty {
                report.violations.append(Violation(kind: .unresolved, id: id,
                                                   detail: "\(where_): \(fate.accepted ? "accepted" : "sent"), neither delivered nor failed"))
            }
        }
        return report
    }

    /// What one message's sender was told, over all of the sender's runs.
    private struct SenderSide {
        var sender: String
        var recipient: String
        var sent = false
        var accepted = false
        var delivered = false
        var failures: [String] = []
    }
}
