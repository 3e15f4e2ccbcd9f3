import NIOConcurrencyHelpers
import NIOCore
import SIMPCore

/// Connections per source IP and logged-in connections per user, shared by every control
/// connection of the node (they live on different event loops, hence the lock).
final class Admission: Sendable {
    private let perIP: NIOLockedValueBox<SlotCounter<String>>
    private let perUser: NIOLockedValueBox<SlotCounter<String>>
    /// Control requests of each logged-in user, over all of its connections on this node.
    private let userRequests = NIOLockedValueBox([String: TokenBucket]())
    private let userRate: (rate: Int, burst: Int)
    private let metrics: ServerMetrics

    init(limits: ServerLimits, metrics: ServerMetrics) {
        userRate = (limits.userRequestsPerSecond, limits.userRequestBurst)
        perIP = NIOLockedValueBox(SlotCounter(limit: limits.connectionsPerIP))
        perUser = NIOLockedValueBox(SlotCounter(limit: limits.sessionsPerUser))
        self.metrics = metrics
    }

    var connectionsPerIP: Int { perIP.withLockedValue { $0.limit } }
    var sessionsPerUser: Int { perUser.withLockedValue { $0.limit } }

    func admitConnection(from ip: String) -> Bool {
        let admitted = perIP.withLockedValue { $0.acquire(ip) }
        if admitted { metrics.controlConnections.increment() } else { metrics.exceeded(.connectionsPerIP) }
        return admitted
    }

    func connectionClosed(from ip: String) {
        perIP.withLockedValue { $0.release(ip) }
        metrics.controlConnections.decrement()
    }

    func admitLogin(of user: String) -> Bool {
        let admitted = perUser.withLockedValue { $0.acquire(user) }
        if !admitted { metrics.exceeded(.sessionsPerUser) }
        return admitted
    }

    func loggedOut(_ user: String) {
        let remaining = perUser.withLockedValue { counter in
            counter.release(user)
            return counter.count(user)
        }
        if remaining == 0 { _ = userRequests.withLockedValue { $0.removeValue(forKey: user) } }
    }

    /// Takes one of the user's control requests, if its rate allows one now.
    func takeRequest(of user: String, now: NIODeadline) -> Bool {
        userRequests.withLockedValue { buckets in
            var bucket = buckets[user] ?? TokenBucket(rate: userRate.rate, burst: userRate.burst, now: now)
            let taken = bucket.take(now: now)
            buckets[user] = bucket
            return taken
        }
    }
}
