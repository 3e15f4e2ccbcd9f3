import Foundation
import NIOCore
import SIMPCore

/// The data directory (its outbox, received messages and local history) and the status of
/// each sent message, as the driver carries them out: nothing here decides (`HistoryEntry`
/// and `StatusBook` do).
extension SIMPClient {
    // MARK: the local history (public)

    /// Opens `user`'s local history in the data directory without connecting, so the application
    /// reads it offline (`messages(in:)`, `conversations()`). `connect` opens it too; a later
    /// `connect` must be as the same user.
    public func openHistory(user: String) async throws(ClientError) {
        guard configuration.dataDirectory != nil else { throw ClientError("no data directory: there is no local history") }
        do {
            try await openStore(user: user)
        } catch {
            throw Self.clientError(error)
        }
    }

    /// The latest `limit` messages of a conversation (the other user, or `#NAME`) before
    /// `position` (nil: the latest), oldest first, from the data directory: received and sent,
    /// each sent one with its status. Works offline, once the history is open.
    public func messages(in conversation: String, before position: Int64? = nil, limit: Int = 50) async throws(ClientError) -> [LocalMessage] {
        let store = try await openedStore()
        do {
            return try await store.messages(in: conversation, before: position, limit: limit)
        } catch {
            throw ClientError("cannot read the local history in \(store.path): \(error)")
        }
    }

    /// Every conversation of the local history, the latest first: its last message and how
    /// many received messages were not marked shown. Works offline, once the history is open.
    public func conversations() async throws(ClientError) -> [ConversationSummary] {
        let store = try await openedStore()
        do {
            return try await store.conversations()
        } catch {
            throw ClientError("cannot read the local history in \(store.path): \(error)")
        }
    }

    /// The application showed a conversation's received messages up to `position` (nil: all):
    /// they no longer count as unread. While connected, their senders are told they were read
    /// (`markRead`, group messages too; only if the user has read receipts on);
    /// offline only the local history changes. With `confirmWhenShown`, they are confirmed
    /// too: their senders hear **delivered**. Returns the messages marked.
    @discardableResult
    public func markShown(in conversation: String, upTo position: Int64? = nil) async throws(ClientError) -> [LocalMessage] {
        let store = try await openedStore()
        let marked: [LocalMessage]
        do {
            marked = try await store.markShown(in: conversation, upTo: position)
        } catch {
            throw ClientError("cannot mark messages shown in \(error.path): \(error.reason)")
        }
        let marks = LocalMessage.readMarks(marked)
        if configuration.confirmWhenShown {
            showed(marked.filter { !$0.isOutgoing }.map(\.seq), marks: marks)
            return marked
        }
        guard connectedServer != nil else { return marked }
        try? await tellReads(marks)
        return marked
    }

    // MARK: statuses (public)

    /// Sends a text like `send(to:text:)` and returns a handle on its status.
    public nonisolated(nonsending) func sendTracked(to user: String, text: String) async throws(ClientError) -> MessageHandle {
        let prepared = try await madeText(text, to: user)
        let made = prepared.made
        statusWatchers.started(made.id, to: user)
        track(made.id)
        _ = try await queue(prepared)
        return MessageHandle(id: made.id, to: user, watchers: statusWatchers)
    }

    /// A handle on the status of a message this client sent (`send` returned `id`). With a data
    /// directory the library keeps every sent message's status (the history records it);
    /// without one, only from a handle's making on (`sendTracked` makes it before the send), so
    /// a plain `send` pays for no bookkeeping: ask for the handle before the message's events.
    public func status(of id: String, to user: String) -> MessageHandle {
        statusWatchers.started(id, to: user)
        track(id)
        return MessageHandle(id: id, to: user, watchers: statusWatchers)
    }

    /// With `confirmWhenShown`: the messages at these seqs were shown, so their receipt goes,
    /// then these read marks, each once what it marks is confirmed (`ClientEngine.shown`).
    func showed(_ seqs: [UInt64], marks: [Simp_ReadMark]) {
        guard !seqs.isEmpty || !marks.isEmpty else { return }
        guard loop.inEventLoop else { return loop.execute { [self] in handle(.shown(seqs, marks: marks)) } }
        handle(.shown(seqs, marks: marks))
    }

    /// Tells the engine a handle follows `id`, before anything sent after this call.
    private func track(_ id: String) {
        guard loop.inEventLoop else { return loop.execute { [self] in handle(.track(id: id)) } }
        handle(.track(id: id))
    }

    // MARK: the driver's part (on the loop)

    func statusChanged(_ status: MessageStatus, record: Bool) {
        statusWatchers.publish(status)
        if record { store?.setStatus(status, done: historyWritten) }
    }

    /// The answer of a write to the local history, back to the engine on the loop.
    var historyWritten: @Sendable (Result<Void, StoreWriteError>) -> Void {
        { [self] result in loop.execute { [self] in handle(.historyWritten(result)) } }
    }

    /// The store, once open; throws when there is none.
    private func openedStore() async throws(ClientError) -> ClientStore {
        guard let store = try? await loop.submit({ [self] in self.store }).get() else {
            throw ClientError("the local history is not open: openHistory(user:) or connect first", code: .notConnected)
        }
        return store
    }

