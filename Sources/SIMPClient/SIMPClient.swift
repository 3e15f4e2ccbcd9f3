import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import SIMPCore

/// The SIMP client library: log in, send messages and learn each one's fate, receive
/// messages once and in order. It reconnects by itself until `disconnect()`, to the next of
/// the configured servers when the one it was on is lost (`ServerRotation`).
///
/// A driver: every decision is `ClientEngine`'s. Each event (a call, a frame, a datagram, a
/// timer, a disk write) is handed to the engine with the time, read once, and the actions it
/// returns are carried out here. All mutable state lives on one event loop (`loop`) of the
/// group it is given (by default NIO's shared singleton group, so a thousand clients in one
/// process share a few threads); the async methods hop there.
public final class SIMPClient: @unchecked Sendable {
    public let configuration: ClientConfiguration
    /// Its durations in the event loop's terms (`ClientConfiguration.loopTimes`).
    let times: ClientConfiguration.LoopTimes
    /// The subscribers of events and of the connection's state (`events()`, SIMPClient+Events).
    let hub = EventHub()
    /// `events` and `eventBatches`, made once (see there).
    let defaultEvents: Locked<AsyncStream<ClientEvent>?>
    let defaultBatches: Locked<AsyncStream<[ClientEvent]>?>
    /// This device's keys for encrypted conversations, once made (`conversationKeys()`).
    let keyring = Locked<ConversationKeys?>(nil)
    let decryptionFailureCounts = DecryptionFailures()
    let securityWarningCounts = SecurityWarnings()
    let droppedSignalCounts = DroppedSignals()

    let loop: any EventLoop
    /// The client's event loop as a task executor. An application task started with it
    /// (`Task(executorPreference: client.taskExecutor) { for await event in client.events { ... } }`)
    /// runs on that loop: each event resumes it without a thread wake-up, and each `send` is
    /// queued without one. The task shares the loop with the client's I/O, so it must not block.
    /// Task executors came with macOS 15 and iOS 18.
    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
    public var taskExecutor: any TaskExecutor { loopExecutor as! LoopTaskExecutor }
    /// `taskExecutor`, made once so that every task preferring it finds the same executor; nil
    /// on an OS without task executors. (A stored property cannot be `@available`.)
    private let loopExecutor: (any AnyObject & Sendable)?
    /// Called on `loop` with each event (before the streams get it), when given.
    private let eventHandler: (@Sendable (ClientEvent) -> Void)?
    /// Built once: loading trust roots is slow. A bad CA file fails every connection attempt.
    let tlsContext: Result<NIOSSLContext, ClientError>?
    /// The client's one source of randomness, handed to the engine and to `send`.
    let random: @Sendable () -> UInt64

    // Confined to `loop`.
    private(set) var engine: ClientEngine
    var control: (any Channel)?
    var udp: (any Channel)?
    var udpIsIPv6 = false
    var serverUDP: SocketAddress?
    /// The numbers of requests on the control connection, drawn on any thread (`ask`).
    let requestIDs = Locked<UInt64>(0)
    /// The callers of requests the engine has not yet said are over (`Action.answer`), and
    /// their timeouts.
    var requests: [UInt64: (promise: EventLoopPromise<Simp_Envelope>, timeout: Scheduled<Void>)] = [:]
    /// The application's `connect` calls waiting for the engine's answer.
    private var connectWaiters: [EventLoopPromise<Void>] = []
    /// The session request under way, and the confirmation of its path.
    var sessionPromise: EventLoopPromise<Simp_ConnectResponse>?
    var boundPromise: EventLoopPromise<Void>?
    private var spareActions: [ClientEngine.Action] = []
    /// Why the control connection is about to close (a TLS failure, say), for the requests it takes down.
    private var controlError: String?
    var store: ClientStore?
    /// The statuses of sent messages, for their handles (`MessageHandle`).
    let statusWatchers = StatusWatchers()
    /// The server a session is open on, readable from any thread.
    private let connectedBox = Locked<ServerAddress?>(nil)
    private let pathBox = Locked<DatagramPath?>(nil)
    /// The longest text the server takes (its `--max-message-bytes`, told at connect).
    let textLimit = Locked(LongText.defaultMaxBytes)

