import NIOCore

/// Admits `rate` events per second on average and bursts of up to `burst`. Time is passed
/// in, so the bucket is pure and tests drive it with a fake clock.
public struct TokenBucket: Sendable {
    public let rate: Int
    public let burst: Int
    /// Tokens in billionths, so refills of a few nanoseconds add up exactly (no float drift).
    private var credit: Int64
    private var last: NIODeadline
    private static let scale: Int64 = 1_000_000_000

    public init(rate: Int, burst: Int, now: NIODeadline) {
        precondition(rate > 0 && burst > 0, "a token bucket needs a positive rate and burst")
        self.rate = rate
        self.burst = burst
        self.credit = Int64(burst) * Self.scale
        self.last = now
    }

    /// Takes one token if there is one.
    public mutating func take(now: NIODeadline) -> Bool {
        take(1, now: now)
    }

    /// Takes `tokens` (at most a burst: a larger cost could never be paid) if there are as many.
    public mutating func take(_ tokens: Int, now: NIODeadline) -> Bool {
        refill(now: now)
        let cost = Int64(min(max(tokens, 1), burst)) * Self.scale
        guard credit >= cost else { return false }
        credit -= cost
        return true
    }

    /// Takes `tokens` whether or not there are as many: work whose cost was known only once it
    /// was done is paid after it, and the next `take` waits for the debt. The debt is at most
    /// a burst, so the wait it causes is bounded too.
    public mutating func charge(_ tokens: Int, now: NIODeadline) {
        refill(now: now)
        credit = max(-Int64(burst) * Self.scale, credit - Int64(max(tokens, 0)) * Self.scale)
    }

    /// How long until `tokens` (at most a burst) are there, if none are taken meanwhile.
    public mutating func wait(for tokens: Int, now: NIODeadline) -> TimeAmount {
        refill(now: now)
        let missing = Int64(min(max(tokens, 1), burst)) * Self.scale - credit
        return .nanoseconds(max(1, (missing + Int64(rate) - 1) / Int64(rate)))
    }

    private mutating func refill(now: NIODeadline) {
        guard now > last else { return }
        let full = Int64(burst) * Self.scale
        // Capped at the time a refill from the deepest debt (a burst below empty) takes, so
        // the product cannot overflow.
        let elapsed = min((now - last).nanoseconds, 2 * full / Int64(rate) + 1)
        credit = min(full, credit + elapsed * Int64(rate))
        last = now
    }
}

/// Before a UDP address is validated the server sends it at most three times the bytes it
/// received from it (the anti-amplification rule of QUIC, RFC 9000 section 8.1), so a
/// forged source address cannot turn the server into a traffic multiplier.
public struct AmplificationBudget: Sendable, Equatable {
    public static let factor = 3
    public private(set) var received = 0
    public private(set) var sent = 0

    public init() {}

    public mutating func receive(_ bytes: Int) {
        received += bytes
    }

    /// Records and allows the send only if it stays within the budget.
    public mutating func spend(_ bytes: Int) -> Bool {
        guard sent + bytes <= received * Self.factor else { return false }
        sent += bytes
        return true
    }
}

/// Failed logins slow down (docs/SECURITY.md), alike for every syntactically valid name,
/// whether or not such a user exists, so the answers tell nothing about who is registered.
///
/// Three counts, each over a fixed window: a count is forgotten `window` after its *first*
/// failure however slowly more arrive, so nobody can build one up over hours.
/// - per name and source address: `freeAttempts`, then that source waits for that name;
/// - per source address, across all names: `freeAttemptsPerSource`, then that source waits for
///   every name except those it logged in to recently (one address cannot try many users);
/// - per name, across all sources: `freeAttemptsPerUser`, then every source waits except the
///   user's known ones (where the user logged in within `knownSourceLifetime`), so guessing from
///   many addresses is slowed but cannot lock the owner out of their own places.
/// Each wait is 1 s, doubling with every further failure, at most `maxLockout` and never past
/// the end of the count's window.
public enum LoginThrottle {
    public static let freeAttempts = 5
    public static let freeAttemptsPerSource = 20
    public static let freeAttemptsPerUser = 50
    public static let window: TimeAmount = .seconds(900)
    public static let maxLockout: TimeAmount = .seconds(300)
    /// A source a user logged in from successfully stays known this long after that login.
    public static let knownSourceLifetime: TimeAmount = .hours(24 * 30)
    /// The most recent known sources kept per user (older ones are forgotten first).
    public static let knownSourcesPerUser = 16

