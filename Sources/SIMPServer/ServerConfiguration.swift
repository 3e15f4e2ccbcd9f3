import NIOCore
import SIMPCore
import SIMPRedis

public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 binds a free port.
    public var port = 7700
    /// nil: port + 1 (or a free port when port is 0); 0: a free port.
    public var udpPort: Int?
    public var redis = RedisConfiguration()
    public var nodeID = "node-1"
    /// Both ends ping after this much silence and drop the peer after three of them.
    public var heartbeat: TimeAmount = .seconds(10)
    public var maxFrameLength = Frame.defaultMaxLength
    /// How long to wait for Redis at start-up before giving up.
    public var redisWait: TimeAmount = .seconds(30)
    public var namespace = "simp"
    public var inboxLimit = 10_000
    public var pushRetransmit = RetransmitPolicy(maxBackoff: .seconds(4), giveUpAfter: .seconds(60))
    /// scrypt cost N; lower it only for tests.
    public var scryptRounds = 16_384

    public init() {}

    var resolvedUDPPort: Int {
        if let udpPort { return udpPort }
        return port == 0 ? 0 : port + 1
    }
}

/// Where the server ended up listening.
public struct ServerAddresses: Sendable, CustomStringConvertible {
    public var host: String
    public var tcpPort: Int
    public var udpPort: Int
    public var nodeID: String

    /// The ready line scripts wait for.
    public var description: String {
        "simp-server listening tcp=\(host):\(tcpPort) udp=\(host):\(udpPort) node=\(nodeID)"
    }
}
