import Logging
import NIOCore
import SIMPCore

/// What a control connection needs from its node.
struct ControlContext: Sendable {
    var accounts: Accounts
    var router: Router
    /// The open control connections, for closing them at shutdown.
    var connections: ChannelRegistry
    /// The connections logged in on this node, by user and device (`LoginTable`).
    var logins: LoginTable
    var admission: Admission
    var metrics: ServerMetrics
    var logger: Logger
    var unreadGrace: TimeAmount
    var requests = RequestGate.Settings()
    /// A connection must log in (or connect with a token) this soon after it opens.
    var loginDeadline: TimeAmount = .seconds(30)
    /// The frame limit once logged in; before that (and after logout) only small frames.
    var maxFrameLength = Frame.defaultMaxLength
    var anonymousFrameLength = 4_096
    /// `--e2e required`: one-to-one read marks must be sealed (`markRead` of one is E2E_REQUIRED).
    var sealedOnly = false
    /// Heartbeat nonces: the node's one source of them, so a test can fix it.
    var nonces: @Sendable () -> UInt64 = { UInt64.random(in: 0...UInt64.max) }
    /// Ids of the notices the server makes for a request (never 0): the node's one source of
    /// them, so a test can fix it.
    var ids: @Sendable () -> UInt64 = { UInt64.random(in: 1...UInt64.max) }
}

/// A `ControlContext` held by reference, so a connection's handler keeps one word of it.
@dynamicMemberLookup
final class SharedControlContext: Sendable {
    let value: ControlContext
    /// What every connection's `ControlMachine` shares.
    let machine: ControlMachine.Node

    init(_ value: ControlContext) {
        self.value = value
        machine = ControlMachine.Node(admission: value.admission, requests: value.requests, loginDeadline: value.loginDeadline,
                                      maxFrameLength: value.maxFrameLength, anonymousFrameLength: value.anonymousFrameLength,
                                      unreadGrace: value.unreadGrace, maxGroupMembers: value.router.store.settings.maxGroupMembers,
                                      maxDevicesPerUser: value.router.store.settings.maxDevicesPerUser, sealedOnly: value.sealedOnly)
    }

    subscript<T>(dynamicMember path: KeyPath<ControlContext, T>) -> T { value[keyPath: path] }
}

/// Drives one control connection's `ControlMachine`: it frames the connection itself
/// (`EnvelopeFramed`) and keeps its heartbeat, so a connection needs no other handler of ours
/// (each one cost every session a pipeline context). It reads the clock once per event, feeds
/// the event to the machine and carries out the actions it returns, in order; the work they
/// ask for (`ControlWorker`: scrypt, Redis, the router) runs elsewhere and its answer comes back
/// to the loop as the next input. It decides nothing.
final class ControlHandler: ChannelDuplexHandler, EnvelopeFramed {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = Simp_Envelope
    typealias OutboundOut = ByteBuffer

    private var machine: ControlMachine
    /// Inputs that came while actions were carried out: handled after them, in order.
    private var pending = CircularBuffer<ControlMachine.Input>(initialCapacity: 2)
    private var feeding = false
    /// The framing resumes once every input is handled, so the envelopes it hands out meet a
    /// machine that is not in the middle of anything.
    private var resumeWanted = false
    private var loginTimer: Scheduled<Void>?
    private var gateTimer: Scheduled<Void>?
    private var unreadTimer: Scheduled<Void>?
    /// The node's parts, read through `node` rather than copied: a connection's handler is
    /// held for every session, and each copy cost it a few words.
    private let node: SharedControlContext
    /// The connection's framing, whose frame limit rises after login.
    var framing: EnvelopeFraming

    /// The time of an event, read once for it.
    static var now: Moment { .read() }

