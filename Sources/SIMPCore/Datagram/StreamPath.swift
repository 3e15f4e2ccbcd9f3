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
