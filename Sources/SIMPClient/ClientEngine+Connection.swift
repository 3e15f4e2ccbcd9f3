import Crypto
import NIOCore
import SIMPCore

/// The connection's life: `connect`, the choice of server for each attempt, the session's
/// opening and binding, its loss and the reconnects, `disconnect`.
extension ClientEngine {
    /// Why a connection is being opened.
    enum Purpose: Sendable, Equatable {
        /// The application's `connect`, which waits for it.
        case connect
        /// After a lost connection.
        case reconnect
    }

    mutating func storeOpened(_ saved: ClientStore.Saved, now: Moment) {
        hasStore = true
        device = configuration.device ?? saved.device
        sequencer = InboundSequencer(deliveredUpTo: saved.savedUpTo)
        saves = ReceivedSaves(savedUpTo: saved.savedUpTo)
        unshown = ShownLedger(waiting: saved.unshown)
        sending.restore(saved, now: now.deadline)
        statuses.restore(saved.statuses)
    }

    /// `connect`: the servers in turn, starting with the one that last worked.
    mutating func connectRequested(user: String, password: String?, token saved: LoginToken?, now: Moment) {
        credentials = (user, password)
        token = saved
        lifecycle.connectRequested()
        timers.start()
        armTick(at: now.deadline + ClientTimers.fastTick, now: now.deadline)
        connectSearch = (rotation.connectOrder[...], [])
        setConnectionState(.connecting)
        tryNextServer()
    }

    private mutating func tryNextServer() {
        guard let search = connectSearch else { return }
        guard let index = search.order.first else { return connectEnded(.failure(Self.combined(search.failures))) }
        attempt(index, for: .connect)
    }

    /// Opens a connection to the server at `index`, when there is one and whom to log in as.
    private mutating func attempt(_ index: Int, for purpose: Purpose) {
        guard credentials != nil else { return attemptFailed(index: index, purpose, ClientError("no credentials")) }
        guard configuration.servers.indices.contains(index) else {
            return attemptFailed(index: index, purpose, ClientError("no server configured"))
        }
        server = configuration.servers[index]
        actions.append(.attempt(index: index, server, purpose))
    }

    mutating func attemptEnded(index: Int, _ purpose: Purpose, _ result: Result<Void, ClientError>, now: Moment) {
        switch result {
        case .success: established(index: index, now: now)
        case .failure(let failure): attemptFailed(index: index, purpose, failure)
        }
    }

    private mutating func attemptFailed(index: Int, _ purpose: Purpose, _ failure: ClientError) {
        switch purpose {
        case .connect:
            connectAttemptFailed(index: index, failure)
        case .reconnect:
            emit(.error("reconnect failed: \(failure.message)"))
            scheduleReconnect()
        }
    }

    /// The session on the server at `index` is bound: what waited goes out on the new path.
    private mutating func established(index: Int, now: Moment) {
        rotation.connected(to: index)
        actions.append(.connectedServer(server))
        emit(.connected(user: credentials?.user ?? "", path: paths.path ?? .udp))
        setConnectionState(.connected(server))
        uplink.newPath()
        perform(sending.resendAll(now: now.deadline, bound: lifecycle.isBound), .first, now: now)
        followResends(now: now)
        queryDeliveries(now: now.deadline)
        guard connectSearch != nil else { return }
        connectEnded(.success(()))
    }

    /// A refusal (an error code) is the answer of the whole deployment, whose nodes share one
    /// Redis, so it ends the search; only a node that cannot be reached or fails makes way for
    /// the next.
    private mutating func connectAttemptFailed(index: Int, _ failure: ClientError) {
        guard var search = connectSearch else { return }
        guard failure.code == nil else { return connectEnded(.failure(failure)) }
        let servers = configuration.servers
        search.failures.append(servers.count > 1 && servers.indices.contains(index) ? Self.naming(servers[index], in: failure) : failure)
        search.order = search.order.dropFirst()
        guard lifecycle.state == .connecting, !search.order.isEmpty else { return connectEnded(.failure(Self.combined(search.failures))) }
        connectSearch = search
        tryNextServer()
    }

