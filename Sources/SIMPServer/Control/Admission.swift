import NIOConcurrencyHelpers
import NIOCore
import SIMPCore

/// Connections per source IP and logged-in connections per user, shared by every control
/// connection of the node (they live on different event loops, hence the lock). The limits
/// can change while running (SIGHUP): each check reads the current one.
final class Admission: Sendable {
    /// A counter per key and the most each key may hold; the counter itself never refuses
    /// (its own limit is fixed at creation), so a reload can move the limit.
    private struct Slots {
        var counter = SlotCounter<String>(limit: .max)
        var limit: Int

        mutating func acquire(_ key: String) -> Bool {
            guard counter.count(key) < limit else { return false }
            return counter.acquire(key)
        }

        mutating func release(_ key: String) { counter.release(key) }
        func count(_ key: String) -> Int { counter.count(key) }
    }

    /// A user's request rate and the buckets taking from it.
    private struct UserRequests {
        var rate: Int
        var burst: Int
        var buckets: [String: TokenBucket] = [:]
    }

    private let perIP: NIOLockedValueBox<Slots>
    private let perUser: NIOLockedValueBox<Slots>
    /// Control requests of each logged-in user, over all of its connections on this node.
    private let userRequests: NIOLockedValueBox<UserRequests>
    private let metrics: ServerMetrics

    init(limits: ServerLimits, metrics: ServerMetrics) {
        userRequests = NIOLockedValueBox(UserRequests(rate: limits.userRequestsPerSecond, burst: limits.userRequestBurst))
        perIP = NIOLockedValueBox(Slots(limit: limits.connectionsPerIP))
        perUser = NIOLockedValueBox(Slots(limit: limits.sessionsPerUser))
        self.metrics = metrics
    }

    var connectionsPerIP: Int { perIP.withLockedValue { $0.limit } }
    var sessionsPerUser: Int { perUser.withLockedValue { $0.limit } }

    /// New limits from a reload. Connections and sessions already open stay open even when
    /// they are now over the limit; the next one is refused until enough have closed. Users'
    /// request buckets start again full at the new rate.
    func update(_ limits: ServerLimits) {
        perIP.withLockedValue { $0.limit = limits.connectionsPerIP }
        perUser.withLockedValue { $0.limit = limits.sessionsPerUser }
        userRequests.withLockedValue { requests in
            guard requests.rate != limits.userRequestsPerSecond || requests.burst != limits.userRequestBurst else { return }
            requests = UserRequests(rate: limits.userRequestsPerSecond, burst: limits.userRequestBurst)
        }
    }

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
        if remaining == 0 { _ = userRequests.withLockedValue { $0.buckets.removeValue(forKey: user) } }
    }

    /// Charges the user work that was known only once done (a presence answer, an
    /// announcement of its presence): the user's next requests wait for it.
    func charge(_ user: String, _ extra: Int, now: NIODeadline) {
        userRequests.withLockedValue { requests in
            guard var bucket = requests.buckets[user] else { return }
            bucket.charge(extra, now: now)
            requests.buckets[user] = bucket
        }
    }

    /// Takes one of the user's control requests, if its rate allows one now.
    func takeRequest(of user: String, cost: Int = 1, now: NIODeadline) -> Bool {
        userRequests.withLockedValue { requests in
            var bucket = requests.buckets[user] ?? TokenBucket(rate: requests.rate, burst: requests.burst, now: now)
            let taken = bucket.take(cost, now: now)
            requests.buckets[user] = bucket
            return taken
        }
    }
}
