import NIOCore
import NIOPosix

/// The Redis connection of one event loop: every request from that loop is pipelined on it
/// without waiting for earlier answers, so requests run in Redis in the order they were made,
/// and nothing hops to another thread. Requests made in one loop tick leave in one write.
/// Confined to `loop` (every method asserts it), which is why the closures that run there may
/// capture it. A closed connection is replaced on next use.
final class RedisLoopConnection: @unchecked Sendable {
    let loop: any EventLoop
    private let configuration: RedisConfiguration
    private var channel: (any Channel)?
    private var connecting: EventLoopFuture<any Channel>?
    /// Scripts this connection has loaded (their SCRIPT LOAD went ahead of their first use).
    private var loaded: Set<RedisScript> = []
    /// Every script used so far: a new connection loads them all before it is used.
    private var known: Set<RedisScript> = []
    /// The run id of the Redis this connection reached (see `RedisCommand.runIDArgument`).
    private var runID: [UInt8] = []
    private var flushScheduled = false
    private let observeRoundTrip: RedisPool.RoundTripObserver?

    init(loop: any EventLoop, configuration: RedisConfiguration, observeRoundTrip: RedisPool.RoundTripObserver? = nil) {
        self.loop = loop
        self.configuration = configuration
        self.observeRoundTrip = observeRoundTrip
    }

    func run(_ commands: [RedisCommand]) -> EventLoopFuture<[RedisValue]> {
        loop.preconditionInEventLoop()
        return ready().flatMap { channel in
            self.send(commands, on: channel)
        }.flatMap { replies in
            self.retryUnloadedScripts(commands, replies)
        }
    }

    func close() -> EventLoopFuture<Void> {
        loop.preconditionInEventLoop()
        let current = channel
        channel = nil
        return current?.close() ?? loop.makeSucceededVoidFuture()
    }

    private func ready() -> EventLoopFuture<any Channel> {
        if let channel, channel.isActive { return loop.makeSucceededFuture(channel) }
        if let connecting { return connecting }
        let future = connect()
        connecting = future
        future.whenComplete { _ in self.connecting = nil }
        return future
    }

