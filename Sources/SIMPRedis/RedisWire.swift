import CHiredis
import NIOCore

/// RESP on the wire through hiredis' own formatter and reply reader, with no socket of its
/// own: NIO does the I/O, hiredis turns commands into bytes and bytes into replies.
public enum RedisWire {
    /// Appends one command in RESP, as hiredis formats it.
    public static func encode(_ arguments: [[UInt8]], into buffer: inout ByteBuffer) {
        guard !arguments.isEmpty else { return }
        var target: UnsafeMutablePointer<CChar>?
        let length = withArgv(arguments) { argv, argvlen in
            redisFormatCommandArgv(&target, Int32(arguments.count), argv, argvlen)
        }
        guard let target, length > 0 else { return }
        buffer.writeBytes(UnsafeRawBufferPointer(start: target, count: Int(length)))
        redisFreeCommand(target)
    }

    /// Calls `body` with hiredis' argv and argvlen over one contiguous copy of the arguments,
    /// valid for the call only. Scratch space, not arrays: this runs for every Redis command,
    /// and small commands then allocate nothing.
    private static func withArgv<R>(_ arguments: [[UInt8]],
                                    _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R) -> R {
        let total = arguments.reduce(0) { $0 + $1.count }
        // An empty argument still needs a non-null pointer; its length says 0.
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: max(total, 1)) { bytes in
            withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: arguments.count) { argv in
                withUnsafeTemporaryAllocation(of: Int.self, capacity: arguments.count) { argvlen in
                    var offset = 0
                    for (index, argument) in arguments.enumerated() {
                        let start = bytes.baseAddress! + offset
                        argument.withUnsafeBytes { UnsafeMutableRawPointer(start).copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(start), byteCount: $0.count) }
                        argv[index] = UnsafePointer(start)
                        argvlen[index] = argument.count
                        offset += argument.count
                    }
                    return body(argv.baseAddress!, UnsafePointer(argvlen.baseAddress!))
                }
            }
        }
    }
}

/// hiredis' incremental reply reader: feed it what the socket read, take out whole replies.
/// Split and coalesced reads are the normal case. Owns C memory: one owner, one thread.
public final class RedisReplyReader {
    private let reader: UnsafeMutablePointer<redisReader>

    public init() {
        reader = redisReaderCreate()
    }

    deinit {
        redisReaderFree(reader)
    }

    public func feed(_ buffer: ByteBuffer) throws(RedisError) {
        let status = buffer.withUnsafeReadableBytes { raw in
            redisReaderFeed(reader, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count)
        }
        guard status == REDIS_OK else { throw readerError() }
    }

    /// The next whole reply, nil when more bytes are needed.
    public func next() throws(RedisError) -> RedisValue? {
        var raw: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &raw) == REDIS_OK else { throw readerError() }
        guard let raw else { return nil }
        defer { freeReplyObject(raw) }
        return RedisValue(raw.assumingMemoryBound(to: redisReply.self))
    }

    private func readerError() -> RedisError {
        let message = withUnsafeBytes(of: reader.pointee.errstr) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return RedisError(.protocolViolation, "unreadable reply from Redis: \(message)", mayHaveRun: true)
    }
}

extension RedisValue {
    /// Copies a hiredis reply out of C memory.
    init(_ reply: UnsafeMutablePointer<redisReply>) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING: self = .bulk(Self.bytes(r.str, r.len))
        case REDIS_REPLY_STATUS: self = .status(String(decoding: Self.bytes(r.str, r.len), as: UTF8.self))
        case REDIS_REPLY_ERROR: self = .error(String(decoding: Self.bytes(r.str, r.len), as: UTF8.self))
        case REDIS_REPLY_INTEGER: self = .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY: self = .array((0..<Int(r.elements)).map { RedisValue(r.element[$0]!) })
        default: self = .null
        }
    }

    private static func bytes(_ str: UnsafeMutablePointer<CChar>?, _ len: Int) -> [UInt8] {
        guard let str, len > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: str, count: len))
    }
}
