import Foundation
import Logging
import NIOConcurrencyHelpers

/// How `simp-server` writes its log: `text` for a person at a terminal, `json` for a log
/// collector (one object per line).
public enum LogFormat: String, CaseIterable, Sendable {
    case text
    case json
}

/// A swift-log handler that writes each event as one JSON object on one line: `ts` (ISO 8601
/// UTC with milliseconds), `level`, `label`, `message`, and every metadata key as a string
/// field. Lines go to a sink so tests can capture them; the default sink is standard error.
public struct JSONLogHandler: LogHandler {
    public typealias Sink = @Sendable (String) -> Void

    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let sink: Sink

    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil,
                sink: @escaping Sink = JSONLogHandler.standardError) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        sink(line(event))
    }

    /// The event as one line of JSON (no trailing newline).
    func line(_ event: LogEvent) -> String {
        var object: [String: String] = [:]
        for (key, value) in mergedMetadata(event.metadata) {
            Self.flatten(value, as: key, into: &object)
        }
        // The fixed fields win over metadata of the same name: a reader must be able to trust them.
        object["ts"] = Self.timestamp.format(Date())
        object["level"] = event.level.rawValue
        object["label"] = label
        object["message"] = event.message.description
        // [String: String] always serializes; the fallback only keeps the signature total.
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return #"{"level":"error","message":"log event not encodable"}"#
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Handler metadata, then the provider's, then the call's: the most specific wins.
    private func mergedMetadata(_ call: Logger.Metadata?) -> Logger.Metadata {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let call { merged.merge(call) { $1 } }
        return merged
    }

    /// Nested dictionaries become dotted keys, so every field stays a plain string.
    private static func flatten(_ value: Logger.Metadata.Value, as key: String, into object: inout [String: String]) {
        switch value {
        case .dictionary(let entries):
            for (inner, value) in entries { flatten(value, as: key + "." + inner, into: &object) }
        default:
            object[key] = value.description
        }
    }

    private static let timestamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)

    /// Writes each line whole: one lock so lines from different threads never interleave.
    public static let standardError: Sink = { line in
        stderrLock.withLock {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }

    private static let stderrLock = NIOLock()
}
