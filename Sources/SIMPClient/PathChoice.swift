import NIOCore
import SIMPCore

/// Which way the session's datagrams go, UDP or inside the control connection (the stream
/// path, docs/PROTOCOL.md section 2), and when to try which. A session starts binding over UDP;
/// when no `bound` has come `streamHeadStart` later, its BIND goes over the stream too (a race
/// with a head start for UDP, as Happy Eyeballs gives IPv6: RFC 8305). The server's `bound`
/// says which path it took (an empty `address`: the stream). On the stream, UDP is probed
/// with a BIND over UDP, every `probeStart` at first and doubling to `probeCap`; the server
/// challenges its address, and its `bound` after the answer moves both ends to UDP.
/// Pure: the caller supplies the time.
struct PathChoice: Sendable, Equatable {
    /// How long UDP has to answer the first BIND before the stream is tried too.
    static let streamHeadStart = TimeAmount.milliseconds(250)
    static let probeStart = TimeAmount.milliseconds(500)
    static let probeCap = TimeAmount.seconds(30)

    /// `--datagrams-over-stream auto`; with `never` the stream is never used.
    let allowed: Bool
    /// The path the server said it uses; nil until the session's first `bound`.
    private(set) var path: DatagramPath?
    private var openedAt: NIODeadline?
    private var streamBindSent = false
    private var probeInterval = Self.probeStart
    private var nextProbe: NIODeadline?

    init(allowed: Bool) {
        self.allowed = allowed
    }

    /// Datagrams go inside the control connection.
    var onStream: Bool { path == .stream }

    /// A new session: nothing is known of its paths.
    mutating func sessionOpened(now: NIODeadline) {
        path = nil
        openedAt = now
        streamBindSent = false
        probeInterval = Self.probeStart
        nextProbe = nil
    }

    /// The control connection closed: the session is gone.
    mutating func sessionEnded() {
        path = nil
        openedAt = nil
        nextProbe = nil
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
        guard said != path else { return nil }
        path = said
        if said == .stream {
            probeInterval = Self.probeStart
            nextProbe = now + probeInterval
        } else {
            nextProbe = nil
        }
        return said
    }

    /// On the stream: whether a BIND goes over UDP now, to see whether UDP works (again).
    mutating func udpProbeDue(now: NIODeadline) -> Bool {
        guard path == .stream, let due = nextProbe, now >= due else { return false }
        probeInterval = .nanoseconds(min(probeInterval.nanoseconds * 2, Self.probeCap.nanoseconds))
        nextProbe = now + probeInterval
        return true
    }

    /// When something of this is next due; nil when nothing is.
    var nextDeadline: NIODeadline? {
        if allowed, path == nil, !streamBindSent, let openedAt { return openedAt + Self.streamHeadStart }
        return nextProbe
    }
}
