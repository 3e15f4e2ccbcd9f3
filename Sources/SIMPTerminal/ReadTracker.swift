import SIMPClient
import SIMPCore

/// Which messages a REPL showed and has not yet marked read, and which are due to be marked:
/// those shown while their conversation is open (`/to USER`, `/to #GROUP`), and all shown in a
/// conversation on `/read USER` or `/read #GROUP`. Pure: the REPL sends what `takeDue` hands over.
public struct ReadTracker: Sendable {
    /// Shown, not marked, oldest first; the oldest are forgotten past `capacity`.
    private var unread: [IncomingMessage] = []
    private var due: [IncomingMessage] = []
    let capacity: Int

    public init(capacity: Int = 1000) {
        self.capacity = capacity
    }

    /// Whether a message can be marked read: a user's message to this user (not a notice, nor
    /// one sent from another of the user's devices) or to one of its groups (not a change; with
    /// its place in the group's order), numbered. Every group message names its sender's
    /// device: the user's own among them are left out by `SIMPClient.markRead`.
    public static func markable(_ message: IncomingMessage) -> Bool {
        guard message.kind == .message, message.groupChange == nil, message.seq > 0 else { return false }
        return message.group == nil ? message.fromDevice.isEmpty : message.groupSeq > 0
    }

    /// The conversation a message is shown in: its sender, or `#NAME` for a group's.
    static func conversation(of message: IncomingMessage) -> String {
        message.group.map(GroupName.address) ?? message.from
    }

    /// `message` was shown; with its conversation open it is read now.
    public mutating func shown(_ message: IncomingMessage, conversation: String?) {
        guard Self.markable(message) else { return }
        if Self.conversation(of: message) == conversation {
            due.append(message)
            return
        }
        unread.append(message)
        if unread.count > capacity { unread.removeFirst(unread.count - capacity) }
    }

    /// Everything shown from `peer` (one to one), or in the group `peer` (`#NAME`), is due to
    /// be marked read; how many.
    @discardableResult
    public mutating func markAll(from peer: String) -> Int {
        let taken = unread.filter { Self.conversation(of: $0) == peer }
        unread.removeAll { Self.conversation(of: $0) == peer }
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
