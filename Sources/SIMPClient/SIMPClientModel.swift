#if canImport(Observation)
import Observation

/// A client's state for a SwiftUI (or any main-actor) application to show, observable:
/// the connection's state, the conversations of the local history, and the latest events.
/// It follows the client from `start()` until `stop()` (or the client's `close()`), with
/// streams of its own (`connectionStates()`, `events()`): it takes nothing from the
/// application's own consumers.
///
/// `conversations` is read again from the local history (`SIMPClient.conversations()`) when an
/// event may have changed it, and after a stream dropped events: it needs a data directory
/// (`ClientConfiguration.dataDirectory`), and stays empty without one.
@MainActor @Observable
public final class SIMPClientModel {
    public private(set) var connectionState: ConnectionState
    /// The local history's conversations, the latest first.
    public private(set) var conversations: [ConversationSummary] = []
    /// The latest events, the oldest first: at most `recentLimit`.
    public private(set) var recentEvents: [ClientEvent] = []
    public let recentLimit: Int

    @ObservationIgnored private let client: SIMPClient
    @ObservationIgnored private var tasks: [Task<Void, Never>] = []

    public init(client: SIMPClient, recentLimit: Int = 100) {
        self.client = client
        self.recentLimit = max(1, recentLimit)
        connectionState = client.connectionState
    }

    /// Starts following the client (again after `stop()`); reads the conversations at once.
    public func start() {
        guard tasks.isEmpty else { return }
        let states = client.connectionStates()
        let events = client.events()
        tasks.append(Task { [weak self] in
            for await state in states {
                guard let self else { return }
                connectionState = state
            }
        })
        tasks.append(Task { [weak self] in
            for await event in events {
                guard let self else { return }
                if apply(event) { await refreshConversations() }
            }
        })
        tasks.append(Task { [weak self] in await self?.refreshConversations() })
    }

    /// Stops following the client; what the model holds stays.
    public func stop() {
        for task in tasks { task.cancel() }
        tasks.removeAll()
    }

    /// Reads the conversations from the local history again (kept as they were when it cannot).
    public func refreshConversations() async {
        guard let read = try? await client.conversations() else { return }
        conversations = read
    }

    /// Keeps `event` among the latest; whether the conversations may have changed with it.
    @discardableResult
    func apply(_ event: ClientEvent) -> Bool {
        recentEvents.append(event)
        if recentEvents.count > recentLimit { recentEvents.removeFirst(recentEvents.count - recentLimit) }
        return Self.changesConversations(event)
    }

    /// Events after which the local history may read differently.
    static func changesConversations(_ event: ClientEvent) -> Bool {
        switch event {
        case .message, .accepted, .delivered, .groupAccepted, .memberDelivered, .read, .failed, .retracted, .connected,
             .eventsDropped: true
        default: false
        }
    }
}
#endif
