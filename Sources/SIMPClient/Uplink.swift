import NIOCore
import SIMPCore

/// The client's path to the server under a congestion window and pacing (docs/PROTOCOL.md,
/// Congestion control), as the server's path to each session is: messages wait here until
/// the window and the pacing let them go, a lost one first (past a full window: the server
/// stores nothing sent after it until it comes). The server's `accepted` or `failed`
/// acknowledges a message; its `missing` list shows a loss, a congestion signal; a resend on
/// the retransmit timer is a loss that is not one. Pure: the caller supplies the time.
struct Uplink {
    enum Reason {
        /// Sent for the first time on this path.
        case first
        /// The retransmit timer fired.
        case timeout
        /// The server reported it missing.
        case reported
    }

    private struct Flight {
        var bytes: Int
        var sentAt: NIODeadline
    }

    /// Off: every message leaves at the next flush, as before there was a window (the
    /// window's accounting still runs).
    let windowed: Bool
    private(set) var congestion = CongestionController()
    private(set) var rtt = RTTEstimator()
    private var waiting: [String: [UInt8]] = [:]
    private var order = CircularBuffer<String>()
    private var lost: Set<String> = []
    private var lostOrder = CircularBuffer<String>()
    private var inFlight: [String: Flight] = [:]
    /// Sent again: no RTT sample comes from their acknowledgement.
    private var resent: Set<String> = []

    init(windowed: Bool = true) {
        self.windowed = windowed
    }

    /// Something waits for the window or the pacing.
    var hasQueued: Bool { !waiting.isEmpty }
    /// Messages wait behind a UDP bottleneck far below what the control connection would carry
    /// (`CongestionController.throttled`): the stream delivers more.
    var throttled: Bool { windowed && hasQueued && congestion.throttled }

    /// Bytes on the wire for a message that goes alone: header, payload, tag.
    static func wireSize(_ payload: [UInt8]) -> Int {
        DatagramHeader.size + payload.count + DatagramSeal.tagSize
    }

    /// Queues message `id` (its latest serialization: a resend may carry a new order). One
    /// sent and now sent again was lost, and goes first; so does one the server reports
    /// missing while it still waits here (the server holds what came after it). A timeout of
    /// one that never left keeps its place.
    mutating func send(_ id: String, _ payload: [UInt8], now: NIODeadline, reason: Reason) {
        var goesFirst = reason == .reported
        if reason != .first, let flight = inFlight.removeValue(forKey: id) {
            congestion.lost(bytes: flight.bytes, sentAt: flight.sentAt, now: now, congestion: reason == .reported)
            resent.insert(id)
            goesFirst = true
        }
        if waiting.updateValue(payload, forKey: id) == nil, !goesFirst { order.append(id) }
        if goesFirst, lost.insert(id).inserted { lostOrder.append(id) }
    }

    /// The server answered for `id` (accepted or failed): out of flight, and no longer to send.
    mutating func acknowledged(_ id: String, now: NIODeadline) {
        waiting[id] = nil
        lost.remove(id)
        let tainted = resent.remove(id) != nil
        guard let flight = inFlight.removeValue(forKey: id) else { return }
        congestion.acked(bytes: flight.bytes, sentAt: flight.sentAt, now: now)
        if !tainted { rtt.sample(now - flight.sentAt) }
    }

    /// No longer waited for (withdrawn, or given up with the session): out of flight, no event.
    mutating func forget(_ id: String) {
        waiting[id] = nil
        lost.remove(id)
        resent.remove(id)
        if let flight = inFlight.removeValue(forKey: id) { congestion.discarded(bytes: flight.bytes) }
    }

    /// A new session: a new path whose window starts afresh; what waited is sent again by
    /// the caller, numbered for the new session.
    mutating func newPath() {
        self = Uplink(windowed: windowed)
    }

    /// What the window and the pacing let go now, one datagram at a time: lost ones first,
    /// then the rest in order. With `bundles` a datagram holds as many as fit, spread over at
    /// least `DatagramBundle.spread` datagrams as the server's pushes are.
    mutating func release(now: NIODeadline, bundles: Bool) -> Release {
        var release = Release()
        let perDatagram = bundles ? max(1, waiting.count / DatagramBundle.spread) : 1
        while hasQueued, !windowed || congestion.canSend(now: now, smoothedRTT: rtt.smoothedRTT, pastWindow: !lost.isEmpty) {
            var group: [[UInt8]] = []
            var size = 0
            var charged = 0
            while group.count < perDatagram, let (id, payload) = next() {
                let cost = DatagramBundle.prefixSize + payload.count
                if !group.isEmpty, size + cost > DatagramHeader.maxPayload { break }
                take(id, payload, now: now)
                release.ids.append(id)
                group.append(payload)
                size += cost
                charged += Self.wireSize(payload)
            }
            guard !group.isEmpty, let datagram = DatagramBundle.pack(group, spread: 1).first else { break }
            if windowed { congestion.datagramSent(charged: charged) }
            release.datagrams.append(datagram)
        }
        return release
    }

    struct Release {
        var datagrams: [(kind: DatagramKind, payload: [UInt8])] = []
        /// The messages that left, in order.
        var ids: [String] = []
    }

    /// The next message to go, without taking it: a lost one first. Drops stale order entries.
    private mutating func next() -> (String, [UInt8])? {
        while let id = lostOrder.first {
            if lost.contains(id), let payload = waiting[id] { return (id, payload) }
            lost.remove(id)
            lostOrder.removeFirst()
        }
        while let id = order.first {
            if let payload = waiting[id] { return (id, payload) }
            order.removeFirst()
        }
        return nil
    }

    private mutating func take(_ id: String, _ payload: [UInt8], now: NIODeadline) {
        if lost.remove(id) != nil { lostOrder.removeFirst() } else { order.removeFirst() }
        waiting[id] = nil
        let bytes = Self.wireSize(payload)
        inFlight[id] = Flight(bytes: bytes, sentAt: now)
        congestion.sent(bytes: bytes, now: now)
    }

    /// When the pacing lets the next one go; nil when nothing waits or the window is full.
    func nextRelease(now: NIODeadline) -> NIODeadline? {
        guard hasQueued else { return nil }
        return congestion.nextSend(now: now, smoothedRTT: rtt.smoothedRTT)
    }
}
