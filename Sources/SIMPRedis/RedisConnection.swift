import CHiredis
import Foundation
import NIOCore

/// One blocking hiredis context. Used by one thread at a time (the pool guarantees it);
/// never called on an event loop.
final class RedisConnection {
    private var context: UnsafeMutablePointer<redisContext>?
    private var loadedScripts: [RedisScript: String] = [:]

    init(_ config: RedisConfiguration) throws(RedisError) {
        guard let ctx = redisConnectWithTimeout(config.host, Int32(config.port), makeTimeval(config.connectTimeout)) else {
            throw RedisError(.connectionFailed, "cannot allocate a hiredis context")
        }
        if ctx.pointee.err != 0 {
            let message = Self.errorString(ctx)
            redisFree(ctx)
            throw RedisError(.connectionFailed, "\(config.host):\(config.port): \(message)")
        }
        redisSetTimeout(ctx, makeTimeval(config.commandTimeout))
        _ = redisEnableKeepAlive(ctx)
        context = ctx
        if config.database != 0 {
            _ = try run([RedisCommand("SELECT", [config.database])])[0].checked()
        }
    }

    deinit {
        if let context { redisFree(context) }
    }

    /// False once hiredis reported an I/O or protocol error: the context cannot be reused.
    var isHealthy: Bool { context != nil }

    /// True when Redis closed this idle connection (it restarted or dropped us): a peek at
    /// the socket shows end-of-file or an error without waiting. Checked before each use, so
    /// a pipeline is only ever sent on a connection that was open when it was sent.
    var peerClosed: Bool {
        guard let context else { return true }
        var byte: UInt8 = 0
        let n = recv(context.pointee.fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return false }
        // 0: end of file; > 0: bytes nobody asked for; < 0: a reset. None is usable.
        return true
    }

    /// Sends every command, then reads every reply: one round trip for the lot.
    func run(_ commands: [RedisCommand]) throws(RedisError) -> [RedisValue] {
        try loadScripts(for: commands)
        for command in commands {
            try append(resolved(command))
        }
        var replies: [RedisValue] = []
        replies.reserveCapacity(commands.count)
        do {
            for _ in commands {
                replies.append(try readReply())
            }
            return try retryUnloadedScripts(commands, replies)
        } catch {
            // The first read flushed the pipeline: Redis may have run it and lost only the answer.
            var sent = error
            sent.mayHaveRun = error.kind == .io || error.kind == .timeout
            throw sent
        }
    }

    private func resolved(_ command: RedisCommand) -> [[UInt8]] {
        guard let script = command.script, let sha = loadedScripts[script] else { return command.arguments }
        return [Array("EVALSHA".utf8), Array(sha.utf8)] + command.arguments
    }

    private func loadScripts(for commands: [RedisCommand]) throws(RedisError) {
        for case let script? in commands.map(\.script) where loadedScripts[script] == nil {
            try append(RedisCommand("SCRIPT", ["LOAD", script.source]).arguments)
            let reply = try readReply().checked()
            guard let sha = reply.string else { throw RedisError(.protocolViolation, "SCRIPT LOAD returned \(reply)") }
            loadedScripts[script] = sha
        }
    }

    /// SCRIPT FLUSH on the server behind our back: run those commands once more with EVAL.
    private func retryUnloadedScripts(_ commands: [RedisCommand], _ replies: [RedisValue]) throws(RedisError) -> [RedisValue] {
        var result = replies
        for (i, reply) in replies.enumerated() {
            guard case .error(let message) = reply, message.hasPrefix("NOSCRIPT"), let script = commands[i].script else { continue }
            loadedScripts[script] = nil
            try append([Array("EVAL".utf8), Array(script.source.utf8)] + commands[i].arguments)
            result[i] = try readReply()
        }
        return result
    }

    private func append(_ arguments: [[UInt8]]) throws(RedisError) {
        guard let context else { throw RedisError(.io, "connection already failed") }
        let flat = arguments.flatMap { $0 }
        let lengths = arguments.map { $0.count }
        let status = flat.withUnsafeBufferPointer { base -> Int32 in
            var offset = 0
            let pointers: [UnsafePointer<CChar>?] = lengths.map { length in
                defer { offset += length }
                let start = base.baseAddress.map { UnsafeRawPointer($0 + offset) } ?? UnsafeRawPointer(bitPattern: 1)!
                return start.assumingMemoryBound(to: CChar.self)
            }
            return pointers.withUnsafeBufferPointer { argv in
                lengths.withUnsafeBufferPointer { argvlen in
                    redisAppendCommandArgv(context, Int32(arguments.count), UnsafeMutablePointer(mutating: argv.baseAddress), argvlen.baseAddress)
                }
            }
        }
        guard status == REDIS_OK else { throw fail() }
    }

    private func readReply() throws(RedisError) -> RedisValue {
        guard let context else { throw RedisError(.io, "connection already failed") }
        var raw: UnsafeMutableRawPointer?
        guard redisGetReply(context, &raw) == REDIS_OK, let raw else { throw fail() }
        defer { freeReplyObject(raw) }
        return Self.value(raw.assumingMemoryBound(to: redisReply.self))
    }

    /// Turns the context's error into a typed error and retires the context.
    private func fail() -> RedisError {
        guard let context else { return RedisError(.io, "connection already failed") }
        let message = Self.errorString(context)
        let code = context.pointee.err
        let lower = message.lowercased()
        let kind: RedisError.Kind = (code == REDIS_ERR_IO && (lower.contains("timed out") || lower.contains("temporarily unavailable"))) ? .timeout : .io
        redisFree(context)
        self.context = nil
        return RedisError(kind, message.isEmpty ? "connection closed" : message)
    }

    private static func value(_ reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            return .bulk(bytes(r.str, r.len))
        case REDIS_REPLY_STATUS:
            return .status(String(decoding: bytes(r.str, r.len), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            return .error(String(decoding: bytes(r.str, r.len), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            return .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            return .array((0..<Int(r.elements)).map { value(r.element[$0]!) })
        default:
            return .null
        }
    }

    private static func bytes(_ str: UnsafeMutablePointer<CChar>?, _ len: Int) -> [UInt8] {
        guard let str, len > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: str, count: len))
    }

    private static func errorString(_ ctx: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: ctx.pointee.errstr) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }
}

private func makeTimeval(_ amount: TimeAmount) -> timeval {
    let micros = amount.nanoseconds / 1000
    return Glibc.timeval(tv_sec: Int(micros / 1_000_000), tv_usec: Int(micros % 1_000_000))
}
