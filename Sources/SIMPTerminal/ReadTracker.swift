import SIMPClient

/// Which messages a REPL showed and has not yet marked read, and which are due to be marked:
/// those shown while their sender's conversation is open (`/to`), and all shown from a user
/// on `/read USER`. Pure: the REPL sends what `takeDue` hands over.
public struct ReadTracker: Sendable {
    /// Shown, not marked, oldest first; the oldest are forgotten past `capacity`.
    private var unread: [IncomingMessage] = []
    private var due: [IncomingMessage] = []
    let capacity: Int

    public init(capacity: Int = 1000) {
        self.capacity = capacity
    }

    /// Whether a message can be marked read: a user's message to this user (not a notice, nor a
    /// group's, nor one sent from another of the user's devices), numbered.
    public static func markable(_ message: IncomingMessage) -> Bool {
        message.kind == .message && message.group == nil && message.fromDevice.isEmpty && message.seq > 0
    }

    /// `message` was shown; with its sender's conversation open it is read now.
    public mutating func shown(_ message: IncomingMessage, conversation: String?) {
        guard Self.markable(message) else { return }
        if message.from == conversation {
            due.append(message)
            return
        }
        unread.append(message)
        if unread.count > capacity { unread.removeFirst(unread.count - capacity) }
    }

    /// Everything shown from `peer` is due to be marked read; how many.
    @discardableResult
    public mutating func markAll(from peer: String) -> Int {
        let taken = unread.filter { $0.from == peer }
        unread.removeAll { $0.from == peer }
        due += taken
        return taken.count
    }

    /// Another of the user's devices read it.
    public mutating func readElsewhere(_ id: String) {
        unread.removeAll { $0.id == id }
    }

    /// The messages to mark read now.
    public mutating func takeDue() -> [IncomingMessage] {
        defer { due = [] }
        return due
    }
}
