import Crypto
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import SIMPCore

/// The SIMP client library: log in, send messages and learn each one's fate, receive
/// messages once and in order. It reconnects by itself until `disconnect()`, to the next of
/// the configured servers when the one it was on is lost (`ServerRotation`).
///
/// All mutable state lives on one event loop (`loop`) of the group it is given (by default
/// NIO's shared singleton group, so a thousand clients in one process share a few threads);
/// the async methods hop there.
public final class SIMPClient: @unchecked Sendable {
    public let configuration: ClientConfiguration
    public let events: AsyncStream<ClientEvent>
    /// With `configuration.eventBatches`, the events instead of `events`, a loop turn's at a time.
    public let eventBatches: AsyncStream<[ClientEvent]>

    let loop: any EventLoop
    /// The client's event loop as a task executor. An application task started with it
    /// (`Task(executorPreference: client.taskExecutor) { for await event in client.events { ... } }`)
    /// runs on that loop: each event resumes it without a thread wake-up, and each `send` is
    /// queued without one. The task shares the loop with the client's I/O, so it must not block.
    public let taskExecutor: any TaskExecutor
    private let eventSink: AsyncStream<ClientEvent>.Continuation
    private let batchSink: AsyncStream<[ClientEvent]>.Continuation
    /// Events of this loop turn, handed over at its end (`eventBatches`). Confined to `loop`.
    private var pendingEvents: [ClientEvent] = []
    /// Called on `loop` with each event instead of `events`, when given.
    private let eventHandler: (@Sendable (ClientEvent) -> Void)?
    private let logger = Logger(label: "simp.client")
    /// Built once: loading trust roots is slow. A bad CA file fails every connection attempt.
    private let tlsContext: Result<NIOSSLContext, ClientError>?

    // Confined to `loop`.
    /// No password when connected with a saved token (`connect(user:token:)`).
    private var credentials: (user: String, password: String?)?
    /// The token of the last login (expiry in ms since 1970): reconnects present it instead of
    /// the password while it is valid.
    private var token: (value: String, expiresAt: Int64)?
    private var control: (any Channel)?
    private var udp: (any Channel)?
    private var serverUDP: SocketAddress?
    private var session: Simp_ConnectResponse?
    private var lifecycle = ConnectionLifecycle()
    private var boundPromise: EventLoopPromise<Void>?
    private var nextRequestID: UInt64 = 1
    private var requests: [UInt64: EventLoopPromise<Simp_Envelope>] = [:]
    private var nextPacketNumber: UInt64 = 1
    private var sending: SendTracker
    private var inbox = InboundSequencer<IncomingMessage>()
    /// Messages handed over before they were numbered, until their numbered copy comes.
    private var early = EarlyLedger()
    private var copyReceipts = CopyReceipts()
    /// Parts of long messages received, until each message is whole.
    private var reassembly = Reassembly()
    /// Turns the events of the parts of long messages sent into the messages' events.
    private var longSends = LongSends()
    private var receiptScheduled = false
    private var udpFlushScheduled = false
    /// Messages on their way to the server, under its congestion window and pacing.
    private var uplink = Uplink()
    /// When the pacing lets the next queued message go.
    private var releaseTask: Scheduled<Void>?
    private var rotation: ServerRotation
    /// The server of the connection open or being opened.
    private var server: ServerAddress
    /// Whether the datagram socket is an IPv6 one (it must match the server's family).
    private var udpIsIPv6 = false
    /// The server a session is open on, readable from any thread.
    private let connectedBox = Locked<ServerAddress?>(nil)
    /// The longest text the server takes (its `--max-message-bytes`, told at connect).
    private let textLimit = Locked(LongText.defaultMaxBytes)
    private var timers: ClientTimers
    private var tick: Scheduled<Void>?
    private var controlError: String?
    private var store: ClientStore?
    /// Which of the user's devices this client is (`ClientConfiguration.device`).
    private var device: String
    private var sessionKey: SymmetricKey?
    private var replay = ReplayWindow()
    /// With a store: received messages on their way to disk. Receipts never confirm more
    /// than its saved mark.
    private var saves = ReceivedSaves(savedUpTo: 0)
    /// What the next receipt confirms: the delivered mark, or with a store the saved mark.
    private var confirmUpTo: UInt64 { store == nil ? inbox.deliveredUpTo : saves.savedUpTo }

    /// `eventLoopGroup` is not owned: the client never shuts it down. With `eventHandler`, every
    /// event is handed to it on the client's event loop, in order, and `events` stays empty:
    /// for an application that reacts on that loop (see `post`), no event crosses a thread.
    public init(configuration: ClientConfiguration,
                eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                eventHandler: (@Sendable (ClientEvent) -> Void)? = nil) {
        self.configuration = configuration
        self.eventHandler = eventHandler
        loop = eventLoopGroup.next()
        taskExecutor = LoopTaskExecutor(loop: loop)
        sending = SendTracker(policy: configuration.sendRetransmit)
        uplink = Uplink(windowed: configuration.congestionControl)
        device = configuration.device ?? DeviceName.unnamed
        timers = ClientTimers(keepaliveInterval: configuration.keepaliveInterval, bindRetry: configuration.bindRetry)
        rotation = ServerRotation(count: configuration.servers.count,
                                  backoff: ReconnectBackoff(base: configuration.reconnectBase, cap: configuration.reconnectCap))
        server = configuration.servers.first ?? ServerAddress(host: "", port: 0)
        (events, eventSink) = AsyncStream.makeStream(of: ClientEvent.self)
        (eventBatches, batchSink) = AsyncStream.makeStream(of: [ClientEvent].self)
        tlsContext = configuration.tls.map(Self.makeTLSContext)
    }

    private static func makeTLSContext(_ tls: ClientTLS) -> Result<NIOSSLContext, ClientError> {
        Result {
            var settings = TLSConfiguration.makeClientConfiguration()
            settings.minimumTLSVersion = .tlsv12
            if let ca = tls.caFile { settings.trustRoots = .file(ca) }
            return try NIOSSLContext(configuration: settings)
        }.mapError { ClientError("cannot set up TLS (CA file \(tls.caFile ?? "system roots")): \($0)") }
    }

