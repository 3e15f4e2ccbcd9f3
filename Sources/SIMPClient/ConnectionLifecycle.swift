/// Where the client's connection is in its life, decided purely: `SIMPClient` tells it what
/// happened and does what it answers (schedule a reconnect, end, nothing).
///
/// - idle: never connected, or disconnected by the application (no reconnect).
/// - connecting: the application's `connect` is under way, until its path is bound; a loss now
///   is that call's failure.
/// - binding: a reconnect opened a session, its datagram path not yet confirmed (`bound`).
/// - bound: messages flow.
/// - waitingToReconnect: the connection was lost; attempts follow until one opens a session.
/// - ended: the server ended the session for good (an administrator, a revocation, a newer
///   client of the same device): reconnecting would undo it.
struct ConnectionLifecycle: Sendable {
    enum State: Equatable, Sendable {
        case idle, connecting, binding, bound, waitingToReconnect
        case ended(reason: String)
    }

    enum AfterLoss: Equatable, Sendable {
        case nothing
        case reconnect
        case end(reason: String)
    }

    private(set) var state = State.idle
    /// The server said it ends the session (SESSION_CLOSED, SESSION_REPLACED): the close that
    /// follows ends it.
    private var endingBecause: String?
    /// A reconnect attempt is scheduled and not yet due.
    private var attemptScheduled = false

    var isBound: Bool { state == .bound }

    /// The application called `connect`.
    mutating func connectRequested() {
        state = .connecting
        endingBecause = nil
    }

    /// The application's `connect` failed: nothing is retried.
    mutating func connectFailed() {
        if state == .connecting { state = .idle }
    }

    mutating func sessionOpened() {
        if state == .waitingToReconnect { state = .binding }
    }

    mutating func pathBound() {
        if state == .binding || state == .connecting { state = .bound }
    }

    mutating func serverEnds(because reason: String) {
        endingBecause = reason
    }

    mutating func disconnectedByApplication() {
        state = .idle
    }

    /// The control connection closed.
    mutating func connectionLost() -> AfterLoss {
        switch state {
        case .idle, .ended, .connecting, .waitingToReconnect:
            // Nothing to resume, or the attempt under way reports (and retries) its own failure.
            return .nothing
        case .binding, .bound:
            if let reason = endingBecause {
                state = .ended(reason: reason)
                return .end(reason: reason)
            }
            state = .waitingToReconnect
            return .reconnect
        }
    }

    /// Whether to schedule a reconnect attempt now (not when one is already scheduled).
    mutating func scheduleAttempt() -> Bool {
        guard state == .waitingToReconnect, !attemptScheduled else { return false }
        attemptScheduled = true
        return true
    }

    /// A scheduled attempt is due: whether to make it (the application may have disconnected,
    /// or connected again, meanwhile).
    mutating func attemptDue() -> Bool {
        attemptScheduled = false
        return state == .waitingToReconnect
    }
}