    /// With `eventHandler`, every event is handed to it on the client's event loop, in order:
    /// for an application that reacts on that loop (see `post`), no event crosses a thread. The
    /// streams (`events()`) get every event too, whichever way is chosen.
    public convenience init(configuration: ClientConfiguration, eventHandler: (@Sendable (ClientEvent) -> Void)? = nil) {
        self.init(configuration: configuration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, eventHandler: eventHandler)
    }

    /// On a loop of `eventLoopGroup` (not owned: the client never shuts it down), for a program
    /// that runs its own NIO loops (`@_spi(NIO) import SIMPClient`; not part of the app-facing API).
    @_spi(NIO) public init(configuration: ClientConfiguration, eventLoopGroup: any EventLoopGroup,
                           eventHandler: (@Sendable (ClientEvent) -> Void)? = nil) {
        self.configuration = configuration
        times = configuration.loopTimes
        self.eventHandler = eventHandler
        loop = eventLoopGroup.next()
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            loopExecutor = LoopTaskExecutor(loop: loop)
        } else {
            loopExecutor = nil
        }
        let random: @Sendable () -> UInt64 = { UInt64.random(in: 0...UInt64.max) }
        self.random = random
        engine = ClientEngine(configuration: configuration, random: random)
        // The way chosen at init gets every event from the start; the others from first use.
        let streams = eventHandler == nil && !configuration.eventBatches
        defaultEvents = Locked(streams ? hub.events(limit: Self.defaultEventBuffer) : nil)
        defaultBatches = Locked(configuration.eventBatches ? hub.batches(limit: Self.defaultEventBuffer) : nil)
        tlsContext = configuration.tls.map(Self.makeTLSContext)
    }

    // MARK: public API

    /// Logs in, opens a session and validates the UDP path. Throws if any step is refused;
    /// after success, connection losses are repaired in the background.
    public func connect(user: String, password: String) async throws(ClientError) {
        try await start(user: user, password: password, token: nil)
    }

    /// Connects with the token of an earlier login (`loginToken()`, saved by the application)
    /// instead of a password. Throws with code `.invalidToken` when the token has expired or
    /// the server refuses it: the application must then ask for the password.
    public func connect(user: String, token: LoginToken) async throws(ClientError) {
        try await start(user: user, password: nil, token: token)
    }

    /// The server the session is open on; nil while there is none. After a failover it names
    /// the node the client moved to (the events say when: `.disconnected`, `.reconnecting`,
    /// then `.connected`).
    public var connectedServer: ServerAddress? { connectedBox.value }
    /// Which way the session's datagrams travel: UDP, or inside the control connection where
    /// UDP does not get through; nil before the first session is bound.
    public var path: DatagramPath? { pathBox.value }

    /// The token of the current login, to keep for `connect(user:token:)`; nil before a login.
    public func loginToken() async -> LoginToken? {
        try? await loop.submit { [self] in engine.token }.get()
    }

    private func start(user: String, password: String?, token: LoginToken?) async throws(ClientError) {
        if let refusal = configuration.refusal { throw refusal }
        do {
            try await openStore(user: user)
            let connected = loop.makePromise(of: Void.self)
            loop.execute { [self] in
                connectWaiters.append(connected)
                handle(.connectRequested(user: user, password: password, token: token))
            }
            // The engine ends the connect (`.cancelled`), so its state is said when this returns.
            try await withTaskCancellationHandler {
                try await connected.futureResult.get()
            } onCancel: { [self] in
                loop.execute { [self] in handle(.connectCancelled) }
            }
        } catch {
            throw withTLSHint(Self.clientError(error))
        }
    }

    /// The event loop this client's sockets and state live on (`@_spi(NIO)`). An actor that
    /// uses it as its executor sends and reads events without any thread hop.
    @_spi(NIO) public var eventLoop: any EventLoop { loop }

    /// Queues a text message and returns its id; its fate arrives as events. Runs on the
    /// caller's executor (no hop to the global one). A text over one datagram goes in parts
    /// and arrives whole (docs/PROTOCOL.md, Long messages); one over the server's limit
    /// (65,536 bytes unless it says otherwise) throws `.messageTooLarge` and nothing is sent.
    /// With `endToEnd`, a text to a user goes sealed (docs/E2EE.md, Part 4).
    public nonisolated(nonsending) func send(to user: String, text: String) async throws(ClientError) -> String {
        try await queue(try await madeText(text, to: user))
    }

    /// Queues an image message (the image travels as a URL) and returns its id.
    public nonisolated(nonsending) func send(to user: String, imageURL: URL, caption: String = "") async throws(ClientError) -> String {
        var message = ClientEngine.plain(caption, type: .image)
        message.imageURL = imageURL.absoluteString
        message.imageScale = 1
        let made = try ClientEngine.message(message, to: user, at: Self.moment().millis, random: random)
        return try await queue(sealsMessages(to: user) ? try await sealed(made) : Prepared(made, nil))
    }

    /// Queues a text message without suspending and returns its id, like `send`; for callers
    /// on the client's loop (an `eventHandler`). Not with a data directory: there `send` must
    /// first write the message to disk.
    public func post(to user: String, text: String) throws(ClientError) -> String {
        guard configuration.dataDirectory == nil else { throw ClientError("post cannot write the outbox on disk; use send") }
        let made = try ClientEngine.text(text, to: user, limit: textLimit.value, at: Self.moment().millis, random: random)
        queue(made.items)
        return made.id
    }

    /// The name of this device (`ClientConfiguration.device`; without one, known once the
    /// data directory is open at `connect`).
    public func deviceName() async -> String {
        (try? await loop.submit { [self] in engine.device }.get()) ?? DeviceName.unnamed
    }

    /// Messages sent but neither delivered nor failed yet.
    public func outstandingCount() async -> Int {
        (try? await loop.submit { [self] in engine.sending.outstandingCount }.get()) ?? 0
    }

    /// Closes the connection and stops reconnecting. Messages not yet accepted are reported
    /// failed; accepted ones stay known, so a later `connect` learns of their delivery.
    /// The events stream stays open for that; `close()` ends it.
    public func disconnect() async {
        _ = try? await loop.flatSubmit { [self] () -> EventLoopFuture<Void> in
            handle(.disconnect)
            let closing = [control?.close(), udp?.close()].compactMap { $0 }
            control = nil
            udp = nil
            return EventLoopFuture.andAllComplete(closing, on: loop)
        }.get()
    }

    /// Revokes this login's token on every server node, ends the session and disconnects.
    /// A datagram sealed under the old session is dropped from then on.
    /// `everywhere`: every login of the user ends, on all its devices (their tokens stop
    /// working and their connections close), not only this one.
    public func logout(everywhere: Bool = false) async throws(ClientError) {
        var logout = Simp_Logout()
        logout.all = everywhere
        do {
            try await ask(.logout(logout), "logout") { _ in () }
        } catch {
            await disconnect()
            throw error
        }
        await disconnect()
    }

    /// After a password change (on the loop): reconnects present the new token, or log in
    /// with the new password.
    func passwordChanged(to password: String, token value: String, expiresAt: Int64) {
        handle(.passwordChanged(password: password, token: LoginToken(value: value, expiresMillis: expiresAt)))
    }

    /// A TYPING datagram, if the session is bound (on the loop).
    func typing(to peer: String) {
        handle(.typing(to: peer))
    }

    /// Disconnects and ends the event and state streams (`connectionState` is `.closed`).
    public func close() async {
        await disconnect()
        statusWatchers.finishAll()
        // On the loop, so no event emitted there falls between the last batch and the end.
        let kept = try? await loop.submit { [self] in
            handle(.close)
            hub.finish()
            return store
        }.get()
        // What is queued (the outbox marks deferred to the next batch among it,
        // `ClientStore.enqueue(deferred:)`) is on disk before close returns: a process that
        // exits next (`simp send`) leaves nothing to repeat.
        await kept?.queuedWritesDone()
    }

    /// Replaces the UDP socket with a new one on a new port, as a NAT rebinding or a network
    /// change would, and makes the server validate the new address at once. Call it when the
    /// platform says the network changed (a new interface, address or route; `simp` on Linux
    /// listens to rtnetlink): on the stream path UDP is then probed at once, not at the
    /// back-off's next probe.
    public func rebindUDP() async throws(ClientError) {
        do {
            try await loop.flatSubmit { [self] () -> EventLoopFuture<Void> in
                let old = udp
                udp = nil
                old?.close(promise: nil)
                return ensureUDP(for: engine.server).map { [self] in handle(.udpReplaced) }
            }.get()
        } catch {
            throw Self.clientError(error)
        }
    }

    // MARK: sending

    /// With a data directory the message is on disk before it is sent: a send that is not on
    /// disk fails, rather than be lost with the process. All parts of a long message go in one
    /// write: a crash never leaves some of them to be sent without the others.
    /// Sealed items go once the group state their sealing made is on disk: with the outbox rows,
    /// which rest on it (one batch, one commit), or awaited on its own.
    nonisolated(nonsending) func queue(_ prepared: Prepared) async throws(ClientError) -> String {
        let (made, state) = prepared
        if configuration.dataDirectory != nil {
            try await persist(made, after: state)
        } else if let state {
            try await written(state)
        }
        queue(made.items)
        return made.id
    }

    /// Not awaited: the id is already known, the loop keeps the order of sends, and a sender
    /// at full speed pays no suspension and no thread wake-up per message.
    private func queue(_ items: [Outgoing]) {
        guard loop.inEventLoop else { return loop.execute { [self] in handle(.send(items)) } }
        handle(.send(items))
    }

    // MARK: the engine

    /// The time of an event, read once for it: this driver's one clock.
    /// The wall clock is read with `clock_gettime` rather than `Date()`: it is read for every
    /// event, and Foundation's conversion stood out in the 8 x 32 client's profile.
    static func moment() -> Moment {
        var wall = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        return Moment(deadline: .now(), millis: Int64(wall.tv_sec) * 1000 + Int64(wall.tv_nsec) / 1_000_000)
    }

    /// Hands one event to the engine and carries out what it answers. The actions' array is
    /// reused from one event to the next (an event carried out inside another gets its own),
    /// so an event costs no allocation for it.
    func handle(_ input: ClientEngine.Input) {
        var actions = spareActions
        spareActions = []
        engine.handle(input, at: Self.moment(), into: &actions)
        for action in actions { carry(action) }
        actions.removeAll(keepingCapacity: true)
        spareActions = actions
    }

    private func carry(_ action: ClientEngine.Action) {
        switch action {
        case .emit(let event): deliver(event)
        case .countDecryptionFailure(let cause): decryptionFailureCounts.count(cause)
        case .countDroppedSignal(let kind, let reason): droppedSignalCounts.count(kind, reason)
        case .checkTyping(let body): checkTyping(body)
        case .checkKeys(let user): checkKeys(of: user)
        case .commitKeys(let user, let conversation): commitKeys(of: user, in: conversation)
        case .tellReadMarks(let marks): Task { [self] in try? await tellReads(marks) }
        case .sendControl(let envelope): control?.writeAndFlush(envelope, promise: nil)
        case .request(let body, let step):
            request(body).whenComplete { [self] in handle(.sessionAnswered(step, $0.mapError(Self.clientError))) }
        case .sessionRequested(let result):
            sessionPromise?.completeWith(result.mapError { $0 as any Error })
            sessionPromise = nil
        case .writeDatagram(let sealed):
            guard let udp, let serverUDP else { return }
            udp.write(AddressedEnvelope(remoteAddress: serverUDP, data: sealed), promise: nil)
        case .flushDatagrams: udp?.flush()
        case .atTurnEnd(let end): loop.execute { [self] in handle(.turnEnded(end)) }
        case .scheduleTick(let deadline):
            // Weak: a task left behind must not keep a client that was let go.
            loop.scheduleTask(deadline: deadline) { [weak self] in self?.handle(.tickTaskFired(scheduledFor: deadline)) }
        case .releaseAt(let deadline): loop.scheduleTask(deadline: deadline) { [self] in handle(.releaseDue) }
        case .attempt(let index, let target, let purpose):
            establish(target).whenComplete { [self] in handle(.attemptEnded(index: index, purpose, $0.mapError(Self.clientError))) }
        case .reconnect(let index, let delay): loop.scheduleTask(in: delay) { [self] in handle(.reconnectDue(index: index)) }
        case .answer(let id, let result):
            guard let request = requests.removeValue(forKey: id) else { return }
            request.timeout.cancel()
            request.promise.completeWith(result.mapError { $0 as any Error })
        case .connectEnded(let result):
            for waiter in connectWaiters { waiter.completeWith(result.mapError { $0 as any Error }) }
            connectWaiters.removeAll()
        case .pathBound:
            boundPromise?.succeed(())
            boundPromise = nil
        case .connectedServer(let server): connectedBox.value = server
        case .connectionState(let state): hub.publish(state)
        case .closeConnection:
            control?.close(promise: nil)
            udp?.close(promise: nil)
            udp = nil
        case .textLimit(let limit): textLimit.value = limit
        case .watchHeartbeat(let interval): watchHeartbeat(interval)
        case .writeOutbox(let write): writeOutbox(write)
        case .saveReceived(let batch):
            guard ReceivedSaves.needsKeys(batch.messages, endToEnd: configuration.endToEnd), let store else {
                store?.receive(batch.messages, savedUpTo: batch.upTo) { [self] result in loop.execute { [self] in handle(.saved(result)) } }
                return
            }
            openThenSave(batch, in: store)
        case .recoverParts(let part, let message, let peer):
            Task { [self] in
                let found = await earlierParts(before: part, of: message, with: peer)
                loop.execute { [self, found] in handle(.partsRecovered(found)) }
            }
        case .status(let status, let record): statusChanged(status, record: record)
        case .history(let change): store?.record(change, done: historyWritten)
        }
    }

    func deliver(_ event: ClientEvent) {
        switch event {
        case .connected(_, let path), .path(let path): pathBox.value = path
        case .groupChanged(let group, let change, _):
            // The group's encrypted members follow its members (ConversationKeys.groupChanged).
            if let keys = keyring.withLock({ $0 }) { Task { await keys.groupChanged(GroupName.address(group), change, client: self) } }
        default: break
        }
        eventHandler?(event)
        if hub.publish(event) { loop.execute { [self] in hub.flushBatch() } }
    }

    // MARK: control channel and datagrams (on loop)

    func controlReceived(_ envelope: Simp_Envelope) {
        handle(.control(envelope))
    }

    /// Remembers why the control connection is about to close (a TLS failure, say), so the
    /// requests it takes down say so.
    func controlFailed(_ channel: any Channel, _ error: any Error) {
        guard control === channel else { return }
        controlError = Self.reason(error)
    }

    func controlClosed(_ channel: any Channel) {
        guard control === channel else { return }
        let why = "control connection closed" + (controlError.map { ": \($0)" } ?? "")
        controlError = nil
        control = nil
        boundPromise?.fail(ClientError(why))
        boundPromise = nil
        handle(.requestsLost(why: why))
        handle(.controlClosed)
    }

    func sendPing() {
        handle(.pingDue)
    }

    func datagramReceived(_ envelope: AddressedEnvelope<ByteBuffer>) {
        handle(.datagram(envelope.data))
    }
}
