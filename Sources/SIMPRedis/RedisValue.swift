/// One Redis reply, copied out of hiredis' memory.
public enum RedisValue: Sendable, Equatable {
    case null
    case bulk([UInt8])
    case integer(Int64)
    case status(String)
    case array([RedisValue])
    /// An error reply for one command; other commands of the same pipeline are unaffected.
    case error(String)

    public var string: String? {
        switch self {
        case .bulk(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let s): return s
        case .integer(let i): return String(i)
        default: return nil
        }
    }

    public var int: Int64? {
        switch self {
        case .integer(let i): return i
        case .bulk, .status: return string.flatMap { Int64($0) }
        default: return nil
        }
    }

    public var bytes: [UInt8]? {
        if case .bulk(let b) = self { return b }
        return nil
    }

    public var array: [RedisValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The value, or the error reply as a thrown `RedisError`.
    public func checked() throws(RedisError) -> RedisValue {
        if case .error(let message) = self { throw RedisError.reply(message) }
        return self
    }
}

/// A command: its arguments as binary-safe byte strings, or a script with its keys and arguments.
public struct RedisCommand: Sendable {
    public var arguments: [[UInt8]]
    /// When set, `arguments` are numkeys, keys and args, and the connection sends EVALSHA.
    public var script: RedisScript?
    /// When set, the connection puts the run id of the Redis it talks to (INFO's `run_id`, new
    /// at every start of the server process) in place of this argument, so a script can tell
    /// that Redis restarted since it last ran, and may have lost its latest writes.
    public var runIDArgument: Int?

    public init(_ arguments: [[UInt8]]) { self.arguments = arguments }

    public init(_ name: String, _ args: [any RedisArgument] = []) {
        self.arguments = [Array(name.utf8)] + args.map { $0.redisBytes }
    }

    public static func script(_ script: RedisScript, keys: [any RedisArgument], args: [any RedisArgument]) -> RedisCommand {
        var command = RedisCommand(([keys.count] + keys + args).map { $0.redisBytes })
        command.script = script
        return command
    }
}

public protocol RedisArgument: Sendable {
    var redisBytes: [UInt8] { get }
}

extension String: RedisArgument { public var redisBytes: [UInt8] { Array(utf8) } }
extension Int: RedisArgument { public var redisBytes: [UInt8] { Array(String(self).utf8) } }
extension Int64: RedisArgument { public var redisBytes: [UInt8] { Array(String(self).utf8) } }
extension UInt64: RedisArgument { public var redisBytes: [UInt8] { Array(String(self).utf8) } }
extension Array: RedisArgument where Element == UInt8 { public var redisBytes: [UInt8] { self } }
