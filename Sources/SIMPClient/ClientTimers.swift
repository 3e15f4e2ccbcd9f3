import NIOCore

/// When the client's periodic work falls due, with no clock of its own: the caller passes
/// `now` and what it waits on, and keeps one task scheduled for `nextTick`.
///
/// The tick comes every 10 ms while something waits on a short timer (a gap, a bind not yet
/// confirmed, messages queued behind the window); when the next resend can fall due while a
/// message waits for the server's acceptance; and otherwise when the next keepalive or
/// delivery query is due. So an idle client costs next to nothing however many share a
/// process, and neither does a waiting one: ticking every 10 ms while any message waited, the
/// 5,000 clients of a starved `simp-bench` spent their process on rescheduling timers.
struct ClientTimers: Sendable {
    /// Short waits are looked at this often; the RTO floor is 20 ms.
    static let fastTick = TimeAmount.milliseconds(10)
    /// A tick later than its deadline by more than this was this client not running (a starved
    /// CPU, a suspended process): the excess is taken off the resend timers
    /// (`RetransmitQueue.stalled`), as the server takes off gaps between its looks.
    static let stallAllowance = TimeAmount.milliseconds(30)
    /// With no session open there is nothing to send, but a look now and then costs little.
    static let idleLook = TimeAmount.seconds(1)
    /// Delivery is derived from the recipient's confirmed mark, so a lost notice (e.g. its
    /// receipt was stored just as Redis went away) is asked about again this often.
    static let deliveryQueryInterval = TimeAmount.seconds(5)
    /// The resends a gap report asks for can be lost too; without another arrival to prompt
    /// it, the gap would wait for the next message, which may never come.
    static let gapRetry = TimeAmount.seconds(1)
    static let unsavedRetryCap = TimeAmount.seconds(30)
    /// An arrival that shows the same gap again reports it no more often than this.
    static let gapRepeat = TimeAmount.milliseconds(200)

    enum Path: Sendable, Equatable {
        case closed
        /// A session is open and its UDP path not yet confirmed.
        case binding
        case bound
    }

    /// What the client waits on, read afresh for each decision.
    struct Waits: Sendable, Equatable {
        var path: Path
        var acceptance = false
        var delivery = false
        /// A received message is held behind a gap.
        var gap = false
        /// Messages that could not be kept (a full disk) are to be asked for again, with
        /// nothing held behind them: asked for after `unsavedRetry`, with no fast tick between.
        var unsaved = false
        /// Messages wait behind the congestion window (a policer is watched for at every tick).
        var queued = false
    }

    struct Due: Sendable, Equatable {
        var resend = false
        var bind = false
        var deliveryQuery = false
        var gapReport = false
        var keepalive = false
    }

    let keepaliveInterval: TimeAmount
    let bindRetry: TimeAmount
    private(set) var running = false
    /// The deadline of the task scheduled now, if any.
    private(set) var armed: NIODeadline?
    private var lastKeepalive: NIODeadline = .distantPast
    private var lastBind: NIODeadline = .distantPast
    private var lastDeliveryQuery: NIODeadline = .distantPast
    private var lastGapReport: (first: UInt64, at: NIODeadline) = (0, .distantPast)
    /// Asks for messages that could not be kept since one was kept (`unsavedRetry`).
    private var unsavedAsks = 0

    init(keepaliveInterval: TimeAmount, bindRetry: TimeAmount) {
        self.keepaliveInterval = keepaliveInterval
        self.bindRetry = bindRetry
    }

    // MARK: the scheduled task

    mutating func start() { running = true }

    mutating func stop() {
        running = false
        armed = nil
    }

    /// Whether the task must be scheduled again for `deadline`: arming only ever brings the
    /// next tick closer, and a stopped client has none.
    mutating func arm(_ deadline: NIODeadline) -> Bool {
        guard running else { return false }
        if let armed, armed <= deadline { return false }
        armed = deadline
        return true
    }

    mutating func fired() { armed = nil }

    // MARK: what is due

    func due(_ waits: Waits, now: NIODeadline) -> Due {
        let bound = waits.path == .bound
        return Due(
            resend: waits.acceptance,
            bind: waits.path == .binding && now - lastBind >= bindRetry,
            deliveryQuery: bound && waits.delivery && now - lastDeliveryQuery >= Self.deliveryQueryInterval,
            gapReport: bound && ((waits.gap && now - lastGapReport.at >= Self.gapRetry)
                || (waits.unsaved && now - lastGapReport.at >= unsavedRetry)),
            keepalive: bound && now - lastKeepalive >= keepaliveInterval)
    }

    /// `resendsFrom`: nothing waiting for acceptance can fall due before it (`SendTracker`).
    func nextTick(_ waits: Waits, now: NIODeadline, resendsFrom: NIODeadline) -> NIODeadline {
        let soon = now + Self.fastTick
        if waits.gap || waits.queued || waits.path == .binding { return soon }
        var resting = restingDeadline(waits, now: now)
        if waits.unsaved, waits.path == .bound { resting = min(resting, lastGapReport.at + unsavedRetry) }
        return max(soon, waits.acceptance ? min(resting, resendsFrom) : resting)
    }

    /// How much of the time since the tick's deadline this client was not running.
    func stall(firedAt now: NIODeadline) -> TimeAmount {
        guard let armed, now - armed > Self.stallAllowance else { return .zero }
        return now - armed - Self.stallAllowance
    }

    /// At rest the next thing due is a keepalive or a delivery query.
    private func restingDeadline(_ waits: Waits, now: NIODeadline) -> NIODeadline {
        let next = waits.path == .bound ? lastKeepalive + keepaliveInterval : now + Self.idleLook
        guard waits.delivery else { return next }
        return min(next, lastDeliveryQuery + Self.deliveryQueryInterval)
    }

    /// Once per gap (named by its first missing seq), again after `gapRepeat`.
    func mayReportGap(first: UInt64, now: NIODeadline) -> Bool {
        first != lastGapReport.first || now - lastGapReport.at >= Self.gapRepeat
    }

    // MARK: what was sent

    mutating func keepaliveSent(at now: NIODeadline) { lastKeepalive = now }
    mutating func bindSent(at now: NIODeadline) { lastBind = now }
    mutating func deliveryQuerySent(at now: NIODeadline) { lastDeliveryQuery = now }
    mutating func gapReported(first: UInt64, at now: NIODeadline) { lastGapReport = (first, now) }

    /// How long after the last ask messages that could not be kept are asked for again: 1 s,
    /// doubling with each ask to 30 s, as a disk that stays full fails each of them again (and
    /// the server counts each resend a loss).
    var unsavedRetry: TimeAmount {
        TimeAmount.nanoseconds(min(Self.gapRetry.nanoseconds << min(unsavedAsks, 5), Self.unsavedRetryCap.nanoseconds))
    }

    /// Messages that could not be kept were asked for again.
    mutating func unsavedAskedFor() { unsavedAsks += 1 }

    /// A write of received messages failed at `now`: they are first asked for `unsavedRetry`
    /// later, not at once (the disk that refused them is most likely still full).
    mutating func unsavedFailed(at now: NIODeadline) { lastGapReport.at = now }

    /// A write of received messages succeeded: the next failure is asked for after 1 s again.
    mutating func unsavedKept() { unsavedAsks = 0 }
}
