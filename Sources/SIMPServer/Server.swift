import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ServiceLifecycle
import SIMPCore
import SIMPRedis

public struct StartupError: Error, CustomStringConvertible {
    public let description: String
}

/// The SIMP server: a control listener (TCP), a datagram socket (UDP), a router, and Redis.
/// As a `Service` it runs until graceful shutdown, then stops accepting, finishes the
/// in-flight Redis writes and closes.
///
/// Checked `Sendable`: `start()`, `stop()`, `sessionCount()` and a reload may run on different
/// tasks, so what `start()` makes is kept in one locked place (`running`), never in plain vars.
public final class SIMPServer: Service, Sendable {
    public let configuration: ServerConfiguration
    private let logger: Logger
    private let onReady: @Sendable (ServerAddresses) -> Void
    private let group: MultiThreadedEventLoopGroup
    private let heartbeats = HeartbeatWheels()
    private let workers: NIOThreadPool
    let metrics: ServerMetrics
    private let controls = ChannelRegistry()
    /// What each new control connection is built from; a reload replaces it.
    let live = NIOLockedValueBox<LiveSettings?>(nil)
    private let running = NIOLockedValueBox(Running())

    /// Everything `start()` makes that `stop()` undoes. `start()` adds each piece as soon as it
    /// exists, so a start that fails half way is undone too; `stop()` takes it all at once.
    private struct Running: Sendable {
        /// Made once Redis answered and said whether it is a cluster.
        var redis: (any RedisClient)?
        var nodeRecord: NodeRecord?
        var store: MessageStore?
        var router: Router?
        var subscribers: [RedisSubscriber] = []
        var udp: (any Channel)?
        var tcp: (any Channel)?
        var metricsChannel: (any Channel)?
        /// Set by `stop()`: a `start()` still under way must not add what nothing would undo.
        var stopped = false
    }

    var router: Router? { running.withLockedValue { $0.router } }
    var store: MessageStore? { running.withLockedValue { $0.store } }

    /// Records a piece `start()` made, for `stop()`; throws once `stop()` has begun (the
    /// piece then goes with the event loops' shutdown, which closes their channels).
    private func keep(_ add: (inout Running) -> Void) throws {
        try running.withLockedValue { state in
            guard !state.stopped else { throw StartupError(description: "the server was stopped while it was starting") }
            add(&state)
        }
    }