    init(_ node: SharedControlContext, framing: EnvelopeFraming) {
        self.node = node
        self.framing = framing
        machine = ControlMachine(node.machine)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        framingAdded(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        framingRemoved()
    }

    func channelActive(context: ChannelHandlerContext) {
        framingActive()
        node.connections.add(context.channel)
        feed(.opened(ip: context.remoteAddress?.ipAddress ?? "unknown"), context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        framingRead(context, unwrapInboundIn(data))
    }

    /// Replies and pushes from elsewhere (the router) are framed here too.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        send(context, unwrapOutboundIn(data), flush: false, promise: promise)
    }

    func received(_ envelope: Simp_Envelope, context: ChannelHandlerContext) {
        feed(.frame(envelope), context)
    }

    func heartbeatDue(_ event: IdleStateHandler.IdleStateEvent) {
        guard let context = framing.context else { return }
        feed(.heartbeatDue(event, nonce: node.nonces()), context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        framingInactive()
        node.connections.remove(context.channel)
        feed(.closed, context)
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        feed(.writabilityChanged(context.channel.isWritable), context)
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        node.logger.debug("control connection error", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
        context.close(promise: nil)
    }

    func framingFailed(_ error: FrameError, context: ChannelHandlerContext) {
        node.logger.debug("control connection error", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
        feed(.framingFailed(error), context)
    }

    /// Hands the input to the machine with the time, and carries out what it decided; an input
    /// that comes meanwhile waits for those actions.
    private func feed(_ input: ControlMachine.Input, _ context: ChannelHandlerContext) {
        pending.append(input)
        guard !feeding else { return }
        feeding = true
        while !pending.isEmpty {
            let next = pending.removeFirst()
            let now = Self.now
            for action in machine.handle(next, at: now) { carryOut(action, at: now, context) }
        }
        feeding = false
        guard resumeWanted else { return }
        resumeWanted = false
        resumeFraming()
    }

    /// `now`: the moment of the event that asked for the action, for what the action stamps or
    /// compares (the login table's memory of revocations).
    private func carryOut(_ action: ControlAction, at now: Moment, _ context: ChannelHandlerContext) {
        switch action {
        case .send(let envelope): send(context, envelope)
        case .sendThenClose(let envelope):
            let channel = context.channel
            let sent = context.eventLoop.makePromise(of: Void.self)
            send(context, envelope, promise: sent)
            sent.futureResult.whenComplete { _ in channel.close(promise: nil) }
        case .close: context.close(promise: nil)
        case .log(let line): node.logger.info("\(line)", metadata: logMetadata)
        case .setFrameLimit(let limit): framing.maxFrameLength = limit
        case .setReading(let read): context.channel.setOption(.autoRead, value: read).whenFailure { _ in }
        case .pauseFraming: pauseFraming()
        case .resumeFraming: resumeWanted = true
        case .schedule(let timer, let delay):
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let task = context.eventLoop.scheduleTask(in: delay) {
                let (handler, context) = bound.value
                handler.feed(.due(timer), context)
            }
            replaceTimer(timer, with: task)
        case .cancel(let timer): replaceTimer(timer, with: nil)
        case .exceeded(let limit): node.metrics.exceeded(limit)
        case .keepalive: node.metrics.keepalives.increment()
        case .joinLogins(let join):
            let joined = node.logins.loggedIn(number, user: join.user, device: join.device, tokenIssued: join.tokenIssued,
                                              channel: context.channel, now: now.deadline)
            feed(.loginsJoined(join, joined), context)
        case .leaveLogins(let user): node.logins.loggedOut(number, user: user)
        case .endOtherLogins(let user, let why): worker(context).endOtherLogins(of: user, why)
        case .endDevice(let revocation): worker(context).endDevice(revocation, now: now.deadline)
        case .router(let call):
            let router = node.router
            router.loop.execute { router.take(call) }
        case .run(let work):
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            worker(context).run(work).hop(to: context.eventLoop).whenSuccess { input in
                let (handler, context) = bound.value
                handler.feed(input, context)
            }
        }
    }

    private func replaceTimer(_ timer: ControlMachine.Timer, with task: Scheduled<Void>?) {
        switch timer {
        case .loginDeadline: swap(&loginTimer, task)
        case .gate: swap(&gateTimer, task)
        case .unread: swap(&unreadTimer, task)
        }
    }

    private func swap(_ slot: inout Scheduled<Void>?, _ task: Scheduled<Void>?) {
        slot?.cancel()
        slot = task
    }

    private func worker(_ context: ChannelHandlerContext) -> ControlWorker {
        ControlWorker(node: node, loop: context.eventLoop, channel: context.channel, connection: number)
    }

    /// This connection's number in the node's `LoginTable`.
    private var number: LoginTable.Connection { LoginTable.number(of: self) }

    /// Who this connection is, for its log lines: the user once known, the session once connected.
    private var logMetadata: Logger.Metadata {
        switch machine.phase {
        case .anonymous, .closed: [:]
        case .authenticated(let user): ["user": "\(user)"]
        case .connected(let user, let session): ["user": "\(user)", "session": "\(session)"]
        }
    }
}
