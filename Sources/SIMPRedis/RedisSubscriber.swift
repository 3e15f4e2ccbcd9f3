import Logging
import NIOCore
import NIOPosix

/// A connection that only listens: it SUBSCRIBEs to channels and hands every message
/// published on them to `onMessage`, on its event loop. When the connection breaks it connects
/// and subscribes again, waiting longer after each failure (up to 5 s). Pub/sub keeps nothing:
/// what is published while it is away is lost, so it carries only notices whose loss delays
/// work and never undoes it (the state itself is in Redis' keys).
public final class RedisSubscriber: @unchecked Sendable {
    public typealias MessageHandler = @Sendable (_ channel: String, _ payload: [UInt8]) -> Void
    /// Where to subscribe, asked before every connection (after a failure too); completes on `loop`.
    public typealias Locator = @Sendable (_ loop: any EventLoop) -> EventLoopFuture<RedisConfiguration>

    public let loop: any EventLoop
    private enum Source {
        /// One Redis, or any nodes of a cluster (which carries a PUBLISH to every node); after
        /// a failure the next one is tried.
        case rotating([RedisConfiguration])
        case located(Locator)
    }
    private let source: Source
    private var current = 0
    /// SSUBSCRIBE (sharded channels) rather than SUBSCRIBE.
    private let sharded: Bool
    private let channels: [String]
    private let onMessage: MessageHandler
    private let logger: Logger
    private var channel: (any Channel)?
    private var stopped = false
    private var failures = 0
    /// Why the last connection ended, when Redis said why (a refused login).
    private var refusal: RedisError?
    private let firstSubscription: EventLoopPromise<Void>
    private var everSubscribed = false
    /// Called on `loop` each time the channels are subscribed again after a loss: what was
    /// published meanwhile is gone, so whoever relies on it looks at the state itself. Set
    /// before `start()`.
    public var onResubscribed: (@Sendable () -> Void)?

    public convenience init(configuration: RedisConfiguration, channels: [String], loop: any EventLoop,
                            logger: Logger = Logger(label: "simp.redis.subscriber"), onMessage: @escaping MessageHandler) {
        self.init(configurations: [configuration], channels: channels, loop: loop, logger: logger, onMessage: onMessage)
    }

    /// Subscribes on the first node that answers, in turn (nodes of one Redis Cluster).
    public convenience init(configurations: [RedisConfiguration], channels: [String], loop: any EventLoop,
                logger: Logger = Logger(label: "simp.redis.subscriber"), onMessage: @escaping MessageHandler) {
        precondition(!configurations.isEmpty, "a subscriber needs at least one Redis")
        self.init(source: .rotating(configurations), sharded: false, channels: channels, loop: loop, logger: logger,
                  onMessage: onMessage)
    }

    /// Subscribes to sharded channels (SSUBSCRIBE, Redis 7) on the node `locate` names: the
    /// master of the channels' slot (they must share one). A sharded message stays on its
    /// slot's nodes, where a classic one is broadcast over a cluster's bus to every node, and
    /// that bus holds small messages back (Nagle) for up to 40 ms. When the slot moves, Redis
    /// ends the subscription; it is made again where `locate` then says.
    public convenience init(shardedChannels: [String], locate: @escaping Locator, loop: any EventLoop,
                logger: Logger = Logger(label: "simp.redis.subscriber"), onMessage: @escaping MessageHandler) {
        self.init(source: .located(locate), sharded: true, channels: shardedChannels, loop: loop, logger: logger,
                  onMessage: onMessage)
    }

    private init(source: Source, sharded: Bool, channels: [String], loop: any EventLoop, logger: Logger,
                 onMessage: @escaping MessageHandler) {
        self.source = source
        self.sharded = sharded
        self.channels = channels
        self.loop = loop
        self.logger = logger
        self.onMessage = onMessage
        self.firstSubscription = loop.makePromise()
    }

    /// Succeeds once Redis confirmed every channel the first time.
    public var subscribed: EventLoopFuture<Void> { firstSubscription.futureResult }

    public func start() {
        loop.execute { self.connect() }
    }

    public func stop() -> EventLoopFuture<Void> {
        loop.flatSubmit {
            self.stopped = true
            self.firstSubscription.fail(RedisError(.closed, "subscriber stopped"))
            return self.channel?.close() ?? self.loop.makeSucceededVoidFuture()
        }
    }

    private func connect() {
        guard !stopped else { return }
        let target: EventLoopFuture<RedisConfiguration>
        switch source {
        case .rotating(let configurations): target = loop.makeSucceededFuture(configurations[current])
        case .located(let locate): target = locate(loop).hop(to: loop)
        }
        target.whenComplete { [self] result in
            switch result {
            case .success(let configuration): open(configuration)
            case .failure(let error): lost("\(error)")
            }
        }
    }

