import NIOCore

/// The congestion window and pacing of one UDP path (the server to one session), in the
/// manner of QUIC's recovery (RFC 9002, section 7: NewReno): slow start, then one datagram
/// more per window acknowledged; a loss of something sent after the last reduction halves the
/// window (a congestion event); what is sent is paced at 1.25 windows per smoothed RTT.
///
/// One addition, because a window alone cannot slow a path whose round trip is short: a
/// policer of 100 datagrams a second on a path of 0.5 ms round trip passes 0.05 datagrams
/// per round trip, far below the minimum window of two. So when the receiver's reports show
/// a fifth of the recent bytes lost, the pacing is also capped at the rate the receiver was
/// confirming over the last second (the `ceiling`), as BBR does with its delivery rate. A
/// ceiling after which the losses go on was chance (a lossy link) and is lifted; one that
/// stopped them marks a bottleneck (`policed`). It rises by 5% every 100 ms that it
/// limited the sender, and is lifted once the window's own rate is lower.
///
/// Pure: the caller supplies the time and the smoothed RTT, and says what it sent, what was
/// acknowledged and what it found lost, each with its size in bytes on the wire.
public struct CongestionController: Sendable, Equatable {
    /// A full datagram: header, 1,200 bytes of payload, tag.
    public static let maxDatagram = 1236
    public static let initialWindow = 10 * maxDatagram
    public static let minimumWindow = 2 * maxDatagram
    /// RFC 9002's RTT before the first sample.
    public static let initialRTT: TimeAmount = .milliseconds(333)
    /// How often a ceiling that held the sender back rises, and by how much.
    public static let probeInterval: TimeAmount = .milliseconds(100)
    public static let probeGain = 1.05
    /// The share of the last 200 ms's bytes found lost (by the receiver's reports) from which
    /// a congestion event also sets a ceiling. Below it losses look random (a lossy radio
    /// link): they halve the window as NewReno would, but a ceiling at the delivered rate,
    /// cut at every event, took a path losing 10% of datagrams at random from 6,700 messages
    /// a second to 260. A policer the sender overshoots drops far more than that.
    public static let policedLossShare = 0.2
    /// Below this share 200 ms after a cut, the losses stopped; above it once a bottleneck is
    /// known, the ceiling is cut again.
    public static let confirmedLossShare = 0.05
    static let confirmAfter: TimeAmount = .milliseconds(200)
    /// No ceiling is lower: two datagrams per probe interval.
    public static let minimumCeiling = Double(2 * maxDatagram) * 10

    public private(set) var window = CongestionController.initialWindow
    public private(set) var slowStartThreshold = Int.max
    public private(set) var bytesInFlight = 0
    /// Sends found lost, and the congestion events they made.
    public private(set) var lost = 0
    public private(set) var congestionEvents = 0
    /// Bytes per second the pacing may not exceed since the last congestion event.
    public private(set) var ceiling: Double?
    private var recoveryStart: NIODeadline?
    private var credit = Double(CongestionController.initialWindow)
    private var creditAt: NIODeadline?
    private var lastRaise: NIODeadline = .uptimeNanoseconds(0)
    private var heldByCeiling = false
    private var ceilingCut = false
    private var lastCut: NIODeadline = .uptimeNanoseconds(0)
    /// A ceiling stopped the losses: the path has a bottleneck (a policer).
    private var policed = false
    private var delivery = DeliveryRate()

    public init() {}

    /// Whether a datagram may leave now: the window has room (unless it goes `pastWindow`,
    /// as a lost one that the receiver waits for may) and the pacing has credit.
    public mutating func canSend(now: NIODeadline, smoothedRTT: TimeAmount?, pastWindow: Bool = false) -> Bool {
        guard bytesInFlight < window || pastWindow else { return false }
        refill(now: now, smoothedRTT: smoothedRTT)
        guard credit > 0 else {
            if let ceiling, ceiling < windowRate(smoothedRTT) { heldByCeiling = true }
            return false
        }
        return true
    }

