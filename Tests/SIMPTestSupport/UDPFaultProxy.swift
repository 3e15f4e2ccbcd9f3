import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPChaos

/// What the proxy does to each datagram, in each direction.
public struct FaultProfile: Sendable {
    public var drop: Double
    public var duplicate: Double
    /// Each datagram is held a random 0...maxDelay; different delays reorder them.
    public var maxDelay: TimeAmount

    public init(drop: Double = 0, duplicate: Double = 0, maxDelay: TimeAmount = .zero) {
        self.drop = drop
        self.duplicate = duplicate
        self.maxDelay = maxDelay
    }
}

public struct FaultCounters: Sendable {
    public var forwarded = 0
    public var dropped = 0
    public var duplicated = 0
    /// Dropped because the relay was blocked (`block(true)`), client to server and back; not
    /// counted in `dropped`.
    public var blockedToServer = 0
    public var blockedToClients = 0
}

/// A UDP relay between clients and a server that drops, duplicates, delays and so reorders
/// datagrams. Every decision comes from one seeded generator on one event loop, so a seed
/// gives the same decisions for the same sequence of datagrams.
public final class UDPFaultProxy: @unchecked Sendable {
    public let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let loop: any EventLoop
    private let downstream: any Channel
    private let server: SocketAddress
    private let profile: FaultProfile
    // Confined to `loop`.
    private var rng: SplitMix64
    private var upstreams: [SocketAddress: any Channel] = [:]
    private var tally = FaultCounters()
    /// How many more server-to-client datagrams may pass; nil: no gate.
    private var toClientAllowance: Int?
    /// Every datagram dropped, both ways, before the profile sees it.
    private var blocked = false

    public init(serverPort: Int, profile: FaultProfile, seed: UInt64) throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        loop = group.next()
        server = try SocketAddress(ipAddress: "127.0.0.1", port: serverPort)
        self.profile = profile
        rng = SplitMix64(seed: seed)
        let box = NIOLockedValueBox<UDPFaultProxy?>(nil)
        downstream = try DatagramBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Relay { envelope in
                        box.withLockedValue { $0 }?.fromClient(envelope)
                    })
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = downstream.localAddress!.port!
        box.withLockedValue { $0 = self }
    }

    public func counters() throws -> FaultCounters {
        try loop.submit { self.tally }.wait()
    }

    /// From now on lets only `count` more datagrams from the server through to clients (nil:
    /// all of them again), on top of the profile's faults.
    public func allowToClients(_ count: Int?) throws {
        try loop.submit { self.toClientAllowance = count }.wait()
    }

    /// Drops every datagram both ways from now on (`true`), or lets them through again (`false`,
    /// as at the start), under the profile's faults. UDP blocked for a while, as a network that
    /// stops letting UDP through does; the relay's generator is not drawn from meanwhile.
    public func block(_ on: Bool) throws {
        try loop.submit { self.blocked = on }.wait()
    }

    public func shutdown() {
        try? group.syncShutdownGracefully()
    }

    private func fromClient(_ envelope: AddressedEnvelope<ByteBuffer>) {
        let client = envelope.remoteAddress
        if blocked {
            tally.blockedToServer += 1
            return
        }
        if let upstream = upstreams[client] {
            impair(envelope.data, via: upstream, to: server)
            return
        }
        DatagramBootstrap(group: loop)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Relay { [self] reply in
                        if blocked {
                            tally.blockedToClients += 1
                            return
                        }
                        if let allowance = toClientAllowance {
                            guard allowance > 0 else {
                                tally.dropped += 1
                                return
                            }
                            toClientAllowance = allowance - 1
                        }
                        impair(reply.data, via: downstream, to: client)
                    })
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .whenSuccess { [self] upstream in
                upstreams[client] = upstream
                impair(envelope.data, via: upstream, to: server)
            }
    }

    private func impair(_ data: ByteBuffer, via channel: any Channel, to target: SocketAddress) {
        if rng.nextDouble() < profile.drop {
            tally.dropped += 1
            return
        }
        let copies = rng.nextDouble() < profile.duplicate ? 2 : 1
        if copies == 2 { tally.duplicated += 1 }
        for _ in 0..<copies {
            tally.forwarded += 1
            let delay = TimeAmount.nanoseconds(Int64(rng.nextDouble() * Double(profile.maxDelay.nanoseconds)))
            let envelope = AddressedEnvelope(remoteAddress: target, data: data)
            if delay == .zero {
                channel.writeAndFlush(envelope, promise: nil)
            } else {
                loop.scheduleTask(in: delay) { channel.writeAndFlush(envelope, promise: nil) }
            }
        }
    }
}

private final class Relay: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let forward: (AddressedEnvelope<ByteBuffer>) -> Void

    init(_ forward: @escaping (AddressedEnvelope<ByteBuffer>) -> Void) { self.forward = forward }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        forward(unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {}
}

/// The seeded generator of the chaos runs, so fault runs here can be repeated as well.
public typealias SplitMix64 = SIMPChaos.SplitMix64