    private func open(_ configuration: RedisConfiguration) {
        guard !stopped else { return }
        let channels = channels
        let onMessage = onMessage
        let command = sharded ? "SSUBSCRIBE" : "SUBSCRIBE"
        do {
            try configuration.checkLogin()
        } catch {
            return refused(error)
        }
        refusal = nil
        ClientBootstrap(group: loop)
            .connectTimeout(configuration.connectTimeout)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = SubscriptionHandler(command: command, channels: channels, login: configuration, onMessage: onMessage,
                                                      onRefused: { error in self.refusal = error }) {
                        self.failures = 0
                        if self.everSubscribed { self.onResubscribed?() }
                        self.everSubscribed = true
                        self.firstSubscription.succeed(())
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: configuration.host, port: configuration.port)
            .whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    self.channel = channel
                    if stopped { channel.close(promise: nil) }
                    channel.closeFuture.whenComplete { _ in
                        if let refusal = self.refusal { return self.refused(refusal) }
                        self.lost("connection closed")
                    }
                case .failure(let error):
                    lost("\(error)")
                }
            }
    }

    /// Redis refused the login: whoever waits for the first subscription learns why (a start
    /// must not hang on it). The subscriber keeps trying, slowly, in case the password is
    /// being changed on both sides.
    private func refused(_ error: RedisError) {
        firstSubscription.fail(error)
        lost(error.message)
    }

    private func lost(_ reason: String) {
        channel = nil
        guard !stopped else { return }
        failures += 1
        if case .rotating(let configurations) = source { current = (current + 1) % configurations.count }
        let delay = TimeAmount.milliseconds(min(5_000, 100 << min(failures - 1, 6)))
        logger.warning("Redis subscription lost; subscribing again", metadata: ["reason": "\(reason)", "in_ms": "\(delay.nanoseconds / 1_000_000)"])
        loop.scheduleTask(in: delay) { self.connect() }
    }
}

/// Sends SUBSCRIBE when the connection opens, then reads the replies: confirmations, and
/// messages for `onMessage`. Anything else closes the connection (and so subscribes again).
final class SubscriptionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let command: String
    private let channels: [String]
    /// Whose login (AUTH) goes ahead of the subscription, and explains a refusal.
    private let login: RedisConfiguration
    private let onMessage: RedisSubscriber.MessageHandler
    private let onRefused: (RedisError) -> Void
    private let onSubscribed: () -> Void
    private let reader = RedisReplyReader()
    private var confirmed = 0
    /// AUTH's reply is still to come (it is the first one).
    private var authenticating: Bool

    init(command: String = "SUBSCRIBE", channels: [String], login: RedisConfiguration = RedisConfiguration(),
         onMessage: @escaping RedisSubscriber.MessageHandler, onRefused: @escaping (RedisError) -> Void = { _ in },
         onSubscribed: @escaping () -> Void) {
        self.command = command
        self.channels = channels
        self.login = login
        self.onMessage = onMessage
        self.onRefused = onRefused
        self.onSubscribed = onSubscribed
        self.authenticating = login.authentication != nil
    }

    func channelActive(context: ChannelHandlerContext) {
        var bytes = context.channel.allocator.buffer(capacity: 64)
        if let auth = login.authentication { RedisWire.encode(auth.arguments, into: &bytes) }
        RedisWire.encode(RedisCommand(command, channels).arguments, into: &bytes)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        do {
            try reader.feed(unwrapInboundIn(data))
            while let reply = try reader.next() {
                if case .error(let message) = reply, let refusal = login.loginRefused(message, toAuth: authenticating) {
                    onRefused(refusal)
                    throw refusal
                }
                if authenticating {
                    authenticating = false
                    continue
                }
                try handle(PubSubReply(reply))
            }
        } catch {
            context.close(promise: nil)
        }
    }

    private func handle(_ reply: PubSubReply) throws {
        switch reply {
        case .subscribed:
            confirmed += 1
            if confirmed == channels.count { onSubscribed() }
        case .message(let channel, let payload):
            onMessage(channel, payload)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// What a subscribed connection receives (RESP2): ["subscribe", channel, count] or
/// ["message", channel, payload], and for sharded channels "ssubscribe" and "smessage".
/// Anything else ("sunsubscribe": Redis ended a sharded subscription because its slot moved)
/// is refused, so the connection closes and subscribes again.
enum PubSubReply: Equatable {
    case subscribed(channel: String)
    case message(channel: String, payload: [UInt8])

    init(_ reply: RedisValue) throws(RedisError) {
        guard let parts = reply.array, parts.count == 3, let kind = parts[0].string, let channel = parts[1].string else {
            throw RedisError(.protocolViolation, "unexpected reply on a subscribed connection: \(reply)")
        }
        switch kind {
        case "subscribe", "ssubscribe": self = .subscribed(channel: channel)
        case "message", "smessage":
            guard let payload = parts[2].bytes else { throw RedisError(.protocolViolation, "pub/sub message without a payload") }
            self = .message(channel: channel, payload: payload)
        default:
            throw RedisError(.protocolViolation, "unexpected pub/sub reply \(kind)")
        }
    }
}
