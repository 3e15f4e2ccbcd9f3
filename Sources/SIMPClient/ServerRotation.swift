import NIOCore
import SIMPCore

/// Which of the configured servers the client tries next, and how long it waits first. Pure:
/// the caller passes the jitter and does the connecting.
///
/// - `connect` (the application's call) tries every server once, starting with the one that
///   last worked (the first in the list at first), with no wait in between: the application
///   is waiting for the answer.
/// - After a lost connection, a round tries every server once, starting with the one after
///   the server that was lost, which comes last (it is the one most likely down). Before
///   each round the client waits the jittered backoff, which grows round after round; within
///   a round it goes on at once, since a dead node costs at most the connect timeout.
///
/// With one server this is exactly the backoff alone: every attempt is a round of its own.
struct ServerRotation: Sendable, Equatable {
    struct Attempt: Sendable, Equatable {
        /// Index into the configured servers.
        var index: Int
        /// How long to wait before this attempt.
        var delay: TimeAmount
        /// 1 for the first attempt since the last successful connection.
        var number: Int
    }

    let count: Int
    private(set) var backoff: ReconnectBackoff
    /// The server of the last successful connection.
    private(set) var lastWorked = 0
    /// The server of the last reconnect attempt.
    private var position = 0
    /// Reconnect attempts left in the current round; 0: the next attempt starts a round.
    private var leftInRound = 0
    private var attempts = 0

    init(count: Int, backoff: ReconnectBackoff) {
        self.count = max(count, 1)
        self.backoff = backoff
    }

    /// The order in which `connect` tries the servers.
    var connectOrder: [Int] {
        (0..<count).map { (lastWorked + $0) % count }
    }

    /// The next reconnect attempt after a lost connection or a failed attempt.
    mutating func nextAttempt(jitter: Double) -> Attempt {
        var delay = TimeAmount.zero
        if leftInRound == 0 {
            delay = backoff.nextDelay(jitter: jitter)
            leftInRound = count
            position = lastWorked
        }
        position = (position + 1) % count
        leftInRound -= 1
        attempts += 1
        return Attempt(index: position, delay: delay, number: attempts)
    }

    /// A session is open on `index`: the next loss starts after it, from the shortest wait.
    mutating func connected(to index: Int) {
        lastWorked = index % count
        position = lastWorked
        leftInRound = 0
        attempts = 0
        backoff.reset()
    }
}
