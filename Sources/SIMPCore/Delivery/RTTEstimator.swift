import NIOCore

/// Retransmission timeout from RTT samples, as RFC 6298 computes it for TCP,
/// with bounds suited to a message path rather than a byte stream.
public struct RTTEstimator: Sendable, Equatable {
    public var minRTO: TimeAmount
    public var maxRTO: TimeAmount
    public private(set) var smoothedRTT: TimeAmount?
    public private(set) var rttVariance: TimeAmount = .zero
    public private(set) var rto: TimeAmount

    public init(initialRTO: TimeAmount = .milliseconds(500), minRTO: TimeAmount = .milliseconds(20), maxRTO: TimeAmount = .seconds(8)) {
        self.minRTO = minRTO
        self.maxRTO = maxRTO
        self.rto = initialRTO
    }

    /// Feeds one RTT sample. Callers take samples only from packets sent once (Karn's rule).
    public mutating func sample(_ rtt: TimeAmount) {
        let r = rtt.nanoseconds
        if let srtt = smoothedRTT?.nanoseconds {
            let variance = (3 * rttVariance.nanoseconds + abs(srtt - r)) / 4
            rttVariance = .nanoseconds(variance)
            smoothedRTT = .nanoseconds((7 * srtt + r) / 8)
        } else {
            smoothedRTT = rtt
            rttVariance = .nanoseconds(r / 2)
        }
        let raw = smoothedRTT!.nanoseconds + max(1_000_000, 4 * rttVariance.nanoseconds)
        rto = .nanoseconds(min(max(raw, minRTO.nanoseconds), maxRTO.nanoseconds))
    }
}
