import Foundation
import NIOCore
import SIMPCore

// The one place where the library's own types (`Duration`, `Date`) meet the ones inside it
// (NIO's `TimeAmount`, the wire's milliseconds since 1970). The public surface has only the
// former; the engine, the timers and the store keep the latter. Durations convert with NIO's
// own `TimeAmount(Duration)` and `Duration(TimeAmount)` (exact to the nanosecond, clamped).

extension Date {
    /// A wire time (milliseconds since 1970) as a `Date`.
    init(millis: Int64) {
        self.init(timeIntervalSince1970: Double(millis) / 1000)
    }

    /// A wire time, nil for 0 (never, or not told).
    static func ifSet(millis: Int64) -> Date? {
        millis == 0 ? nil : Date(millis: millis)
    }

    /// This time in milliseconds since 1970, as the wire and the store keep it.
    var millis: Int64 {
        Int64((timeIntervalSince1970 * 1000).rounded())
    }
}

extension ClientConfiguration {
    /// The durations as the event loop and the engine's units take them, converted once here.
    struct LoopTimes: Sendable {
        var connect: TimeAmount
        var reconnect: ReconnectBackoff
        var retransmit: RetransmitPolicy
        var keepalive: TimeAmount
        var bindRetry: TimeAmount
        var request: TimeAmount
    }

    var loopTimes: LoopTimes {
        LoopTimes(connect: TimeAmount(connectTimeout),
                  reconnect: ReconnectBackoff(base: TimeAmount(reconnectBase), cap: TimeAmount(reconnectCap)),
                  // The server accepts once the store answers (its batch may wait for the one
                  // ahead of it): the ack delay allowed for is QUIC's default. Probes of an
                  // unanswered flight back off to the resend cap, no further (see the server's
                  // `pushRetransmit`). The client looks only when something falls due, so a gap
                  // between looks is no stall: a tick that fires late is (`ClientTimers.stall`).
                  retransmit: RetransmitPolicy(maxBackoff: TimeAmount(retransmitBackoffCap), giveUpAfter: TimeAmount(giveUpAfter),
                                               maxAckDelay: RetransmitPolicy.defaultMaxAckDelay),
                  keepalive: TimeAmount(keepaliveInterval),
                  bindRetry: TimeAmount(bindRetry),
                  request: TimeAmount(requestTimeout))
    }

    /// The longest control frame unless told otherwise (the wire's `Frame.defaultMaxLength`).
    static let defaultMaxFrameLength = Frame.defaultMaxLength
}