    /// How long to wait after `failures` counted failures, `free` of them allowed, when the
    /// count's window ends in `windowLeft`.
    public static func lockout(afterFailures failures: Int, free: Int = freeAttempts,
                               windowLeft: TimeAmount = window) -> TimeAmount {
        guard failures >= free else { return .zero }
        let doublings = min(failures - free, 16)
        return max(.zero, min(.seconds(Int64(1) << doublings), maxLockout, windowLeft))
    }

    /// Which count a refusal comes from.
    public enum Lock: Sendable, Equatable {
        case nameFromSource, source, name
    }

    /// The waits still running for one login attempt (zero or less: none).
    public struct Waits: Sendable, Equatable {
        public var nameFromSource: TimeAmount
        public var source: TimeAmount
        public var name: TimeAmount

        public init(nameFromSource: TimeAmount = .zero, source: TimeAmount = .zero, name: TimeAmount = .zero) {
            self.nameFromSource = nameFromSource
            self.source = source
            self.name = name
        }
    }

    /// The wait that refuses this attempt, if any. A source where the user logged in recently
    /// is spared the waits others' failures caused; only its own failures on this name count.
    public static func refusal(_ waits: Waits, knownSource: Bool) -> (lock: Lock, wait: TimeAmount)? {
        if waits.nameFromSource > .zero { return (.nameFromSource, waits.nameFromSource) }
        guard !knownSource else { return nil }
        if waits.source > .zero { return (.source, waits.source) }
        if waits.name > .zero { return (.name, waits.name) }
        return nil
    }
}

/// The unit that per-source login and registration limits count: an IPv4 address, or the /64
/// prefix of an IPv6 address (a subscriber usually gets a whole /64, so counting single IPv6
/// addresses would hand an attacker countless fresh sources). An IPv4-mapped IPv6 address
/// counts as its IPv4 address; anything unparsable as itself.
public enum SourceAddress {
    public static func bucket(_ ip: String) -> String {
        guard ip.contains(":"), case .v6(let v6)? = try? SocketAddress(ipAddress: ip, port: 0) else { return ip }
        var address = v6.address
        let bytes = withUnsafeBytes(of: address.sin6_addr) { Array($0) }
        if bytes.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]) {
            return bytes.suffix(4).map(String.init).joined(separator: ".")
        }
        withUnsafeMutableBytes(of: &address.sin6_addr) { prefix in
            for i in 8..<16 { prefix[i] = 0 }
        }
        guard let network = SocketAddress(address, host: "").ipAddress else { return ip }
        return network + "/64"
    }
}

/// Password hashing jobs (scrypt, slow on purpose) waiting or running, in all and per source
/// address. Over either bound a job is refused at once instead of queued, so a flood cannot
/// make a real user's login wait without bound, and one source cannot take the whole queue.
public struct HashingAdmission: Sendable {
    public let limit: Int
    private var perSource: SlotCounter<String>
    public private(set) var total = 0

    public init(limit: Int, perSource: Int) {
        precondition(limit > 0 && perSource > 0, "hashing bounds must be positive")
        self.limit = limit
        self.perSource = SlotCounter(limit: perSource)
    }

    public var perSourceLimit: Int { perSource.limit }

    public enum Refusal: Sendable, Equatable {
        case full, sourceFull
    }

    /// Takes a place for one job from `source`, or says which bound refused it.
    public mutating func admit(_ source: String) -> Refusal? {
        guard total < limit else { return .full }
        guard perSource.acquire(source) else { return .sourceFull }
        total += 1
        return nil
    }

    public mutating func release(_ source: String) {
        guard perSource.count(source) > 0 else { return }
        perSource.release(source)
        total -= 1
    }

    public func count(_ source: String) -> Int {
        perSource.count(source)
    }
}

/// Concurrent holders per key (connections per source IP, sessions per user), refusing the
/// one that would go over `limit`.
public struct SlotCounter<Key: Hashable & Sendable>: Sendable {
    public let limit: Int
    private var counts: [Key: Int] = [:]

    public init(limit: Int) {
        self.limit = limit
    }

    public mutating func acquire(_ key: Key) -> Bool {
        let held = counts[key, default: 0]
        guard held < limit else { return false }
        counts[key] = held + 1
        return true
    }

    public mutating func release(_ key: Key) {
        guard let held = counts[key] else { return }
        counts[key] = held > 1 ? held - 1 : nil
    }

    public func count(_ key: Key) -> Int {
        counts[key, default: 0]
    }

    /// Keys with at least one holder; released keys leave no trace.
    public var keyCount: Int { counts.count }
}
