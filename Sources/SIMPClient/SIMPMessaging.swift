/// The calls an application makes of a client: connect, send and follow a message, take the
/// events and the connection's state, read the local history. Application code that takes an
/// `any SIMPMessaging` (or a generic `some SIMPMessaging`) runs against `SIMPClient` in the
/// product and against a small fake of its own in its tests; a fake makes its handles with a
/// `MessageStatusFeed`.
public protocol SIMPMessaging: AnyObject, Sendable {
    /// Where the connection stands now.
    var connectionState: ConnectionState { get }
    /// The connection's state now, then each change.
    func connectionStates() -> AsyncStream<ConnectionState>
    /// A stream of every event from now on, for one consumer, at most `limit` waiting.
    func events(bufferingNewest limit: Int) -> AsyncStream<ClientEvent>

    func connect(user: String, password: String) async throws(ClientError)
    func connect(user: String, token: LoginToken) async throws(ClientError)
    func disconnect() async

    /// Queues a text message; its id.
    nonisolated(nonsending) func send(to user: String, text: String) async throws(ClientError) -> String
    /// Queues a text message; a handle on its status.
    nonisolated(nonsending) func sendTracked(to user: String, text: String) async throws(ClientError) -> MessageHandle

    /// A conversation's messages, newest last, older than `position` when given.
    func messages(in conversation: String, before position: Int64?, limit: Int) async throws(ClientError) -> [LocalMessage]
    /// Every conversation with its last message and unread count.
    func conversations() async throws(ClientError) -> [ConversationSummary]
    /// Marks a conversation's received messages shown (up to `position`); those it marked.
    @discardableResult
    func markShown(in conversation: String, upTo position: Int64?) async throws(ClientError) -> [LocalMessage]
}

extension SIMPMessaging {
    /// A stream of every event from now on, with the default buffer (`SIMPClient.defaultEventBuffer`).
    public func events() -> AsyncStream<ClientEvent> {
        events(bufferingNewest: SIMPClient.defaultEventBuffer)
    }

    /// A conversation's latest 50 messages, or those before `position`.
    public func messages(in conversation: String, before position: Int64? = nil) async throws(ClientError) -> [LocalMessage] {
        try await messages(in: conversation, before: position, limit: 50)
    }

    /// Marks all of a conversation's received messages shown.
    @discardableResult
    public func markShown(in conversation: String) async throws(ClientError) -> [LocalMessage] {
        try await markShown(in: conversation, upTo: nil)
    }
}

extension SIMPClient: SIMPMessaging {}

/// The statuses of a fake `SIMPMessaging`'s messages: it makes their handles and moves them
/// along as the client would, so the application's code that follows a `MessageHandle` runs
/// the same in a test.
public final class MessageStatusFeed: Sendable {
    let watchers = StatusWatchers()

    public init() {}

    /// A handle on the message `id` to `to`, from its first stage (`sending`).
    public func handle(id: String, to: String) -> MessageHandle {
        watchers.started(id, to: to)
        return MessageHandle(id: id, to: to, watchers: watchers)
    }

    /// The message's new status, to its handles.
    public func publish(_ status: MessageStatus) {
        watchers.publish(status)
    }

    /// Ends every handle's updates, as closing the client does.
    public func finish() {
        watchers.finishAll()
    }
}