    /// When a datagram may leave next; nil while the window is full (an acknowledgement or a
    /// loss makes room).
    public func nextSend(now: NIODeadline, smoothedRTT: TimeAmount?) -> NIODeadline? {
        guard bytesInFlight < window else { return nil }
        guard credit <= 0 else { return now }
        let since = creditAt.map { Double((now - $0).nanoseconds) } ?? 0
        let wait = -credit / pacingRate(smoothedRTT) * 1e9 - since
        return now + .nanoseconds(Int64(min(max(wait, 0), 1e9)) + 1)
    }

    public mutating func sent(bytes: Int, now: NIODeadline) {
        bytesInFlight += bytes
        credit -= Double(bytes)
        delivery.started(now)
    }

    /// A datagram went whose contents were `sent` as `charged` bytes: under a ceiling the
    /// pacing spends a full datagram on it whatever its size, since a bottleneck that counts
    /// packets (a policer) lets no more small ones through than full ones.
    public mutating func datagramSent(charged: Int) {
        guard ceiling != nil else { return }
        credit -= Double(max(0, Self.maxDatagram - charged))
    }

    /// Something sent at `sentAt` was acknowledged.
    public mutating func acked(bytes: Int, sentAt: NIODeadline, now: NIODeadline) {
        bytesInFlight = max(0, bytesInFlight - bytes)
        delivery.record(bytes, now: now)
        if let recoveryStart, sentAt <= recoveryStart { return }
        if window < slowStartThreshold {
            window += bytes
        } else {
            window += Self.maxDatagram * bytes / window
        }
    }

    /// Something sent at `sentAt` was found lost. `congestion`: the receiver showed the loss
    /// (it got something sent later), and the first such loss after the last reduction is a
    /// congestion event. A retransmit timeout alone is not (as RFC 9002's probe timeout is
    /// not): on a busy host a late receipt looked like loss, and every event cut the rate.
    public mutating func lost(bytes: Int, sentAt: NIODeadline, now: NIODeadline, congestion: Bool = true) {
        bytesInFlight = max(0, bytesInFlight - bytes)
        lost += 1
        guard congestion else { return }
        delivery.recordLoss(bytes, now: now)
        if recoveryStart.map({ sentAt > $0 }) ?? true {
            recoveryStart = now
            congestionEvents += 1
            window = max(window / 2, Self.minimumWindow)
            slowStartThreshold = window
            ceilingCut = false
        }
        // Once per recovery period and per 200 ms, when the losses of the last 200 ms (this
        // one's included) look like a bottleneck's: a fifth of the bytes, or once a bottleneck
        // was confirmed (`policed`), a twentieth.
        let share = delivery.lossShare(now: now)
        guard !ceilingCut, now - lastCut >= Self.confirmAfter,
              share >= (policed ? Self.confirmedLossShare : Self.policedLossShare) else { return }
        ceilingCut = true
        lastCut = now
        let delivered = delivery.rate(now: now) ?? Self.minimumCeiling
        ceiling = max(Self.minimumCeiling, delivered)
        lastRaise = now
        heldByCeiling = false
        credit = min(credit, 0)
    }

    /// 200 ms after a cut: if the losses stopped, the path has a bottleneck the ceiling keeps
    /// under (`policed`); if they went on as before, they were chance, and the ceiling only
    /// slowed the sender: it is lifted.
    private mutating func judgeCut(now: NIODeadline) {
        guard ceiling != nil, !policed, now - lastCut >= Self.confirmAfter else { return }
        if delivery.lossShare(now: now) < Self.confirmedLossShare {
            policed = true
        } else {
            ceiling = nil
        }
    }

    /// The bottleneck's rate in bytes per second, once a ceiling stopped the losses (a policer
    /// found, `policed`); nil while none is known.
    public var bottleneckRate: Double? {
        policed ? ceiling : nil
    }

    /// Below this rate a UDP bottleneck delivers far less than the control connection would
    /// (issue 45, item 4): 128 KiB a second, about 100 full datagrams; a policer of tens of
    /// datagrams a second is under it (found at up to 3.5 times its rate: the last second's
    /// deliveries hold its burst and the first window), a working path far over it.
    public static let throttledRate = 131_072.0

    /// The path is policed far below what the control connection would carry: a bottleneck
    /// under `throttledRate`.
    public var throttled: Bool {
        bottleneckRate.map { $0 < Self.throttledRate } ?? false
    }