    private mutating func connectEnded(_ result: Result<Void, ClientError>) {
        connectSearch = nil
        // The state first: the application's `connect` returns as soon as it is told.
        if case .failure = result {
            lifecycle.connectFailed()
            setConnectionState(lifecycle.isBound ? .connected(server) : .disconnected)
        }
        actions.append(.connectEnded(result))
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

    // MARK: opening the session

    /// CONNECTs with the token of the last login while it is valid, so a reconnect needs no
    /// password and a login throttle (others' failed guesses) cannot stop it; logs in with the
    /// password only when there is no such token or the server refuses it.
    mutating func sessionWanted(udpPort: Int, now: Moment) {
        sessionUDPPort = udpPort
        guard let token, token.expiresMillis > now.millis + 60_000 else { return logIn() }
        requestSession(token: token.value, presented: true)
    }

    private mutating func logIn() {
        guard let credentials else { return actions.append(.sessionRequested(.failure(ClientError("no credentials")))) }
        guard let password = credentials.password else {
            let refused = ClientError("the login token has expired or was refused, and no password is known", code: .invalidToken)
            return actions.append(.sessionRequested(.failure(refused)))
        }
        var login = Simp_LoginRequest()
        login.user = credentials.user
        login.password = password
        // The token opens sessions for this device only.
        login.device = device
        actions.append(.request(.login(login), .login))
    }

    private mutating func requestSession(token: String, presented: Bool) {
        var connect = Simp_ConnectRequest()
        connect.token = token
        connect.udpPort = UInt32(sessionUDPPort)
        connect.lastSeq = confirmUpTo
        if receivedUpTo > connect.lastSeq { connect.receivedSeq = receivedUpTo }
        connect.bundles = true
        connect.early = configuration.earlyDelivery && configuration.dataDirectory == nil && !configuration.confirmWhenShown
        connect.device = device
        actions.append(.request(.connect(connect), .connect(tokenPresented: presented)))
    }

    mutating func sessionAnswered(_ step: SessionStep, _ answer: Result<Simp_Envelope, ClientError>) {
        switch (step, answer) {
        case (.login, .success(let reply)):
            guard case .loginOk(let ok) = reply.body else { return actions.append(.sessionRequested(.failure(ClientError("unexpected reply to login")))) }
            token = LoginToken(value: ok.token, expiresMillis: ok.expiresAt)
            requestSession(token: ok.token, presented: false)
        case (.connect, .success(let reply)):
            guard case .connected(let response) = reply.body else {
                return actions.append(.sessionRequested(.failure(ClientError("unexpected reply to connect"))))
            }
            actions.append(.sessionRequested(.success(response)))
        case (.connect(tokenPresented: true), .failure(let error)) where error.code == .invalidToken:
            token = nil
            logIn()
        case (_, .failure(let error)):
            actions.append(.sessionRequested(.failure(error)))
        }
    }

    /// The server opened a session: its datagrams are sealed under its key, numbered afresh,
    /// and its path is bound (retried until the server confirms it).
    mutating func sessionOpened(_ response: Simp_ConnectResponse, now: Moment) {
        session = response
        actions.append(.textLimit(response.maxMessageBytes == 0 ? LongText.defaultMaxBytes : Int(response.maxMessageBytes)))
        lifecycle.sessionOpened()
        sessionKey = SymmetricKey(data: response.sessionKey)
        replay = ReplayWindow()
        nextPacketNumber = 1
        sending.startSession(now: now.deadline)
        sequencer.advance(to: response.confirmedSeq)
        actions.append(.watchHeartbeat(.milliseconds(Int64(max(response.heartbeatMillis, 100)))))
        paths.sessionOpened(now: now.deadline)
        sendBind(now: now.deadline)
        armTick(at: now.deadline + min(times.bindRetry, PathChoice.streamHeadStart), now: now.deadline)
    }

    // MARK: loss, reconnects, disconnect

    mutating func controlClosed() {
        session = nil
        paths.sessionEnded()
        actions.append(.connectedServer(nil))
        switch lifecycle.connectionLost() {
        case .nothing:
            break
        case .end(let reason):
            emit(.ended(reason: reason))
            setConnectionState(.ended(reason: reason))
        case .reconnect:
            emit(.disconnected(reason: "control connection to \(server) closed"))
            scheduleReconnect()
        }
    }

    /// The next attempt of the rotation: the next server, at once within a round, after the
    /// backoff before a new one.
    private mutating func scheduleReconnect() {
        guard lifecycle.scheduleAttempt() else { return }
        let attempt = rotation.nextAttempt(jitter: randomFraction())
        emit(.reconnecting(attempt: attempt.number, delay: Duration(attempt.delay)))
        setConnectionState(.reconnecting(attempt: attempt.number, after: Duration(attempt.delay)))
        actions.append(.reconnect(index: attempt.index, after: attempt.delay))
    }

    mutating func reconnectDue(index: Int) {
        guard lifecycle.attemptDue() else { return }
        attempt(index, for: .reconnect)
    }

    /// Closes the connection and stops reconnecting. Without a data directory, messages not
    /// yet accepted fail now: nothing will send them again.
    mutating func disconnect() {
        lifecycle.disconnectedByApplication()
        actions.append(.connectedServer(nil))
        timers.stop()
        tickSchedule.cancel()
        setConnectionState(.disconnected)
        guard !hasStore else { return }
        for event in sending.abandonUnaccepted() { emit(event) }
        uplink.newPath()
    }

    /// The caller of `connect` gave up waiting: its connect fails with `ClientError.cancelled`
    /// and the connection it was opening is closed, as by `disconnect`. A connect already
    /// over (or none) is left as it is.
    mutating func connectCancelled() {
        guard connectSearch != nil else { return }
        connectEnded(.failure(.cancelled))
        disconnect()
        actions.append(.closeConnection)
    }

    mutating func passwordChanged(to password: String, token: LoginToken) {
        if let user = credentials?.user { credentials = (user, password) }
        self.token = token
    }
}