    public init(configuration: ServerConfiguration, logger: Logger = Logger(label: "simp.server"),
                onReady: @escaping @Sendable (ServerAddresses) -> Void = { _ in }) {
        self.configuration = configuration
        self.logger = logger
        self.onReady = onReady
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.eventLoops))
        let metrics = ServerMetrics()
        self.metrics = metrics
        self.workers = NIOThreadPool(numberOfThreads: PasswordHasher.threads(rounds: configuration.scryptRounds))
        workers.start()
    }

    public func run() async throws {
        let addresses: ServerAddresses
        do {
            addresses = try await start()
        } catch {
            await stop()
            throw error
        }
        onReady(addresses)
        try? await gracefulShutdown()
        logger.info("shutting down")
        await stop()
    }

    /// OpenSSL sets itself up on first use: done now, on every loop, so a node's first
    /// datagrams do not wait for it and its memory is not taken for the sessions'.
    private func prepareSealing() async throws {
        for loop in group.makeIterator() {
            guard try await loop.submit({ DatagramSeal.prepareThread() }).get() else {
                throw StartupError(description: "OpenSSL cannot make a ChaCha20-Poly1305 context; datagrams cannot be sealed")
            }
        }
    }

    /// Binds both sockets once Redis answers; returns where they listen.
    public func start() async throws -> ServerAddresses {
        try await prepareSealing()
        let (redis, secret) = try await connectRedis()
        let record = NodeRecord(redis: redis, keys: Keys(prefix: configuration.namespace), nodeID: configuration.nodeID,
                                loop: group.next(), logger: logger)
        // Kept before the claim, so a stop() while it waits lets go of whatever it took.
        try keep { $0.nodeRecord = record }
        try await record.claim()
        record.keepRenewing()
        var storeSettings = StoreSettings(namespace: configuration.namespace, inboxLimit: configuration.inboxLimit)
        storeSettings.presenceTTLSeconds = configuration.presenceTTLSeconds
        storeSettings.inboxShare = min(configuration.inboxShare, configuration.inboxLimit)
        storeSettings.nodeID = configuration.nodeID
        storeSettings.maxDevicesPerUser = configuration.maxDevicesPerUser
        storeSettings.maxGroupMembers = configuration.maxGroupMembers
        storeSettings.maxGroupsPerUser = configuration.maxGroupsPerUser
        storeSettings.contactRequestsPerHour = configuration.contactRequestsPerHour
        storeSettings.minReplicas = configuration.redisMinReplicas
        storeSettings.replicaTimeoutMillis = configuration.redisReplicaTimeout.nanoseconds / 1_000_000
        let store = MessageStore(redis: redis, settings: storeSettings) { [metrics] depth in
            metrics.inboxDepth.record(Double(depth))
        }
        try keep { $0.store = store }
        var hasher = PasswordHasher()
        hasher.rounds = configuration.scryptRounds
        let tls = try configuration.tls.map(Self.makeTLS)
        let accounts = Accounts(store: store, hasher: hasher, tokens: TokenSigner(secret: secret), workers: workers,
                                metrics: metrics, limits: configuration.limits)
        let loop = group.next()
        var settings = RouterSettings(nodeID: configuration.nodeID, heartbeat: configuration.heartbeat,
                                      retransmit: configuration.pushRetransmit)
        settings.messagesPerSecond = configuration.limits.messagesPerSecond
        settings.messageBurst = configuration.limits.messageBurst
        settings.maxMessageBytes = configuration.limits.maxMessageBytes
        settings.sealedOnly = configuration.endToEnd == .required
        settings.datagramsOverStream = configuration.datagramsOverStream == .auto
        settings.newRecipientsPerHour = configuration.limits.newRecipientsPerHour
        let router = Router(loop: loop, store: store, settings: settings, metrics: metrics, logger: logger)
        try keep { $0.router = router }
        let udp = try await bindUDP(router: router, on: loop)
        try keep { $0.udp = udp }
        let admission = Admission(limits: configuration.limits, metrics: metrics)
        try await loop.submit {
            router.udp = udp
            router.charge = { user, units, now in admission.charge(user, units, now: now) }
            router.start()
        }.get()
        let logins = LoginTable()
        try await listen(router: router, logins: logins, redis: redis, admin: store.keys.adminChannel,
                         node: store.keys.nodeChannel(configuration.nodeID))
        var node = ControlContext(accounts: accounts, router: router, connections: controls, logins: logins,
                                  admission: admission,
                                  metrics: metrics, logger: logger, unreadGrace: configuration.limits.unreadGrace)
        node.maxFrameLength = configuration.maxFrameLength
        node.sealedOnly = configuration.endToEnd == .required
        node.anonymousFrameLength = min(configuration.limits.anonymousFrameLength, configuration.maxFrameLength)
        live.withLockedValue { $0 = LiveSettings(control: node, limits: configuration.limits, tls: tls) }
        let tcp = try await bindTCP()
        try keep { $0.tcp = tcp }
        var metricsChannel: (any Channel)?
        if let port = configuration.metricsPort {
            var readiness = Readiness(redis: redis, listeners: [("tcp", tcp), ("udp", udp)])
            readiness.shardsShort = { [metrics] in metrics.shardsShort }
            readiness.minReplicas = configuration.redisMinReplicas
            let channel = try await bindMetrics(port: port, readiness: readiness, sessions: { router.pathReport() })
            try keep { $0.metricsChannel = channel }
            metricsChannel = channel
        }
        return ServerAddresses(host: configuration.host, tcpPort: tcp.localAddress?.port ?? 0,
                               udpPort: udp.localAddress?.port ?? 0, nodeID: configuration.nodeID, tls: tls != nil,
                               metricsPort: metricsChannel?.localAddress?.port, metricsHost: configuration.metricsHost)
    }

    /// Every metric in the Prometheus text format (what GET /metrics serves).
    public func metricsText() -> String {
        metrics.render()
    }

    /// Reads the certificate chain and key from their files (again, on a reload).
    static func makeTLS(_ tls: ServerTLS) throws(StartupError) -> LiveTLS {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(tls.certificateChainPath)
            let key = try NIOSSLPrivateKey(file: tls.privateKeyPath, format: .pem)
            var settings = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(key))
            settings.minimumTLSVersion = .tlsv12
            return LiveTLS(context: try NIOSSLContext(configuration: settings), chain: chain)
        } catch {
            throw StartupError(description: "cannot use TLS certificate \(tls.certificateChainPath) with key \(tls.privateKeyPath): \(error)")
        }
    }

    /// Other nodes' notices and `simp-admin`'s requests reach this node through Redis' sharded
    /// pub/sub (each channel on the master of its slot), on the router's loop.
    private func listen(router: Router, logins: LoginTable, redis: any RedisClient, admin: String, node: String) async throws {
        let logger = logger
        let notices = subscriber(node, redis: redis, loop: router.loop) { payload in
            guard let notice = NodeNotice(payload: payload) else {
                logger.warning("unreadable notice", metadata: ["channel": "\(node)", "bytes": "\(payload.count)"])
                return
            }
            router.received(notice)
        }
        notices.onResubscribed = { router.catchUpEverySession() }
        let requests = subscriber(admin, redis: redis, loop: router.loop) { payload in
            guard let request = AdminRequest(String(decoding: payload, as: UTF8.self)) else {
                logger.warning("unreadable admin request", metadata: ["channel": "\(admin)", "bytes": "\(payload.count)"])
                return
            }
            switch request {
            case .disconnect(let user, let session):
                router.closeByAdministrator(user: user, session: session)
            case .endDevice(let user, let device, let by, let at):
                let error = Simp_Envelope.error(.sessionClosed, "this device was revoked from \(user)'s device \(by)")
                // The admin request is this driver's event: its one clock read.
                router.metrics.loginsEnded.increment(by: Int64(logins.revoked(user: user, device: device, at: at, with: error, now: .now())))
            case .endLogins(let user, let why, let asker, let connection):
                let except = asker == router.store.settings.nodeID ? connection : nil
                let error = Simp_Envelope.error(.sessionClosed, why.reason)
                router.metrics.loginsEnded.increment(by: Int64(logins.close(user: user, except: except, with: error)))
            }
        }
        let subscribers = [notices, requests]
        try keep { $0.subscribers = subscribers }
        for listener in subscribers { listener.start() }
        for listener in subscribers { try await listener.subscribed.get() }
    }

    private func subscriber(_ channel: String, redis: any RedisClient, loop: any EventLoop,
                            onMessage: @escaping @Sendable ([UInt8]) -> Void) -> RedisSubscriber {
        let template = configuration.redis.nodes[0]
        return RedisSubscriber(shardedChannels: [channel], locate: { loop in
            redis.master(forKey: channel, on: loop).map { node in
                var configuration = template
                configuration.host = node.host
                configuration.port = node.port
                return configuration
            }
        }, loop: loop, logger: logger) { _, payload in onMessage(payload) }
    }

    /// Stops accepting, answers every queued store, then closes everything.
    public func stop() async {
        let made = running.withLockedValue { state in
            defer { state = Running(stopped: true) }
            return state
        }
        for listener in made.subscribers { try? await listener.stop().get() }
        try? await made.tcp?.close()
        try? await made.metricsChannel?.close()
        if let router = made.router {
            try? await router.loop.flatSubmit { router.drainStores() }.get()
            try? await router.loop.submit { router.stop() }.get()
        }
        await controls.closeAll()
        try? await made.udp?.close()
        await made.nodeRecord?.release()
        await made.redis?.shutdown()
        try? await workers.shutdownGracefully()
        try? await group.shutdownGracefully()
    }

    /// Sessions open on this node (for tests and metrics).
    public func sessionCount() async -> Int {
        guard let router = running.withLockedValue({ $0.router }) else { return 0 }
        return (try? await router.loop.submit { router.sessionCount }.get()) ?? 0
    }

    /// The Redis client, once Redis answers, and the token secret all nodes share. Until then
    /// the client is this function's: one that never got an answer is shut down here.
    private func connectRedis() async throws -> (any RedisClient, [UInt8]) {
        var client: (any RedisClient)?
        do {
            let secret = try await waitForRedis(&client)
            guard let client else { throw StartupError(description: "no Redis client was made") }
            try keep { $0.redis = client }
            return (client, secret)
        } catch {
            await client?.shutdown()
            throw error
        }
    }

    /// Makes `client` once and keeps it for every attempt (it reconnects by itself); what a
    /// failure comes to is `RedisWait`'s to say.
    private func waitForRedis(_ client: inout (any RedisClient)?) async throws -> [UInt8] {
        var wait = RedisWait(from: .now(), wait: configuration.redisWait)
        var deployment = configuration.redis
        while true {
            do {
                deployment = try await deployment.resolved()
                let redis = client ?? makeClient(deployment)
                client = redis
                let secret = try await MessageStore(redis: redis, settings: StoreSettings(namespace: configuration.namespace))
                    .sharedSecret(candidate: randomBytes(32))
                if deployment.isCluster { logger.info("using a Redis Cluster", metadata: ["seeds": "\(deployment)"]) }
                return secret
            } catch {
                let nodes = deployment.nodes.map { "\($0.host):\($0.port)" }.joined(separator: ",")
                // The failure is this driver's event: its one clock read.
                switch wait.failed(error, deployment: "\(deployment)", nodes: nodes, now: .now()) {
                case .giveUp(let reason):
                    throw StartupError(description: reason)
                case .again(let log, let after):
                    if let log { logger.error("\(log)") }
                    // The client is not in `running` yet, so stop() cannot end this wait for it.
                    try keep { _ in }
                    try await Task.sleep(for: .nanoseconds(after.nanoseconds))
                }
            }
        }
    }

    private func makeClient(_ deployment: RedisDeployment) -> any RedisClient {
        let metrics = metrics
        return deployment.makeClient(logger: logger) { roundTrip in metrics.redisRoundTrip.record(roundTrip) }
    }

    private func bindUDP(router: Router, on loop: any EventLoop) async throws -> any Channel {
        try await DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(.so_rcvbuf), value: 4 << 20)
            .channelOption(.socketOption(.so_sndbuf), value: 4 << 20)
            // recvmmsg: a burst of datagrams costs one syscall, not one each.
            .channelOption(.datagramVectorReadMessageCount, value: 32)
            // One recvmmsg per wake-up: epoll is level-triggered, so datagrams left over are read
            // on the loop's next turn; reading again until EAGAIN cost a syscall per wake-up.
            .channelOption(.maxMessagesPerRead, value: 1)
            // Vector reads split the receive buffer evenly: room for 32 datagrams of the largest size.
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 32 * 2048))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(DatagramHandler(router: router))
                }
            }
            .bind(host: configuration.host, port: configuration.resolvedUDPPort)
            .get()
    }

    private func bindTCP() async throws -> any Channel {
        let configuration = self.configuration
        let live = self.live
        let heartbeats = self.heartbeats
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 << 10, high: 1 << 20))
            // Each connection keeps its read buffer between reads; control frames are small, so
            // it starts small and grows only for a connection that reads more at once.
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 256, maximum: 64 << 10))
            .childChannelInitializer { channel in
                // Read once per connection: a reload changes what later connections get, never
                // the handlers of this one.
                let settings = live.withLockedValue { $0 }
                return channel.eventLoop.makeCompletedFuture {
                    // start() sets it before binding, so this only guards against a future reorder.
                    guard let settings else { throw ChannelError.ioOnClosedChannel }
                    let heartbeat = heartbeats.wheel(on: channel.eventLoop, heartbeat: Heartbeat(interval: configuration.heartbeat))
                    let sync = channel.pipeline.syncOperations
                    if let tls = settings.tls { try sync.addHandler(NIOSSLServerHandler(context: tls.context)) }
                    let framing = EnvelopeFraming(maxFrameLength: settings.control.anonymousFrameLength,
                                                  frameDeadline: settings.limits.frameDeadline, heartbeat: heartbeat)
                    try sync.addHandler(ControlHandler(settings.control, framing: framing))
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
    }

    private func bindMetrics(port: Int, readiness: Readiness,
                             sessions: @escaping @Sendable () -> EventLoopFuture<String>) async throws -> any Channel {
        let metrics = self.metrics
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMapThrowing {
                    try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(metrics: metrics, readiness: readiness, sessions: sessions))
                }
            }
            .bind(host: configuration.metricsHost, port: port)
            .get()
    }
}

/// Open control channels, so shutdown can close them.
final class ChannelRegistry: Sendable {
    private let channels = NIOLockedValueBox([ObjectIdentifier: any Channel]())

    /// Its owner removes it when it closes: a callback on its close future would cost every
    /// connection another allocation or two.
    func add(_ channel: any Channel) {
        channels.withLockedValue { $0[ObjectIdentifier(channel)] = channel }
    }

    func remove(_ channel: any Channel) {
        _ = channels.withLockedValue { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    func closeAll() async {
        let open = channels.withLockedValue { Array($0.values) }
        for channel in open { try? await channel.close() }
    }
}

/// Hands every datagram to the router; the channel lives on the router's loop.
final class DatagramHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let router: Router

    init(router: Router) { self.router = router }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        router.receive(unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // ICMP unreachable and the like arrive here; they must not close the socket.
        router.logger.debug("udp error", metadata: ["error": "\(error)"])
    }
}
