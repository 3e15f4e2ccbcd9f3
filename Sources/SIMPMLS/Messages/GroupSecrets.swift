/// RFC 9420 section 12.4.3: `struct { opaque path_secret<V>; } PathSecret;` A secret: its
/// description does not show it.
public struct PathSecret: Sendable, Equatable, MLSCodable, CustomStringConvertible {
    public var pathSecret: [UInt8]

    public init(pathSecret: [UInt8]) { self.pathSecret = pathSecret }
    public init(from reader: inout TLSReader) throws { pathSecret = try reader.readOpaque() }
    public func encode(to writer: inout TLSWriter) throws { try writer.writeOpaque(pathSecret) }
    public var description: String { "PathSecret(redacted)" }
}

/// RFC 9420 section 12.4.3, what a Welcome encrypts to each new member:
///
///     struct {
///         opaque joiner_secret<V>;
///         optional<PathSecret> path_secret;
///         PreSharedKeyID psks<V>;
///     } GroupSecrets;
///
/// Holds secrets: its description does not show them.
public struct GroupSecrets: Sendable, Equatable, MLSCodable, CustomStringConvertible {
    public var joinerSecret: [UInt8]
    public var pathSecret: PathSecret?
    public var psks: [PreSharedKeyID]

    public init(joinerSecret: [UInt8], pathSecret: PathSecret?, psks: [PreSharedKeyID]) {
        self.joinerSecret = joinerSecret
        self.pathSecret = pathSecret
        self.psks = psks
    }

    public init(from reader: inout TLSReader) throws {
        joinerSecret = try reader.readOpaque()
        pathSecret = try reader.readOptional { try PathSecret(from: &$0) }
        psks = try reader.readVector(of: PreSharedKeyID.self)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(joinerSecret)
        try writer.writeOptional(pathSecret) { try $1.encode(to: &$0) }
        try writer.writeVector(psks)
    }

    public var description: String { "GroupSecrets(redacted, \(psks.count) PSKs)" }
}
