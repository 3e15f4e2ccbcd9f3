import Histogram
import MQTTLoad

public enum DurableLoadError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidPattern(String)
    /// The broker's binary is missing: `install` says what provides it.
    case brokerNotFound(broker: String, install: String)
    case brokerDidNotStart(broker: String, why: String)
    case connectionFailed(String)
    /// The broker said or sent something the run cannot go on with.
    case protocolError(String)
    case timedOut(String)

    public var description: String {
        switch self {
        case .invalidPattern(let why): return "invalid load pattern: \(why)"
        case .brokerNotFound(let broker, let install): return "\(broker) not found; install it with \(install)"
        case .brokerDidNotStart(let broker, let why): return "\(broker) did not start: \(why)"
        case .connectionFailed(let why): return "connection failed: \(why)"
        case .protocolError(let why): return why
        case .timedOut(let why): return "timed out: \(why)"
        }
    }

    /// The same error, its message led by where it happened ("consumer of q: ...").
    func context(_ place: String) -> DurableLoadError {
        switch self {
        case .invalidPattern(let why): return .invalidPattern("\(place): \(why)")
        case .brokerNotFound, .brokerDidNotStart: return self
        case .connectionFailed(let why): return .connectionFailed("\(place): \(why)")
        case .protocolError(let why): return .protocolError("\(place): \(why)")
        case .timedOut(let why): return .timedOut("\(place): \(why)")
        }
    }
}

enum DurablePattern {
    /// MQTTLoad's limits, except that a message carries its send time besides its counter.
    static func validate(_ pattern: LoadPattern) throws(DurableLoadError) {
        guard pattern.pairs > 0 else { throw .invalidPattern("pairs must be positive") }
        guard (1...65_535).contains(pattern.window) else { throw .invalidPattern("window must be 1...65535") }
        guard (LoadMessage.headerBytes...1_000_000).contains(pattern.payloadBytes) else {
            throw .invalidPattern("payload must be \(LoadMessage.headerBytes) bytes (counter and send time) to 1 MB")
        }
        guard pattern.duration > 0, pattern.warmup >= 0, pattern.drain >= 0 else {
            throw .invalidPattern("duration must be positive, warmup and drain not negative")
        }
    }

    /// A fresh name part per run, so that runs against one broker never share a queue or stream.
    static func runID() -> String {
        String(UInt32.random(in: 0...UInt32.max), radix: 16)
    }
}