    /// TLS first when configured; its handshake checks the certificate against the name of
    /// the server tried. Without, a server off this machine gets no connection (`refusal`
    /// stopped it already; this is the last line of defence) unless plaintext is allowed.
    private func addTLS(to channel: any Channel, server: ServerAddress) throws {
        guard let tls = configuration.tls, let tlsContext else {
            guard configuration.allowPlaintext || server.isLoopback else { throw ClientError.plaintext(to: server) }
            return
        }
        let name = tls.serverName ?? server.host
        let sni = (try? SocketAddress(ipAddress: name, port: 0)) == nil ? name : nil
        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tlsContext.get(), serverHostname: sni))
    }

    // MARK: public API

    /// Creates an account. Uses a short-lived control connection of its own.
    public func register(user: String, password: String) async throws(ClientError) {
        var request = Simp_RegisterRequest()
        request.user = user
        request.password = password
        try await oneShot(.register(request))
    }

    /// A login token for `device` (this client's own when nil), on a connection of its own,
    /// with no session opened: nothing of the device is replaced. For an application that
    /// keeps tokens for several devices (`simp login` saves one for its REPL and one for its
    /// one-shot commands).
    public func logIn(user: String, password: String, device: String? = nil) async throws(ClientError) -> LoginToken {
        var request = Simp_LoginRequest()
        request.user = user
        request.password = password
        request.device = device ?? configuration.device ?? DeviceName.unnamed
        let reply = try await oneShot(.login(request))
        guard case .loginOk(let ok) = reply.body else { throw ClientError("unexpected reply to login") }
        return LoginToken(value: ok.token, expiresAt: ok.expiresAt)
    }

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

    /// The token of the current login, to keep for `connect(user:token:)`; nil before a login.
    public func loginToken() async -> LoginToken? {
        try? await loop.submit { [self] in token.map { LoginToken(value: $0.value, expiresAt: $0.expiresAt) } }.get()
    }

    private func start(user: String, password: String?, token saved: LoginToken?) async throws(ClientError) {
        if let refusal = configuration.refusal { throw refusal }
        do {
            let restored = try await openStore(user: user)
            try await loop.flatSubmit { [self] in
                if let restored { restore(restored) }
                credentials = (user, password)
                token = saved.map { ($0.value, $0.expiresAt) }
                lifecycle.connectRequested()
                startTicking()
                return connectInTurn(rotation.connectOrder[...], failures: []).always { [self] result in
                    if case .failure = result { lifecycle.connectFailed() }
                }
            }.get()
        } catch {
            throw withTLSHint(Self.clientError(error))
        }
    }

    /// The event loop this client's sockets and state live on. An actor that uses it as its
    /// executor sends and reads events without any thread hop.
    public var eventLoop: any EventLoop { loop }

    /// Queues a text message and returns its id; its fate arrives as events. Runs on the
    /// caller's executor (no hop to the global one). A text over one datagram goes in parts
    /// and arrives whole (docs/PROTOCOL.md, Long messages); one over the server's limit
    /// (65,536 bytes unless it says otherwise) throws `.messageTooLarge` and nothing is sent.
    public nonisolated(nonsending) func send(to user: String, text: String) async throws(ClientError) -> String {
        let parts = try textParts(text)
        guard parts.count > 1 else { return try await send(Self.text(text), to: user) }
        let (id, items) = try outgoing(parts: parts, to: user)
        if configuration.dataDirectory != nil { try await persist(items) }
        queue(items)
        return id
    }

    /// Queues an image message (the image travels as a URL) and returns its id.
    public nonisolated(nonsending) func send(to user: String, imageURL: String, caption: String = "") async throws(ClientError) -> String {
        var message = Simp_Message()
        message.type = .image
        message.imageURL = imageURL
        message.content = caption
        message.imageScale = 1
        return try await send(message, to: user)
    }

    /// The name of this device (`ClientConfiguration.device`; without one, known once the
    /// data directory is open at `connect`).
    public func deviceName() async -> String {
        (try? await loop.submit { [self] in device }.get()) ?? DeviceName.unnamed
    }

    /// Messages sent but neither delivered nor failed yet.
    public func outstandingCount() async -> Int {
        (try? await loop.submit { [self] in sending.outstandingCount }.get()) ?? 0
    }

    /// Closes the connection and stops reconnecting. Messages not yet accepted are reported
    /// failed; accepted ones stay known, so a later `connect` learns of their delivery.
    /// The events stream stays open for that; `close()` ends it.
    public func disconnect() async {
        _ = try? await loop.flatSubmit { [self] () -> EventLoopFuture<Void> in
            lifecycle.disconnectedByApplication()
            connectedBox.value = nil
            timers.stop()
            tick?.cancel()
            tick = nil
            // With a data directory, unconfirmed messages wait on disk for the next start.
            if store == nil {
                for event in sending.abandonUnaccepted() { emit(event) }
                uplink.newPath()
            }
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
            _ = try await loop.flatSubmit { [self, logout] in request(.logout(logout)) }.get()
        } catch {
            await disconnect()
            throw Self.clientError(error)
        }
        await disconnect()
    }

    /// After a password change (on the loop): reconnects present the new token, or log in
    /// with the new password.
    func passwordChanged(to password: String, token value: String, expiresAt: Int64) {
        if let user = credentials?.user { credentials = (user, password) }
        token = (value, expiresAt)
    }

    /// Disconnects and ends the events stream.
    public func close() async {
        await disconnect()
        // On the loop, so no event emitted there falls between the last batch and the end.
        try? await loop.submit { [self] in
            flushEvents()
            eventSink.finish()
            batchSink.finish()
        }.get()
    }

    /// Replaces the UDP socket with a new one on a new port, as a NAT rebinding or a network
    /// change would, and makes the server validate the new address at once.
    public func rebindUDP() async throws(ClientError) {
        do {
            try await loop.flatSubmit { [self] () -> EventLoopFuture<Void> in
                let old = udp
                udp = nil
                old?.close(promise: nil)
                return ensureUDP(for: server).map { [self] in sendKeepalive(now: Self.now) }
            }.get()
        } catch {
            throw Self.clientError(error)
        }
    }

    /// Opens the data directory's store on the first connect; nil when there is none or it is open.
    private func openStore(user: String) async throws -> ClientStore.Saved? {
        guard let directory = configuration.dataDirectory else { return nil }
        let alreadyOpen = (try? await loop.submit { [self] in store != nil }.get()) ?? true
        guard !alreadyOpen else { return nil }
        do {
            let opened = try ClientStore(directory: directory, user: user)
            let saved = try opened.load()
            try await loop.submit { [self] in store = opened }.get()
            return saved
        } catch {
            throw ClientError("cannot open the data directory \(directory): \(error)")
        }
    }

    private func restore(_ saved: ClientStore.Saved) {
        device = configuration.device ?? saved.device
        inbox = InboundSequencer(deliveredUpTo: saved.savedUpTo)
        saves = ReceivedSaves(savedUpTo: saved.savedUpTo)
        sending.restore(saved, now: Self.now)
    }

    // MARK: sending

    /// Queues a text message without suspending and returns its id, like `send`; for callers
    /// on the client's loop (an `eventHandler`). Not with a data directory: there `send` must
    /// first write the message to disk.
    public func post(to user: String, text: String) throws(ClientError) -> String {
        guard configuration.dataDirectory == nil else { throw ClientError("post cannot write the outbox on disk; use send") }
        let parts = try textParts(text)
        guard parts.count > 1 else {
            let (id, item) = try outgoing(Self.text(text), to: user)
            queue(item, id: id)
            return id
        }
        let (id, items) = try outgoing(parts: parts, to: user)
        queue(items)
        return id
    }

    private static func text(_ text: String, type: Simp_Message.MessageType = .text) -> Simp_Message {
        var message = Simp_Message()
        message.type = type
        message.content = text
        return message
    }

    /// The text as it goes: whole when it fits one part, else in parts; over the limit, refused.
    private func textParts(_ text: String) throws(ClientError) -> [String] {
        let size = text.utf8.count
        let limit = textLimit.value
        guard size <= limit else {
            throw ClientError("message is \(size) bytes; the limit is \(limit)", code: .messageTooLarge)
        }
        return size <= LongText.partBytes ? [text] : LongText.split(text)
    }

    /// The parts of a long text as they will be sent, and the message's new id.
    private func outgoing(parts: [String], to user: String) throws(ClientError) -> (String, [(String, Outgoing)]) {
        let base = String(UInt64.random(in: 1...UInt64.max))
        var items: [(String, Outgoing)] = []
        for (index, text) in parts.enumerated() {
            let id = LongText.PartID(base: base, index: index + 1, count: parts.count)
            items.append(try outgoing(Self.text(text, type: .textPart), to: user, id: id.description))
        }
        return (base, items)
    }

    private nonisolated(nonsending) func send(_ message: Simp_Message, to user: String) async throws(ClientError) -> String {
        let (id, item) = try outgoing(message, to: user)
        if configuration.dataDirectory != nil { try await persist(item, id: id) }
        queue(item, id: id)
        return id
    }

    /// The message as it will be sent, with its new id; throws what the server would refuse.
    private func outgoing(_ given: Simp_Message, to user: String, id: String? = nil) throws(ClientError) -> (String, Outgoing) {
        guard UserName.isValid(user) || GroupName.addressed(by: user) != nil else {
            throw ClientError("not a valid user name or #group: \(user)", code: .unknownUser)
        }
        guard given.imageURL.isEmpty || MessageRules.isAllowedImageURL(given.imageURL) else {
            throw ClientError("\(MessageRules.imageURLReason), got \(given.imageURL)", code: .badRequest)
        }
        var message = given
        message.version = 1
        message.messageID = id ?? String(UInt64.random(in: 1...UInt64.max))
        message.time = Self.nowMillis
        message.toUser = user
        // Serialized only when it may be near the limit: the usual message is far below it.
        if Self.sizeBound(message) > MessageRules.maxMessageBytes {
            let size = ((try? message.serializedBytes()) as [UInt8]?)?.count ?? Int.max
            guard size <= MessageRules.maxMessageBytes else {
                throw ClientError("message is \(size) bytes; the limit is \(MessageRules.maxMessageBytes)", code: .messageTooLarge)
            }
        }
        return (message.messageID, Outgoing(to: user, message: message))
    }

    /// At least the serialized size of a message as the client sends it (with its clientSeq):
    /// each of the five strings costs a tag and at most 3 length bytes besides its own, the
    /// seven scalars at most 11 bytes each with their tags.
    static func sizeBound(_ message: Simp_Message) -> Int {
        let text = message.messageID.utf8.count + message.content.utf8.count + message.imageURL.utf8.count
            + message.fromUser.utf8.count + message.toUser.utf8.count
        return text + 5 * 4 + 7 * 11
    }

    /// Not awaited: the id is already known, the loop keeps the order of sends, and a sender
    /// at full speed pays no suspension and no thread wake-up per message.
    private func queue(_ item: Outgoing, id: String) {
        guard loop.inEventLoop else {
            loop.execute { [self] in queue(item, id: id) }
            return
        }
        let now = Self.now
        if let numbered = sending.send(item, id: id, now: now, bound: lifecycle.isBound) { transmit(numbered, .first, now: now) }
        armTick(at: now + ClientTimers.fastTick)
    }

    /// The parts of a long message, in order, on the loop.
    private func queue(_ items: [(String, Outgoing)]) {
        guard loop.inEventLoop else {
            loop.execute { [self] in queue(items) }
            return
        }
        for (id, item) in items { queue(item, id: id) }
    }

    /// All parts of a long message go to the outbox in one write: a crash never leaves some of
    /// them to be sent without the others.
    private func persist(_ items: [(String, Outgoing)]) async throws(ClientError) {
        guard let store = try? await loop.submit({ [self] in self.store }).get() else {
            throw ClientError("not connected: the data directory's outbox is opened by connect", code: .notConnected)
        }
        do {
            try await store.add(items.map { ($0.0, $0.1.to, $0.1.message) })
        } catch {
            throw ClientError("message not sent: cannot write it to the outbox \(error.path): \(error.reason)")
        }
    }

    /// Writes the message to the outbox on disk before it is sent (only with a data directory):
    /// a send that is not on disk fails, rather than be lost with the process.
    private func persist(_ item: Outgoing, id: String) async throws(ClientError) {
        guard let store = try? await loop.submit({ [self] in self.store }).get() else {
            throw ClientError("not connected: the data directory's outbox is opened by connect", code: .notConnected)
        }
        do {
            try await store.add(id: id, to: item.to, message: item.message)
        } catch {
            throw ClientError("message not sent: cannot write it to the outbox \(error.path): \(error.reason)")
        }
    }

    /// Messages wait in the uplink; what its window and pacing let go leaves at the end of the
    /// loop tick, together in bundles when the server takes them.
    private func transmit(_ message: Simp_Message, _ reason: Uplink.Reason, now: NIODeadline) {
        guard let payload: [UInt8] = try? message.serializedBytes() else { return }
        uplink.send(message.messageID, payload, now: now, reason: reason)
        if uplink.windowed { sending.waiting(message.messageID) }
        scheduleUDPFlush()
    }

    /// A TYPING datagram, if the session is bound.
    func typing(to peer: String) {
        guard lifecycle.isBound else { return }
        sendDatagram(.typing, Array(peer.utf8))
    }

    private func sendDatagram(_ kind: DatagramKind, _ payload: [UInt8]) {
        writeDatagram(kind, payload)
        scheduleUDPFlush()
    }

    private func writeDatagram(_ kind: DatagramKind, _ payload: [UInt8]) {
        guard let udp, let serverUDP, let session else { return }
        let header = DatagramHeader(kind: kind, sessionID: session.sessionID, packetNumber: nextPacketNumber)
        nextPacketNumber += 1
        guard let key = sessionKey,
              let buffer = try? DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer, allocator: udp.allocator) else { return }
        udp.write(AddressedEnvelope(remoteAddress: serverUDP, data: buffer), promise: nil)
    }

    /// One flush per loop tick: the datagrams of a burst of sends leave in one sendmmsg.
    private func scheduleUDPFlush() {
        guard !udpFlushScheduled else { return }
        udpFlushScheduled = true
        loop.execute { [self] in
            udpFlushScheduled = false
            writeUnsent()
            udp?.flush()
        }
    }

    /// What the window and the pacing let go; the rest waits for an acknowledgement or the
    /// pacing's next moment.
    private func writeUnsent() {
        guard uplink.hasQueued else { return }
        let now = Self.now
        let release = uplink.release(now: now, bundles: session?.bundles == true)
        for id in release.ids { sending.left(id, now: now) }
        for datagram in release.datagrams { writeDatagram(datagram.kind, datagram.payload) }
        guard releaseTask == nil, let next = uplink.nextRelease(now: now) else { return }
        releaseTask = loop.scheduleTask(deadline: next) { [self] in
            releaseTask = nil
            scheduleUDPFlush()
        }
    }

    /// The server answered for a message: the window has room for what waits.
    private func acknowledged(_ id: String) {
        uplink.acknowledged(id, now: Self.now)
        if uplink.hasQueued { scheduleUDPFlush() }
    }

    // MARK: connection

    /// `connect`: the servers in `order` in turn until one opens a session. A refusal (an
    /// error code) is the answer of the whole deployment, whose nodes share one Redis, so it
    /// ends the search; only a node that cannot be reached or fails makes way for the next.
    private func connectInTurn(_ order: ArraySlice<Int>, failures: [ClientError]) -> EventLoopFuture<Void> {
        guard let index = order.first else { return loop.makeFailedFuture(Self.combined(failures)) }
        return establish(index).flatMapError { [self] error in
            let failure = Self.clientError(error)
            guard failure.code == nil else { return loop.makeFailedFuture(failure) }
            let named = configuration.servers.count > 1 ? Self.naming(configuration.servers[index], in: failure) : failure
            guard lifecycle.state == .connecting, order.count > 1 else { return loop.makeFailedFuture(Self.combined(failures + [named])) }
            return connectInTurn(order.dropFirst(), failures: failures + [named])
        }
    }

    /// The failure with the server it happened on, unless it says so already.
    static func naming(_ server: ServerAddress, in failure: ClientError) -> ClientError {
        failure.message.contains(server.description) ? failure : ClientError("\(server): \(failure.message)", code: failure.code)
    }

    /// One failure as it is; several (one per server) in one message.
    static func combined(_ failures: [ClientError]) -> ClientError {
        guard failures.count > 1 else { return failures.first ?? ClientError("no server configured") }
        return ClientError("no server could be reached: " + failures.map(\.message).joined(separator: "; "))
    }

    /// Logs in on the server at `index` and opens a session there.
    private func establish(_ index: Int) -> EventLoopFuture<Void> {
        guard let credentials else { return loop.makeFailedFuture(ClientError("no credentials")) }
        guard configuration.servers.indices.contains(index) else { return loop.makeFailedFuture(ClientError("no server configured")) }
        let target = configuration.servers[index]
        server = target
        return ensureUDP(for: target).flatMap { [self] in
            openControl(target)
        }.flatMap { [self] in
            openSession()
        }.flatMap { [self] response in
            startSession(response, on: target)
        }.map { [self] in
            rotation.connected(to: index)
            connectedBox.value = target
            emit(.connected(user: credentials.user))
            let now = Self.now
            uplink.newPath()
            perform(sending.resendAll(now: now, bound: lifecycle.isBound), .first, now: now)
            queryDeliveries(now: now)
        }.flatMapError { [self] error in
            control?.close(promise: nil)
            return loop.makeFailedFuture(error)
        }
    }

    /// CONNECTs with the token of the last login while it is valid, so a reconnect needs no
    /// password and a login throttle (others' failed guesses) cannot stop it; logs in with the
    /// password only when there is no such token or the server refuses it.
    private func openSession() -> EventLoopFuture<Simp_ConnectResponse> {
        guard let token, token.expiresAt > Self.nowMillis + 60_000 else { return logInAndConnect() }
        return connectSession(token: token.value).flatMapError { [self] error in
            guard Self.clientError(error).code == .invalidToken else { return loop.makeFailedFuture(error) }
            self.token = nil
            return logInAndConnect()
        }
    }

    private func logInAndConnect() -> EventLoopFuture<Simp_ConnectResponse> {
        guard let credentials else { return loop.makeFailedFuture(ClientError("no credentials")) }
        guard let password = credentials.password else {
            return loop.makeFailedFuture(ClientError("the login token has expired or was refused, and no password is known", code: .invalidToken))
        }
        var login = Simp_LoginRequest()
        login.user = credentials.user
        login.password = password
        // The token opens sessions for this device only.
        login.device = device
        return request(.login(login)).flatMap { [self] (reply: Simp_Envelope) -> EventLoopFuture<Simp_ConnectResponse> in
            guard case .loginOk(let ok) = reply.body else { return loop.makeFailedFuture(ClientError("unexpected reply to login")) }
            token = (ok.token, ok.expiresAt)
            return connectSession(token: ok.token)
        }
    }

    private func connectSession(token: String) -> EventLoopFuture<Simp_ConnectResponse> {
        var connect = Simp_ConnectRequest()
        connect.token = token
        connect.udpPort = UInt32(udp?.localAddress?.port ?? 0)
        connect.lastSeq = confirmUpTo
        connect.bundles = true
        connect.early = configuration.earlyDelivery && configuration.dataDirectory == nil
        connect.device = device
        return request(.connect(connect)).flatMapThrowing { reply in
            guard case .connected(let response) = reply.body else { throw ClientError("unexpected reply to connect") }
            return response
        }
    }

    /// The time of an event, read once for it and handed to the pure units: this driver's
    /// one clock.
    private static var now: NIODeadline { .now() }

    /// Wall-clock time for what is stored or shown (ms since the epoch).
    private static var nowMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    private func startSession(_ response: Simp_ConnectResponse, on target: ServerAddress) -> EventLoopFuture<Void> {
        do {
            serverUDP = try SocketAddress.makeAddressResolvingHost(target.host, port: configuration.udpPortOverride ?? Int(response.udpPort))
        } catch {
            return loop.makeFailedFuture(ClientError("cannot resolve \(target.host): \(error)"))
        }
        session = response
        textLimit.value = response.maxMessageBytes == 0 ? LongText.defaultMaxBytes : Int(response.maxMessageBytes)
        lifecycle.sessionOpened()
        sessionKey = SymmetricKey(data: response.sessionKey)
        replay = ReplayWindow()
        nextPacketNumber = 1
        let now = Self.now
        sending.startSession(now: now)
        inbox.advance(to: response.confirmedSeq)
        let heartbeat = TimeAmount.milliseconds(Int64(max(response.heartbeatMillis, 100)))
        if let control, let framing = try? control.pipeline.syncOperations.handler(type: EnvelopeFrameHandler.self) {
            framing.watchHeartbeat(on: HeartbeatWheels.shared.wheel(on: control.eventLoop, heartbeat: Heartbeat(interval: heartbeat)))
        }
        let promise = loop.makePromise(of: Void.self)
        boundPromise = promise
        sendBind(now: now)
        armTick(at: now + configuration.bindRetry)
        let timeout = loop.scheduleTask(in: configuration.requestTimeout) {
            promise.fail(ClientError("server did not confirm the UDP path within \(self.configuration.requestTimeout.nanoseconds / 1_000_000_000)s"))
        }
        promise.futureResult.whenComplete { _ in timeout.cancel() }
        return promise.futureResult
    }

    private func sendBind(now: NIODeadline) {
        guard let session, !lifecycle.isBound else { return }
        timers.bindSent(at: now)
        sendDatagram(.bind, Array(session.bindToken))
    }

    /// A datagram socket of the family of `target`'s address (a new one when the family changes).
    private func ensureUDP(for target: ServerAddress) -> EventLoopFuture<Void> {
        let ipv6 = target.host.contains(":")
        if udp != nil, udpIsIPv6 == ipv6 { return loop.makeSucceededVoidFuture() }
        udp?.close(promise: nil)
        udp = nil
        udpIsIPv6 = ipv6
        return DatagramBootstrap(group: loop)
            .channelOption(.datagramVectorReadMessageCount, value: 16)
            // One recvmmsg per wake-up (epoll is level-triggered: the rest is read next turn).
            .channelOption(.maxMessagesPerRead, value: 1)
            // Vector reads split the receive buffer evenly: room for 16 datagrams of the largest size.
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 16 * 2048))
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ClientDatagramHandler(client: self))
                }
            }
            .bind(host: ipv6 ? "::" : "0.0.0.0", port: 0)
            .map { [self] channel in udp = channel }
    }

    private func openControl(_ target: ServerAddress) -> EventLoopFuture<Void> {
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(configuration.connectTimeout)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try addTLS(to: channel, server: target)
                    try channel.pipeline.syncOperations.addHandlers([
                        EnvelopeFrameHandler(maxFrameLength: configuration.maxFrameLength),
                        ClientControlHandler(client: self),
                    ])
                }
            }
            .connect(host: target.host, port: target.port)
            .map { [self] channel in control = channel }
            .flatMapErrorThrowing { error in
                throw ClientError("cannot reach \(target): \(Self.reason(error))")
            }
    }

    /// One request on a connection of its own, closed after the answer.
    @discardableResult
    private func oneShot(_ body: Simp_Envelope.OneOf_Body) async throws(ClientError) -> Simp_Envelope {
        if let refusal = configuration.plaintextExposure.map(ClientError.plaintext(to:)) { throw refusal }
        do {
            let (channel, handler) = try await oneShotChannel()
            defer { channel.close(promise: nil) }
            let timeout = configuration.requestTimeout
            let reply = try await channel.eventLoop.flatSubmit {
                handler.send(Simp_Envelope(requestID: 1, body), on: channel, timeout: timeout)
            }.get()
            if case .error(let error) = reply.body { throw ClientError.server(error) }
            return reply
        } catch {
            throw withTLSHint(Self.clientError(error))
        }
    }

    /// A connection to the first server that takes one, and its handler. Only a failed connect
    /// moves on: once a request is sent, another node would only repeat (or contradict) what
    /// this one did. The handler is kept rather than looked up in the pipeline: a TLS handshake
    /// that fails at once empties the pipeline before the caller looks, and the handler
    /// keeps why (its `early` error).
    private func oneShotChannel() async throws(ClientError) -> (any Channel, OneShotHandler) {
        var failures: [ClientError] = []
        for target in configuration.servers {
            let handler = OneShotHandler()
            do {
                let channel = try await ClientBootstrap(group: loop)
                    .connectTimeout(configuration.connectTimeout)
                    .channelInitializer { [self] channel in
                        channel.eventLoop.makeCompletedFuture {
                            try addTLS(to: channel, server: target)
                            try channel.pipeline.syncOperations.addHandlers([EnvelopeFrameHandler(), handler])
                        }
                    }
                    .connect(host: target.host, port: target.port).get()
                return (channel, handler)
            } catch {
                failures.append(ClientError("cannot reach \(target): \(Self.reason(error))"))
            }
        }
        throw Self.combined(failures)
    }

    /// A TLS server drops a plain client's first frame without a word: say what may be wrong.
    private func withTLSHint(_ error: ClientError) -> ClientError {
        guard configuration.tls == nil, error.code == nil,
              error.message.hasPrefix("server closed the connection") || error.message.hasPrefix("control connection closed") else {
            return error
        }
        return ClientError(error.message + " before answering (if the server serves TLS, connect with TLS: simp --tls)")
    }

    func request(_ body: Simp_Envelope.OneOf_Body) -> EventLoopFuture<Simp_Envelope> {
        guard let control else { return loop.makeFailedFuture(ClientError("not connected", code: .notConnected)) }
        let id = nextRequestID
        nextRequestID += 1
        let promise = loop.makePromise(of: Simp_Envelope.self)
        requests[id] = promise
        control.writeAndFlush(Simp_Envelope(requestID: id, body), promise: nil)
        let timeout = loop.scheduleTask(in: configuration.requestTimeout) { [self] in
            requests.removeValue(forKey: id)?.fail(ClientError("no answer from the server within \(configuration.requestTimeout.nanoseconds / 1_000_000_000)s"))
        }
        promise.futureResult.whenComplete { _ in timeout.cancel() }
        return promise.futureResult
    }

    // MARK: control channel events (on loop)

    private func handle(_ delivered: Simp_Delivered) {
        let news = sending.delivered(delivered)
        if let accepted = news.accepted { emit(accepted) }
        guard let event = news.delivered else {
            // Sent from another of the user's devices: this one shows its copy.
            if news.accepted == nil, let id = LongText.shownID(of: delivered.messageID),
               let receipt = copyReceipts.delivered(id: id, to: delivered.toUser, seq: delivered.seq) {
                emit(.delivered(id: id, to: receipt.to, seq: receipt.seq))
            }
            return
        }
        store?.remove(id: delivered.messageID) { [self] result in
            outboxWritten(result, "remove delivered message \(delivered.messageID) from the outbox",
                          else: "a restart with this data directory reports it delivered again")
        }
        emit(event)
    }

    /// A read receipt (a READ notice in the inbox): the sender's devices hear who read which of
    /// its messages, the reader's other devices what their user read. Never before `delivered`.
    private func showReads(_ message: IncomingMessage) {
        let ids = message.text.split(separator: " ").map(String.init)
        if message.from == credentials?.user {
            guard message.fromDevice != device else { return }
            for id in ids { emit(.read(id: id, from: message.to, by: message.from)) }
            return
        }
        for id in ids {
            if let delivered = sending.deliveryImplied(byReadOf: id) { handle(delivered) }
            emit(.read(id: id, from: message.to, by: message.from))
        }
    }

    func controlReceived(_ envelope: Simp_Envelope) {
        if envelope.requestID != 0, let promise = requests.removeValue(forKey: envelope.requestID) {
            if case .error(let error) = envelope.body { promise.fail(ClientError.server(error)) } else { promise.succeed(envelope) }
            return
        }
        switch envelope.body {
        case .accepted(let accepted):
            acknowledged(accepted.messageID)
            guard let event = sending.accepted(accepted, now: Self.now) else { return }
            if case .groupAccepted = event {
                store?.remove(id: accepted.messageID) { [self] result in
                    outboxWritten(result, "remove accepted group message \(accepted.messageID) from the outbox",
                                  else: "a restart with this data directory sends it again (the server knows it by its id)")
                }
                emit(event)
                return
            }
            store?.markAccepted(id: accepted.messageID, seq: accepted.seq) { [self] result in
                outboxWritten(result, "record that message \(accepted.messageID) was accepted",
                              else: "a restart with this data directory sends it again (the server knows it by its id)")
            }
            emit(event)
        case .delivered(let delivered):
            handle(delivered)
        case .failed(let failed):
            acknowledged(failed.messageID)
            guard let event = sending.failed(failed) else { return }
            store?.remove(id: failed.messageID) { [self] result in
                outboxWritten(result, "remove failed message \(failed.messageID) from the outbox",
                              else: "a restart with this data directory sends it again")
            }
            emit(event)
        case .missing(let missing):
            let now = Self.now
            for message in sending.missing(missing) { transmit(message, .reported, now: now) }
        case .retracted(let retracted):
            guard early.retracted(.init(from: retracted.fromUser, id: retracted.messageID)) else { return }
            emit(.retracted(id: retracted.messageID, from: retracted.fromUser,
                            reason: retracted.reason.isEmpty ? retracted.code.name : retracted.reason))
        case .bound:
            lifecycle.pathBound()
            boundPromise?.succeed(())
            boundPromise = nil
        case .ping(let ping):
            var pong = Simp_Pong()
            pong.nonce = ping.nonce
            control?.writeAndFlush(Simp_Envelope(.pong(pong)), promise: nil)
        case .error(let error):
            if error.code == .sessionClosed || error.code == .sessionReplaced {
                lifecycle.serverEnds(because: error.reason.isEmpty ? error.code.name : error.reason)
            }
            emit(.error("server: \(error.reason.isEmpty ? error.code.name : error.reason)"))
        default:
            break
        }
    }

    /// The outbox on disk lags behind what this process knows: say so, and what it costs.
    private func outboxWritten(_ result: Result<Void, StoreWriteError>, _ what: String, else consequence: String) {
        guard case .failure(let error) = result else { return }
        loop.execute { [self] in
            emit(.error("cannot \(what) in \(error.path): \(error.reason); \(consequence)"))
        }
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
        connectedBox.value = nil
        session = nil
        boundPromise?.fail(ClientError(why))
        boundPromise = nil
        for (_, promise) in requests { promise.fail(ClientError(why)) }
        requests.removeAll()
        switch lifecycle.connectionLost() {
        case .nothing:
            break
        case .end(let reason):
            emit(.ended(reason: reason))
        case .reconnect:
            emit(.disconnected(reason: "control connection to \(server) closed"))
            scheduleReconnect()
        }
    }

    func sendPing() {
        var ping = Simp_Ping()
        ping.nonce = UInt64.random(in: 0...UInt64.max)
        control?.writeAndFlush(Simp_Envelope(.ping(ping)), promise: nil)
    }

    /// The next attempt of the rotation: the next server, at once within a round, after the
    /// backoff before a new one.
    private func scheduleReconnect() {
        guard lifecycle.scheduleAttempt() else { return }
        let attempt = rotation.nextAttempt(jitter: Double.random(in: 0...1))
        emit(.reconnecting(attempt: attempt.number, delayMillis: attempt.delay.nanoseconds / 1_000_000))
        loop.scheduleTask(in: attempt.delay) { [self] in
            guard lifecycle.attemptDue() else { return }
            establish(attempt.index).whenFailure { [self] error in
                emit(.error("reconnect failed: \(Self.clientError(error).message)"))
                scheduleReconnect()
            }
        }
    }

    // MARK: datagrams (on loop)

    func datagramReceived(_ envelope: AddressedEnvelope<ByteBuffer>) {
        var buffer = envelope.data
        guard let header = try? Datagram.decodeHeader(&buffer), header.sessionID == session?.sessionID, let key = sessionKey,
              let payload = try? DatagramSeal.open(header, sealed: buffer, key: key, direction: .toClient),
              replay.accept(header.packetNumber) else { return }
        if header.kind == .challenge {
            var response = Simp_PathResponse()
            response.token = Data(payload)
            control?.writeAndFlush(Simp_Envelope(.pathResponse(response)), promise: nil)
            return
        }
        switch header.kind {
        case .data: received([payload])
        case .early: receivedEarly(payload)
        case .typing:
            let from = String(decoding: payload, as: UTF8.self)
            if UserName.isValid(from) { emit(.typing(from: from)) }
        case .presence:
            if let change = PresenceChange(payload: payload) { emit(.presence(change)) }
        case .bundle:
            guard let messages = try? DatagramBundle.split(payload) else { return }
            received(messages)
        default: return
        }
    }

    /// The messages of one datagram: what they make ready is delivered (and stored) together.
    private func received(_ payloads: [[UInt8]]) {
        let batch = ReceivedBatch.take(payloads, inbox: &inbox, early: &early, user: credentials?.user, device: device)
        if batch.advanced {
            deliver(batch.ready, after: batch.before)
        } else if batch.repeated {
            scheduleReceipt()
        }
        guard batch.gap else { return }
        let now = Self.now
        reportGap(now: now)
        armTick(at: now + ClientTimers.gapRetry)
    }

    /// An EARLY datagram: handed over at once when it overtakes nothing (`EarlyLedger.admit`);
    /// otherwise dropped, and its numbered copy brings it.
    private func receivedEarly(_ payload: [UInt8]) {
        guard let pushed = try? EarlyPayload(decoding: payload),
              let message = try? Simp_Message(serializedBytes: pushed.message), message.seq == 0,
              message.type != .textPart else { return }
        let key = EarlyLedger.Key(from: message.fromUser, id: message.messageID)
        guard early.admit(key, afterSeq: pushed.afterSeq, deliveredUpTo: inbox.deliveredUpTo,
                          holding: inbox.bufferedCount > 0, now: Self.now) else { return }
        emit(.message(IncomingMessage(message)))
    }

    /// `ready` took the delivered mark from `after` to where it is now.
    private func deliver(_ ready: [IncomingMessage], after: UInt64) {
        guard let store else {
            for item in ready { show(item) }
            scheduleReceipt()
            return
        }
        // On disk first: a client killed after showing a message must not show it again,
        // and one the disk did not take must come again (ReceivedSaves).
        if let batch = saves.ready(ready, after: after, upTo: inbox.deliveredUpTo) { save(batch, in: store) }
    }

    /// Hands a message to the application; the copy of one the user sent from another device
    /// is followed by its receipt when that came first.
    private func show(_ given: IncomingMessage) {
        var message = given
        if let part = given.part {
            let taken = reassembly.take(given, as: part, now: Self.now)
            if taken.recoverEarlierParts { recoverParts(before: part, of: given) }
            guard let whole = taken.whole else { return }
            message = whole
        }
        if let change = message.groupChange, let group = message.group {
            emit(.groupChanged(group: group, change: change, seq: message.groupSeq))
            return
        }
        switch message.kind {
        case .contactRequest: return emit(.contactRequest(from: message.from))
        case .contactAccepted: return emit(.contactAccepted(by: message.from))
        case .groupInvited: return emit(.groupInvited(group: GroupName.addressed(by: message.text) ?? message.text, by: message.from))
        case .read: return showReads(message)
        case .message: break
        }
        emit(.message(message))
        guard message.group == nil, !message.fromDevice.isEmpty, message.from == credentials?.user,
              let receipt = copyReceipts.shown(id: message.id, to: message.to) else { return }
        emit(.delivered(id: message.id, to: receipt.to, seq: receipt.seq))
    }

    /// The parts of a long message before `part`, read back from the conversation's history:
    /// a client restarted after confirming them (its reassembly gone with the process) still
    /// shows the message whole, once its last part comes.
    private func recoverParts(before part: LongText.PartID, of message: IncomingMessage) {
        let peer = message.group.map(GroupName.address) ?? (message.from == credentials?.user ? message.to : message.from)
        Task { [self] in
            let found = await earlierParts(before: part, of: message, with: peer)
            loop.execute { [self, found] in
                for recovered in found {
                    guard let piece = recovered.part, let whole = reassembly.add(recovered, as: piece) else { continue }
                    show(whole)
                }
            }
        }
    }

    private func save(_ batch: ReceivedSaves.Batch, in store: ClientStore) {
        store.receive(batch.messages, savedUpTo: batch.upTo) { [self] result in
            loop.execute { [self] in saved(result, in: store) }
        }
    }

    private func saved(_ result: Result<Void, StoreWriteError>, in store: ClientStore) {
        switch result {
        case .success:
            let (shown, next) = saves.written()
            for item in shown { show(item) }
            scheduleReceipt()
            if let next { save(next, in: store) }
        case .failure(let error):
            let failure = saves.failed()
            // Unconfirmed, they are pushed again; what the server had confirmed before this
            // session does not come again.
            inbox = InboundSequencer(deliveredUpTo: failure.rollBackTo)
            inbox.advance(to: session?.confirmedSeq ?? 0)
            guard let seqs = failure.report else { return }
            let which = seqs.count == 1 ? "seq \(seqs.lowerBound)" : "seq \(seqs.lowerBound)-\(seqs.upperBound)"
            emit(.error("cannot save received messages (\(which)) in \(error.path): \(error.reason); "
                + "they are not shown or confirmed, and the server sends them again"))
        }
    }

    /// Asks for what is missing below a held message.
    private func reportGap(now: NIODeadline) {
        let gaps = inbox.gaps()
        guard let first = gaps.first, timers.mayReportGap(first: first, now: now) else { return }
        timers.gapReported(first: first, at: now)
        var receipt = Simp_Receipt()
        receipt.upToSeq = confirmUpTo
        receipt.missing = gaps
        control?.writeAndFlush(Simp_Envelope(.receipt(receipt)), promise: nil)
    }

    /// After a reconnect and now and then: which accepted messages did their recipients confirm?
    private func queryDeliveries(now: NIODeadline) {
        guard let query = sending.deliveryQuery() else { return }
        timers.deliveryQuerySent(at: now)
        control?.writeAndFlush(Simp_Envelope(.query(query)), promise: nil)
    }

    /// One cumulative receipt per burst of datagrams.
    private func scheduleReceipt() {
        guard !receiptScheduled else { return }
        receiptScheduled = true
        loop.execute { [self] in
            receiptScheduled = false
            var receipt = Simp_Receipt()
            receipt.upToSeq = confirmUpTo
            control?.writeAndFlush(Simp_Envelope(.receipt(receipt)), promise: nil)
        }
    }

    // MARK: timers (on loop)

    private func startTicking() {
        timers.start()
        armTick(at: Self.now + ClientTimers.fastTick)
    }

    /// Keeps the one tick task scheduled for the earliest deadline asked for.
    private func armTick(at deadline: NIODeadline) {
        guard timers.arm(deadline) else { return }
        tick?.cancel()
        tick = loop.scheduleTask(deadline: deadline) { [self] in
            tick = nil
            timers.fired()
            let now = Self.now
            onTick(now: now)
            armTick(at: timers.nextTick(waits, now: now))
        }
    }

    private var waits: ClientTimers.Waits {
        ClientTimers.Waits(path: session == nil ? .closed : lifecycle.isBound ? .bound : .binding,
                           acceptance: sending.awaitsAcceptance,
                           delivery: sending.awaitsDelivery,
                           gap: inbox.bufferedCount > 0)
    }

    private func onTick(now: NIODeadline) {
        let due = timers.due(waits, now: now)
        if due.resend { perform(sending.resends(now: now, bound: lifecycle.isBound), .timeout, now: now) }
        if due.bind { sendBind(now: now) }
        if due.deliveryQuery { queryDeliveries(now: now) }
        if due.gapReport { reportGap(now: now) }
        if due.keepalive { sendKeepalive(now: now) }
    }

    private func perform(_ resends: SendTracker.Resends, _ reason: Uplink.Reason, now: NIODeadline) {
        for due in resends.transmit { transmit(due.payload.message, reason, now: now) }
        for withdraw in resends.withdraw {
            uplink.forget(withdraw.messageID)
            control?.writeAndFlush(Simp_Envelope(.withdraw(withdraw)), promise: nil)
        }
    }

    private func sendKeepalive(now: NIODeadline) {
        timers.keepaliveSent(at: now)
        sendDatagram(.keepalive, [])
    }

    private func emit(_ given: ClientEvent) {
        guard let event = longSends.fold(given) else { return }
        if let eventHandler { return eventHandler(event) }
        guard configuration.eventBatches else {
            eventSink.yield(event)
            return
        }
        if pendingEvents.isEmpty { loop.execute { [self] in flushEvents() } }
        pendingEvents.append(event)
    }

    private func flushEvents() {
        guard !pendingEvents.isEmpty else { return }
        batchSink.yield(pendingEvents)
        pendingEvents.removeAll(keepingCapacity: true)
    }

    /// "connection refused" rather than NIO's nested description of every attempt.
    static func reason(_ error: any Error) -> String {
        let underlying = (error as? NIOConnectionError)?.connectionErrors.first?.error ?? error
        if let io = underlying as? IOError { return String(cString: strerror(io.errnoCode)).lowercased() }
        if error is ChannelError { return "connection timed out" }
        if let tls = tlsReason(underlying) { return tls }
        return "\(underlying)"
    }

    /// BoringSSL's reason code, said plainly, with the code kept for searching.
    private static func tlsReason(_ error: any Error) -> String? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return "TLS: the server's certificate does not name the host asked for (\(extra))"
        }
        guard error is NIOSSLError else { return nil }
        let text = "\(error)"
        let plain: [(code: String, meaning: String)] = [
            ("CERTIFICATE_VERIFY_FAILED", "the server's certificate is not trusted (pass its CA with --ca)"),
            ("WRONG_VERSION_NUMBER", "the server does not speak TLS"),
            ("CERTIFICATE_EXPIRED", "the server's certificate has expired"),
        ]
        guard let match = plain.first(where: { text.contains($0.code) }) else { return "TLS: \(text)" }
        return "TLS: \(match.meaning) [\(match.code)]"
    }

    static func clientError(_ error: any Error) -> ClientError {
        if let e = error as? ClientError { return e }
        return ClientError("\(error)")
    }
}

/// A value behind a lock: set on the client's loop, read anywhere.
private final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) {
        stored = value
    }

    var value: Value {
        get {
            lock.lock()
            defer { lock.unlock() }
            return stored
        }
        set {
            lock.lock()
            stored = newValue
            lock.unlock()
        }
    }
}