    /// Opens the data directory's store on the first connect, and tells the engine what it holds.
    func openStore(user: String) async throws {
        guard let directory = configuration.dataDirectory else { return }
        if let openFor = try await loop.submit({ [self] in store?.user }).get() {
            guard openFor == user else { throw ClientError("the data directory is open for \(openFor), not \(user): one client is one user") }
            return
        }
        do {
            let opened = try ClientStore(directory: directory, user: user)
            let saved = try opened.load()
            try await loop.submit { [self] in
                store = opened
                handle(.storeOpened(saved))
            }.get()
        } catch {
            throw ClientError("cannot open the data directory \(directory): \(error)")
        }
    }

    func persist(_ made: ClientEngine.Made, after state: ClientStore.QueuedWrite? = nil) async throws(ClientError) {
        guard let store = try? await loop.submit({ [self] in self.store }).get() else {
            throw ClientError("not connected: the data directory's outbox is opened by connect", code: .notConnected)
        }
        do {
            try await store.add(made.items.map { ($0.message.messageID, $0.to, $0.message) },
                                shown: HistoryEntry.sent(made.whole, user: store.user), after: state)
        } catch {
            throw ClientError("message not sent: cannot write it to the outbox \(error.path): \(error.reason)")
        }
    }

    /// Returns once `state` (a sealing's, `queueSealed`) is on disk.
    func written(_ state: ClientStore.QueuedWrite) async throws(ClientError) {
        do {
            try await conversationKeys().store.written(state)
        } catch {
            throw ClientError("message not sent: cannot keep its keys' state: \(error)", code: .endToEnd)
        }
    }

    func writeOutbox(_ write: ClientEngine.OutboxWrite) {
        let done: @Sendable (Result<Void, StoreWriteError>) -> Void = { [self] result in
            loop.execute { [self] in handle(.outboxWritten(write, result)) }
        }
        switch write.change {
        case .remove(let id): store?.remove(id: id, status: write.status, done: done)
        case .markAccepted(let id, let seq): store?.markAccepted(id: id, seq: seq, status: write.status, done: done)
        }
    }

    func watchHeartbeat(_ interval: TimeAmount) {
        guard let control, let framing = try? control.pipeline.syncOperations.handler(type: EnvelopeFrameHandler.self) else { return }
        framing.watchHeartbeat(on: HeartbeatWheels.shared.wheel(on: control.eventLoop, heartbeat: Heartbeat(interval: interval)))
    }
}

/// A message sent, and where it stands (`SIMPClient.sendTracked`).
public struct MessageHandle: Sendable {
    public let id: String
    /// The recipient, or `#NAME`.
    public let to: String
    let watchers: StatusWatchers

    /// Where it stands now.
    public var status: MessageStatus { watchers.latest(id) ?? MessageStatus(id: id, to: to) }

    /// Its status now, then each change; ends once it is final (read, or failed) or the client closes.
    public func updates() -> AsyncStream<MessageStatus> {
        watchers.updates(of: id, to: to)
    }

    /// Waits until it reaches `stage` (or fails, or the client closes); its status then.
    public func wait(for stage: MessageStatus.Stage) async -> MessageStatus {
        for await status in updates() where status.stage >= stage { return status }
        return status
    }

    /// Waits until it is settled: delivered (to every member of a group), or failed.
    public func settled() async -> MessageStatus {
        await wait(for: .delivered)
    }
}

/// The latest status of the messages sent, for their handles: a sink the driver feeds, read
/// from any thread. Keeps the latest `capacity` messages.
final class StatusWatchers: @unchecked Sendable {
    private let lock = NSLock()
    private var latest: [String: MessageStatus] = [:]
    private var order: [String] = []
    private var streams: [String: [Int: AsyncStream<MessageStatus>.Continuation]] = [:]
    private var nextKey = 0
    private var closed = false
    let capacity = 4096

    func started(_ id: String, to: String) {
        lock.withLock {
            guard latest[id] == nil else { return }
            remember(id)
            latest[id] = MessageStatus(id: id, to: to)
        }
    }

    func latest(_ id: String) -> MessageStatus? {
        lock.withLock { latest[id] }
    }

    func publish(_ status: MessageStatus) {
        let watching: [AsyncStream<MessageStatus>.Continuation] = lock.withLock {
            if latest[status.id] == nil { remember(status.id) }
            latest[status.id] = status
            let watching = Array(streams[status.id]?.values ?? [:].values)
            if status.isFinal { streams[status.id] = nil }
            return watching
        }
        for continuation in watching {
            continuation.yield(status)
            if status.isFinal { continuation.finish() }
        }
    }

    func updates(of id: String, to: String) -> AsyncStream<MessageStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: MessageStatus.self)
        let now: MessageStatus = lock.withLock {
            let now = latest[id] ?? MessageStatus(id: id, to: to)
            if !now.isFinal && !closed {
                nextKey += 1
                let key = nextKey
                streams[id, default: [:]][key] = continuation
                continuation.onTermination = { [weak self] _ in
                    self?.lock.withLock { _ = self?.streams[id]?.removeValue(forKey: key) }
                }
            }
            return now
        }
        continuation.yield(now)
        if now.isFinal || closed { continuation.finish() }
        return stream
    }

    func finishAll() {
        let all: [AsyncStream<MessageStatus>.Continuation] = lock.withLock {
            closed = true
            defer { streams.removeAll() }
            return streams.values.flatMap(\.values)
        }
        for continuation in all { continuation.finish() }
    }

    private func remember(_ id: String) {
        order.append(id)
        guard order.count > 2 * capacity else { return }
        let dropped = order.prefix(order.count - capacity)
        order.removeFirst(dropped.count)
        for old in dropped where streams[old] == nil { latest[old] = nil }
    }
}