    /// Something sent is no longer waited for (given up on): out of flight, no event.
    public mutating func discarded(bytes: Int) {
        bytesInFlight = max(0, bytesInFlight - bytes)
    }

    /// The pacing rate in bytes per second.
    public func pacingRate(_ smoothedRTT: TimeAmount?) -> Double {
        min(windowRate(smoothedRTT), ceiling ?? .infinity)
    }

    private func windowRate(_ smoothedRTT: TimeAmount?) -> Double {
        let rtt = max((smoothedRTT ?? Self.initialRTT).nanoseconds, 1000)
        return 1.25 * Double(window) / (Double(rtt) / 1e9)
    }

    /// Bursts of up to the initial window (RFC 9002, 7.7), under a ceiling too: a sender that
    /// stays busy never saves that much credit, and one whose messages come in bursts (a chat)
    /// is not made to wait between them.
    private var burst: Double { Double(Self.initialWindow) }

    private mutating func refill(now: NIODeadline, smoothedRTT: TimeAmount?) {
        judgeCut(now: now)
        raiseCeiling(now: now, smoothedRTT: smoothedRTT)
        defer { creditAt = now }
        guard let creditAt, now > creditAt else { return }
        let earned = pacingRate(smoothedRTT) * Double((now - creditAt).nanoseconds) / 1e9
        credit = min(credit + earned, max(burst, credit))
    }

    private mutating func raiseCeiling(now: NIODeadline, smoothedRTT: TimeAmount?) {
        guard let current = ceiling, now - lastRaise >= Self.probeInterval else { return }
        lastRaise = now
        guard heldByCeiling else { return }
        heldByCeiling = false
        let raised = current * Self.probeGain
        ceiling = raised >= windowRate(smoothedRTT) ? nil : raised
    }
}

/// Bytes acknowledged over the last second, in ten slots of 100 ms.
struct DeliveryRate: Sendable, Equatable {
    private static let slotNanos: UInt64 = 100_000_000
    /// Eight full datagrams acknowledged or lost before a loss share means anything.
    static let minimumSample = 8 * CongestionController.maxDatagram
    private var slots = [UInt64](repeating: .max, count: 10)
    private var bytes = [Int](repeating: 0, count: 10)
    private var lostBytes = [Int](repeating: 0, count: 10)
    private var firstSent: NIODeadline?

    mutating func started(_ now: NIODeadline) {
        if firstSent == nil { firstSent = now }
    }

    mutating func record(_ count: Int, now: NIODeadline) {
        bytes[slotIndex(now)] += count
    }

    mutating func recordLoss(_ count: Int, now: NIODeadline) {
        lostBytes[slotIndex(now)] += count
    }

    private mutating func slotIndex(_ now: NIODeadline) -> Int {
        let slot = now.uptimeNanoseconds / Self.slotNanos
        let index = Int(slot % 10)
        if slots[index] != slot {
            slots[index] = slot
            bytes[index] = 0
            lostBytes[index] = 0
        }
        return index
    }

    /// Of the bytes acknowledged or found lost in this slot and the one before, the share lost.
    func lossShare(now: NIODeadline) -> Double {
        let slot = now.uptimeNanoseconds / Self.slotNanos
        var acked = 0
        var lost = 0
        for index in 0..<10 where slots[index] != .max && slot - slots[index] < 2 {
            acked += bytes[index]
            lost += lostBytes[index]
        }
        // Too little to tell a bottleneck from chance: one loss among a few acknowledgements.
        guard acked + lost >= Self.minimumSample else { return 0 }
        return Double(lost) / Double(acked + lost)
    }

    /// Bytes per second over the last second (the ten slots), or since the first send when
    /// that is shorter (at least 100 ms); nil before anything was sent.
    func rate(now: NIODeadline) -> Double? {
        guard let firstSent else { return nil }
        let slot = now.uptimeNanoseconds / Self.slotNanos
        var total = 0
        for index in 0..<10 where slots[index] != .max && slot - slots[index] < 10 { total += bytes[index] }
        // The ten slots cover from the start of the oldest to now.
        let covered = Int64(now.uptimeNanoseconds - (slot - 9) * Self.slotNanos)
        let span = min(max((now - firstSent).nanoseconds, Int64(Self.slotNanos)), covered)
        return Double(total) / (Double(span) / 1e9)
    }
}
