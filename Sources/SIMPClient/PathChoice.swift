import NIOCore
import SIMPCore

/// Which way the session's datagrams go, UDP or inside the control connection (the stream
/// path, docs/PROTOCOL.md section 2), and when to try which. A session starts binding over UDP;
/// when no `bound` has come `streamHeadStart` later, its BIND goes over the stream too (a race
/// with a head start for UDP, as Happy Eyeballs gives IPv6: RFC 8305). The server's `bound`
/// says which path it took (an empty `address`: the stream).
///
/// On UDP, `UDPSilence` watches the retransmit timeouts: when UDP has gone quiet (three in a
/// row and a second without an answer), or messages wait behind a policer far below the
/// stream's rate, an empty BIND over the stream asks the server to move the session there
/// (Losing UDP, Throttled UDP). On the stream, UDP is probed with a BIND over UDP; the server
/// challenges its address, and its `bound` after the answer moves both ends to UDP. The probes'
/// back-off: a session that took the stream at its start (UDP never worked) probes after
/// `probeStart`, doubling to `probeCap`; one that lost UDP mid-session probes after
/// `fallProbeStart` for its first fall, twice as long for each further fall in the session
/// (a path that breaks again is tried ever more rarely), doubling to `fallProbeCap`.
/// Pure: the caller supplies the time.
struct PathChoice: Sendable, Equatable {
    /// How long UDP has to answer the first BIND before the stream is tried too.
    static let streamHeadStart = TimeAmount.milliseconds(250)
    static let probeStart = TimeAmount.milliseconds(500)
    static let probeCap = TimeAmount.seconds(30)
    /// The first probe after UDP was lost mid-session (the first fall), and the cap then.
    static let fallProbeStart = TimeAmount.seconds(2)
    static let fallProbeCap = TimeAmount.minutes(10)

    /// `--datagrams-over-stream auto`; with `never` the stream is never used.
    let allowed: Bool
    /// The path the server said it uses; nil until the session's first `bound`.
    private(set) var path: DatagramPath?
    private var openedAt: NIODeadline?
    private var streamBindSent = false
    private var probeInterval = Self.probeStart
    private var nextProbe: NIODeadline?
    /// How often this session lost UDP after having it.
    private(set) var falls = 0
    private var silence = UDPSilence(now: .distantPast)
    /// The stream was asked for and the server's `bound` has not come yet.
    private var streamAsked = false

    init(allowed: Bool) {
        self.allowed = allowed
    }

    /// Datagrams go inside the control connection.
    var onStream: Bool { path == .stream }

    /// A new session: nothing is known of its paths (a reconnect often follows a network
    /// change, so it starts with the race again).
    mutating func sessionOpened(now: NIODeadline) {
        path = nil
        openedAt = now
        streamBindSent = false
        probeInterval = Self.probeStart
        nextProbe = nil
        falls = 0
        streamAsked = false
    }

    /// The control connection closed: the session is gone.
    mutating func sessionEnded() {
        path = nil
        openedAt = nil
        nextProbe = nil
        streamAsked = false
    }

    /// Whether the BIND goes over the stream now: once per session, `streamHeadStart` after
    /// it opened while the server has not answered.
    mutating func streamBindDue(now: NIODeadline) -> Bool {
        guard allowed, path == nil, !streamBindSent, let openedAt, now - openedAt >= Self.streamHeadStart else { return false }
        streamBindSent = true
        return true
    }

    /// The server's `bound` named `address` (empty: the stream); the path when it changed.
    mutating func bound(address: String, now: NIODeadline) -> DatagramPath? {
        let said: DatagramPath = address.isEmpty ? .stream : .udp
        streamAsked = false
        guard said != path else {
            // Still UDP after the stream was asked for: the server heard from us; start over.
            if said == .udp { silence = UDPSilence(now: now) }
            return nil
        }
        let before = path
        path = said
        if said == .stream {
            if before == .udp {
                falls += 1
                let start = Self.fallProbeStart.nanoseconds << min(falls - 1, 16)
                probeInterval = .nanoseconds(min(start, Self.fallProbeCap.nanoseconds))
            } else {
                probeInterval = Self.probeStart
            }
            nextProbe = now + probeInterval
        } else {
            nextProbe = nil
            silence = UDPSilence(now: now)
        }
        return said
    }

    /// On UDP, an answer to what went over it (or a datagram from the server): UDP works.
    mutating func udpHeard(now: NIODeadline) {
        guard path == .udp else { return }
        silence.heard(now: now)
    }

    /// On UDP, a retransmit timer went off: whether UDP now counts as lost, so that the BIND
    /// asking for the stream goes now (once until the server answers).
    mutating func udpTimedOut(now: NIODeadline) -> Bool {
        guard allowed, path == .udp, !streamAsked else { return false }
        silence.timeout()
        guard silence.lost(now: now) else { return false }
        streamAsked = true
        return true
    }

    /// On UDP, messages wait behind a policer far below the stream's rate: whether the BIND
    /// asking for the stream goes now (once until the server answers).
    mutating func udpThrottled() -> Bool {
        guard allowed, path == .udp, !streamAsked else { return false }
        streamAsked = true
        return true
    }

    /// On the stream: whether a BIND goes over UDP now, to see whether UDP works (again).
    mutating func udpProbeDue(now: NIODeadline) -> Bool {
        guard path == .stream, let due = nextProbe, now >= due else { return false }
        let cap = falls > 0 ? Self.fallProbeCap : Self.probeCap
        probeInterval = .nanoseconds(min(probeInterval.nanoseconds * 2, cap.nanoseconds))
        nextProbe = now + probeInterval
        return true
    }

    /// The network changed (the application rebound the datagram socket, `rebindUDP`: a new
    /// interface, address or route): on the stream, UDP is probed at once and its back-off
    /// starts over, as a browser retries a broken QUIC path after a network change. The falls
    /// are kept: a path that broke on the old network says nothing of the new one, but a third
    /// fall on the new one still waits longer.
    mutating func networkChanged(now: NIODeadline) {
        guard path == .stream else { return }
        // Halved: the probe due now doubles it, so the next one comes a whole start later.
        let start = falls > 0 ? Self.fallProbeStart : Self.probeStart
        probeInterval = .nanoseconds(start.nanoseconds / 2)
        nextProbe = now
    }

    /// When something of this is next due; nil when nothing is.
    var nextDeadline: NIODeadline? {
        if allowed, path == nil, !streamBindSent, let openedAt { return openedAt + Self.streamHeadStart }
        return nextProbe
    }
}
