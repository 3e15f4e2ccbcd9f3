import CoreMetrics

/// Sealed messages shown undecryptable, by cause (docs/E2EE.md, "What a device cannot open"):
/// read by the application (`SIMPClient.decryptionFailures()`), and counted as the metric
/// `simp_client_decryption_failures_total{cause}` through swift-metrics (a no-op unless the
/// application bootstrapped a metrics backend).
final class DecryptionFailures: Sendable {
    private let counts = Locked<[DecryptionFailure: Int]>([:])
    private let counters: [DecryptionFailure: Counter] = Dictionary(uniqueKeysWithValues: DecryptionFailure.allCases.map { cause in
        (cause, Counter(label: "simp_client_decryption_failures_total", dimensions: [("cause", cause.rawValue)]))
    })

    func count(_ cause: DecryptionFailure) {
        counts.withLock { $0[cause, default: 0] += 1 }
        counters[cause]?.increment()
    }

    var all: [DecryptionFailure: Int] { counts.value }
}

extension SIMPClient {
    /// How many sealed messages this client showed as undecryptable (`ClientEvent.undecryptable`),
    /// by cause, since it was made. Zero everywhere is the goal: a device that was a member when
    /// a message was sent decrypts it.
    public func decryptionFailures() -> [DecryptionFailure: Int] {
        decryptionFailureCounts.all
    }
}

/// What this device refused of what the server gave it, by kind (`SecurityWarning`): read by
/// the application (`SIMPClient.securityWarnings()`), and counted as the metric
/// `simp_client_security_warnings_total{kind}`. Each is also an event (`ClientEvent.uncertifiedDevice`,
/// `.commitRefused`).
final class SecurityWarnings: Sendable {
    private let counts = Locked<[SecurityWarning: Int]>([:])
    private let counters: [SecurityWarning: Counter] = Dictionary(uniqueKeysWithValues: SecurityWarning.allCases.map { kind in
        (kind, Counter(label: "simp_client_security_warnings_total", dimensions: [("kind", kind.rawValue)]))
    })

    func count(_ kind: SecurityWarning) {
        counts.withLock { $0[kind, default: 0] += 1 }
        counters[kind]?.increment()
    }

    var all: [SecurityWarning: Int] { counts.value }
}

extension SIMPClient {
    /// How many times this client refused something of the server's that an honest server never
    /// gives (a device certificate that does not verify, a commit MLS refuses), by kind, since
    /// it was made. Each was also an event (`ClientEvent.uncertifiedDevice`, `.commitRefused`).
    public func securityWarnings() -> [SecurityWarning: Int] {
        securityWarningCounts.all
    }

    /// Counts `kind` and hands `event` to the application, on the client's loop.
    func warn(_ kind: SecurityWarning, _ event: ClientEvent) {
        securityWarningCounts.count(kind)
        loop.execute { [self] in deliver(event) }
    }
}
