import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import SIMPCore

/// The client's sockets: TLS, the control connection and its requests, the datagram socket,
/// and the one-shot connections of `register` and `logIn`. Carrying out only.
extension SIMPClient {
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
        return LoginToken(value: ok.token, expiresMillis: ok.expiresAt)
    }

    // MARK: the connection

    /// Opens the datagram socket and the control connection to `target`, the session the
    /// engine asks for, and waits for its path to be bound.
    func establish(_ target: ServerAddress) -> EventLoopFuture<Void> {
        ensureUDP(for: target).flatMap { [self] in
            openControl(target)
        }.flatMap { [self] in
            openSession()
        }.flatMap { [self] response in
            startSession(response, on: target)
        }.flatMapError { [self] error in
            control?.close(promise: nil)
            return loop.makeFailedFuture(error)
        }
    }

    private func openSession() -> EventLoopFuture<Simp_ConnectResponse> {
        let promise = loop.makePromise(of: Simp_ConnectResponse.self)
        sessionPromise?.fail(ClientError("another connection attempt started"))
        sessionPromise = promise
        handle(.sessionWanted(udpPort: udp?.localAddress?.port ?? 0))
        return promise.futureResult
    }

    private func startSession(_ response: Simp_ConnectResponse, on target: ServerAddress) -> EventLoopFuture<Void> {
        do {
            serverUDP = try SocketAddress.makeAddressResolvingHost(target.host, port: configuration.udpPortOverride ?? Int(response.udpPort))
        } catch {
            return loop.makeFailedFuture(ClientError("cannot resolve \(target.host): \(error)"))
        }
        let promise = loop.makePromise(of: Void.self)
        boundPromise = promise
        handle(.sessionOpened(response))
        let timeout = loop.scheduleTask(in: times.request) {
            promise.fail(ClientError("server did not confirm the UDP path within \(self.times.request.nanoseconds / 1_000_000_000)s"))
        }
        promise.futureResult.whenComplete { _ in timeout.cancel() }
        return promise.futureResult
    }

    static func makeTLSContext(_ tls: ClientTLS) -> Result<NIOSSLContext, ClientError> {
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

    /// A datagram socket of the family of `target`'s address (a new one when the family changes).
    func ensureUDP(for target: ServerAddress) -> EventLoopFuture<Void> {
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

    func openControl(_ target: ServerAddress) -> EventLoopFuture<Void> {
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(times.connect)
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

    func request(_ body: Simp_Envelope.OneOf_Body) -> EventLoopFuture<Simp_Envelope> {
        let promise = loop.makePromise(of: Simp_Envelope.self)
        request(body, id: newRequestID(), answering: promise)
        return promise.futureResult
    }

    /// A number for a request, unique on this client.
    func newRequestID() -> UInt64 {
        requestIDs.withLock { last in
            last += 1
            return last
        }
    }

    /// Sends request `id` and completes `promise` when the engine says it is over (answered,
    /// timed out, cancelled, or its connection lost).
    func request(_ body: Simp_Envelope.OneOf_Body, id: UInt64, answering promise: EventLoopPromise<Simp_Envelope>) {
        guard let control else { return promise.fail(ClientError("not connected", code: .notConnected)) }
        let timeout = loop.scheduleTask(in: times.request) { [self] in handle(.requestTimedOut(id)) }
        requests[id] = (promise, timeout)
        // A read mark goes after the receipt of what it marks (`ClientEngine.requestSent`).
        if case .markRead = body { handle(.requestSent(id, marksRead: true)) } else { handle(.requestSent(id)) }
        control.writeAndFlush(Simp_Envelope(requestID: id, body), promise: nil)
    }

    /// One request on a connection of its own, closed after the answer.
    /// Cancelling the caller's task returns at once (`ClientError.cancelled`) and stops the
    /// work: its connection closes (what was sent may still be done by the server).
    @discardableResult
    private func oneShot(_ body: Simp_Envelope.OneOf_Body) async throws(ClientError) -> Simp_Envelope {
        let answer = loop.makePromise(of: Simp_Envelope.self)
        let work = Task { [self] in
            do { answer.succeed(try await oneShotRequest(body)) } catch { answer.fail(error) }
        }
        do {
            return try await untilCancelled(answer) { work.cancel() }
        } catch {
            throw Self.clientError(error)
        }
    }

    private func oneShotRequest(_ body: Simp_Envelope.OneOf_Body) async throws(ClientError) -> Simp_Envelope {
        if let refusal = configuration.plaintextExposure.map(ClientError.plaintext(to:)) { throw refusal }
        do {
            let (channel, handler) = try await oneShotChannel()
            defer { channel.close(promise: nil) }
            if Task.isCancelled { throw ClientError.cancelled }
            let timeout = times.request
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
                    .connectTimeout(times.connect)
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
        throw ClientEngine.combined(failures)
    }

    /// A TLS server drops a plain client's first frame without a word: say what may be wrong.
    func withTLSHint(_ error: ClientError) -> ClientError {
        guard configuration.tls == nil, error.code == nil,
              error.message.hasPrefix("server closed the connection") || error.message.hasPrefix("control connection closed") else {
            return error
        }
        return ClientError(error.message + " before answering (if the server serves TLS, connect with TLS: simp --tls)")
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