    private func connect() -> EventLoopFuture<any Channel> {
        let timeout = configuration.commandTimeout
        let where_ = "\(configuration.host):\(configuration.port)"
        return ClientBootstrap(group: loop)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RedisChannelHandler(timeout: timeout))
                }
            }
            .connect(host: configuration.host, port: configuration.port)
            .flatMapErrorThrowing { error in
                throw RedisError(.connectionFailed, "\(where_): \(Self.reason(error))")
            }
            .flatMap { channel in self.prepare(channel) }
            .map { channel in
                self.channel = channel
                return channel
            }
    }

    /// A new connection logs in (AUTH) and picks its database before anything else, in the
    /// same write as the rest of its preparation.
    ///
    /// A Redis that restarted answers LOADING until its data is back, and has forgotten every
    /// script. The connection is used only once Redis answers and holds the scripts used so
    /// far: otherwise a script call would meet NOSCRIPT and run again after calls pipelined
    /// behind it, out of the order in which they were made (the order of sequence numbers).
    private func prepare(_ channel: any Channel) -> EventLoopFuture<any Channel> {
        loaded = []
        let configuration = configuration
        let scripts = Array(known)
        let login = [configuration.authentication, configuration.database != 0 ? RedisCommand("SELECT", [configuration.database]) : nil]
            .compactMap { $0 }
        let commands = login + [RedisCommand("PING", []), RedisCommand("INFO", ["server"])]
            + scripts.map { RedisCommand("SCRIPT", ["LOAD", $0.source]) }
        return loop.makeCompletedFuture {
            try configuration.checkLogin()
        }.flatMap {
            self.send(commands, on: channel)
        }.flatMapThrowing { replies in
            for (index, reply) in replies.enumerated() {
                guard case .error(let message) = reply else { continue }
                throw configuration.loginRefused(message, toAuth: index == 0 && configuration.authentication != nil)
                    ?? RedisError.reply(message)
            }
            guard let runID = Self.runID(in: replies[login.count + 1]) else {
                throw RedisError(.protocolViolation, "INFO server without a run_id")
            }
            self.runID = runID
            self.loaded = Set(scripts)
            return channel
        }.flatMapError { error in
            channel.close(promise: nil)
            // The caller's own commands were never sent.
            var failure = error as? RedisError ?? RedisError(.io, "\(error)")
            failure.mayHaveRun = false
            return self.loop.makeFailedFuture(failure)
        }
    }

    private func send(_ commands: [RedisCommand], on channel: any Channel) -> EventLoopFuture<[RedisValue]> {
        var bytes = channel.allocator.buffer(capacity: 64 * commands.count)
        var skip = 0
        for command in commands {
            guard let script = command.script, !loaded.contains(script) else { continue }
            RedisWire.encode(RedisCommand("SCRIPT", ["LOAD", script.source]).arguments, into: &bytes)
            loaded.insert(script)
            known.insert(script)
            skip += 1
        }
        for command in commands {
            var arguments = command.arguments
            if let index = command.runIDArgument { arguments[index] = runID }
            if let script = command.script { arguments = [Array("EVALSHA".utf8), Array(script.sha.utf8)] + arguments }
            RedisWire.encode(arguments, into: &bytes)
        }
        let promise = loop.makePromise(of: [RedisValue].self)
        // A write that never reaches the handler (the channel closed under it and the pipeline
        // was torn down) must still be answered; a promise already answered ignores this.
        let written = loop.makePromise(of: Void.self)
        written.futureResult.whenFailure { error in
            promise.fail(RedisError(.io, "write to Redis failed: \(error)", mayHaveRun: true))
        }
        channel.write(RedisRequest(bytes: bytes, replies: commands.count, skip: skip, promise: promise), promise: written)
        scheduleFlush(channel)
        observe(promise.futureResult)
        return promise.futureResult
    }

    /// Only answered batches count: a failure's time is the timeout or the moment the
    /// connection broke, not how long Redis took.
    private func observe(_ replies: EventLoopFuture<[RedisValue]>) {
        guard let observeRoundTrip else { return }
        let start = ContinuousClock.now
        replies.whenSuccess { _ in observeRoundTrip(ContinuousClock.now - start) }
    }

    /// One flush, so one syscall, for everything written in this loop tick.
    private func scheduleFlush(_ channel: any Channel) {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.execute {
            self.flushScheduled = false
            channel.flush()
        }
    }

    /// SCRIPT FLUSH on the server behind our back: run those commands again with EVAL.
    /// (They then run after whatever was pipelined behind them; a flush is an operator's act.)
    private func retryUnloadedScripts(_ commands: [RedisCommand], _ replies: [RedisValue]) -> EventLoopFuture<[RedisValue]> {
        let unloaded = replies.indices.filter { index in
            guard case .error(let message) = replies[index] else { return false }
            return message.hasPrefix("NOSCRIPT") && commands[index].script != nil
        }
        guard !unloaded.isEmpty else { return loop.makeSucceededFuture(replies) }
        let again = unloaded.map { index -> RedisCommand in
            let script = commands[index].script!
            loaded.remove(script)
            var eval = RedisCommand([Array("EVAL".utf8), Array(script.source.utf8)] + commands[index].arguments)
            eval.runIDArgument = commands[index].runIDArgument.map { $0 + 2 }
            return eval
        }
        return ready().flatMap { channel in self.send(again, on: channel) }.map { retried in
            var result = replies
            for (index, reply) in zip(unloaded, retried) { result[index] = reply }
            return result
        }
    }

    /// The `run_id:` line of INFO's answer.
    static func runID(in reply: RedisValue) -> [UInt8]? {
        guard let text = reply.string else { return nil }
        for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix("run_id:") {
            return Array(line.dropFirst("run_id:".count).utf8)
        }
        return nil
    }

    /// "connection refused" rather than NIO's nested description of every attempt.
    private static func reason(_ error: any Error) -> String {
        let underlying = (error as? NIOConnectionError)?.connectionErrors.first?.error ?? error
        if let io = underlying as? IOError { return String(cString: strerror(io.errnoCode)).lowercased() }
        if underlying is ChannelError { return "connect timed out" }
        return "\(underlying)"
    }
}
