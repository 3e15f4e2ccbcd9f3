import NIOConcurrencyHelpers
import SIMPCore

/// Connections per source IP and logged-in connections per user, shared by every control
/// connection of the node (they live on different event loops, hence the lock).
final class Admission: Sendable {
    private let perIP: NIOLockedValueBox<SlotCounter<String>>
    private let perUser: NIOLockedValueBox<SlotCounter<String>>
    private let metrics: ServerMetrics

    init(limits: ServerLimits, metrics: ServerMetrics) {
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
        perUser.withLockedValue { $0.release(user) }
    }
}
