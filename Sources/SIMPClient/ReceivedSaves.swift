/// Received messages on their way to the data directory. A message is shown and confirmed
/// only once it is on disk: shown earlier, a client killed before the write would show it
/// again after a restart; confirmed earlier, the server would drop a message the client
/// never kept (a full disk).
///
/// One write is in flight at a time; what the sequencer hands over meanwhile waits and goes in
/// the next one. So no write lands after an earlier one failed: its mark would cover
/// messages that are not on disk. A failed write is given up together with everything
/// waiting behind it: the sequencer goes back to where that write started, and since nothing of
/// it was confirmed, the server pushes those messages again and they are written then.
struct ReceivedSaves: Sendable {
    /// Messages to write in one transaction, with the saved mark they leave on disk.
    /// Whether a batch goes through the conversations' keys before it is written: it holds a
    /// sealed message, or (encrypting) a READ notice, one-to-one or a group's, which is taken
    /// only where its conversation is not encrypted (`SignalRules.plainReadVerdict`).
    static func needsKeys(_ messages: [IncomingMessage], endToEnd: Bool) -> Bool {
        messages.contains { $0.sealed || (endToEnd && $0.kind == .read) }
    }

    struct Batch: Sendable, Equatable {
        /// The delivered mark before these messages: everything up to it is on disk already (or
        /// the server had it confirmed before this session).
        var after: UInt64
        /// The delivered mark after them, written with them.
        var upTo: UInt64
        var messages: [IncomingMessage]
    }

    /// A write that did not happen, and what follows from it.
    struct Failure: Sendable, Equatable {
        /// Where the delivered mark goes back to: what is above it comes again and is taken then.
        var rollBackTo: UInt64
        /// How many messages were given up (the write's and those waiting behind it).
        var count: Int
        /// The highest seq given up: the server holds everything up to it, to push again.
        var upTo: UInt64
        /// The seqs the application has not been told about yet; nil when each was reported
        /// before (a resend of a message that could not be written the first time either).
        var report: ClosedRange<UInt64>?
    }

    /// The highest seq on disk: receipts never confirm more.
    private(set) var savedUpTo: UInt64
    private(set) var writing: Batch?
    private var waiting: Batch?
    /// The highest seq a failure was reported for: a disk that stays full is reported once
    /// per message, not again at each of the server's resends.
    private var reportedUpTo: UInt64

    init(savedUpTo: UInt64) {
        self.savedUpTo = savedUpTo
        reportedUpTo = savedUpTo
    }

    /// Messages the sequencer handed over, in order, moving its delivered mark from `after` to `upTo`:
    /// returns the batch to write now, or nil while a write is in flight.
    mutating func ready(_ messages: [IncomingMessage], after: UInt64, upTo: UInt64) -> Batch? {
        if var queued = waiting {
            queued.messages += messages
            queued.upTo = upTo
            waiting = queued
        } else {
            waiting = Batch(after: after, upTo: upTo, messages: messages)
        }
        return startNext()
    }

    /// The write in flight is on disk: its messages may be shown and confirmed; returns the
    /// next batch to write, if any waits. `opened`: its messages as written, the sealed ones
    /// opened (`ConversationKeys.open`), in the same order.
    mutating func written(opened: [IncomingMessage]? = nil) -> (shown: [IncomingMessage], next: Batch?) {
        guard let done = writing else { return ([], nil) }
        writing = nil
        savedUpTo = max(savedUpTo, done.upTo)
        guard let opened, opened.count == done.messages.count else { return (done.messages, startNext()) }
        return (opened, startNext())
    }

    /// The write in flight did not happen: it and what waits behind it are given up.
    mutating func failed() -> Failure {
        guard let lost = writing else { return Failure(rollBackTo: savedUpTo, count: 0, upTo: savedUpTo, report: nil) }
        writing = nil
        let dropped = waiting
        waiting = nil
        let upTo = dropped?.upTo ?? lost.upTo
        let from = max(lost.after, reportedUpTo) + 1
        let report = upTo >= from ? from...upTo : nil
        reportedUpTo = max(reportedUpTo, upTo)
        return Failure(rollBackTo: lost.after, count: lost.messages.count + (dropped?.messages.count ?? 0), upTo: upTo, report: report)
    }

    private mutating func startNext() -> Batch? {
        guard writing == nil, let next = waiting else { return nil }
        waiting = nil
        writing = next
        return next
    }
}
