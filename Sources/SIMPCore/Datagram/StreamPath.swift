import NIOCore

/// Whether datagrams may travel inside the control connection when UDP does not work
/// (docs/PROTOCOL.md, section 2, The stream path): `--datagrams-over-stream` of the server and
/// the client.
public enum DatagramsOverStream: String, Sendable, CaseIterable {
    /// UDP where it works, the control connection where it does not.
    case auto
    /// UDP only: a client whose BIND is never answered over UDP cannot send or receive.
    case never
}

/// Which way a session's datagrams travel: UDP, or inside its control connection (the stream
/// path), as the server's last `bound` said.
public enum DatagramPath: String, Sendable, CaseIterable {
    case udp, stream
}

/// Whether UDP has gone quiet under a session while something waited for an answer over it
/// (docs/PROTOCOL.md, section 2, Losing UDP): `timeouts` retransmit timeouts in a row and
/// `silence` since the last sign of life. Either end keeps one: the client's signs are the
/// server's answers to what it sent over UDP (and any datagram over UDP), the server's are the
/// client's receipts and its datagrams over UDP. Pure: the caller supplies the time.
public struct UDPSilence: Sendable, Equatable {
    /// Retransmit timeouts in a row, with no sign of life between them.
    public static let timeouts = 3
    /// How long without a sign of life at least: a few timeouts of a fast path come in tens of
    /// milliseconds, and a short blip should not move a session.
    public static let silence = TimeAmount.seconds(1)

    public private(set) var timedOut = 0
    public private(set) var lastHeard: NIODeadline

    public init(now: NIODeadline) {
        lastHeard = now
    }

    /// Something came back over the path (or proves what went over it arrived).
    public mutating func heard(now: NIODeadline) {
        timedOut = 0
        lastHeard = max(lastHeard, now)
    }

    /// A retransmit timer went off with nothing heard since the last.
    public mutating func timeout() {
        timedOut += 1
    }

    /// UDP counts as lost now.
    public func lost(now: NIODeadline) -> Bool {
        timedOut >= Self.timeouts && now - lastHeard >= Self.silence
    }
}
