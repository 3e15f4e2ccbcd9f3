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
