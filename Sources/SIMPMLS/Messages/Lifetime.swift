/// RFC 9420 section 7.2: `struct { uint64 not_before; uint64 not_after; } Lifetime;`, seconds
/// since the Unix epoch. SIMPMLS has no clock: the caller checks a lifetime against its time.
public struct Lifetime: Sendable, Equatable, MLSCodable {
    public var notBefore: UInt64
    public var notAfter: UInt64

    public init(notBefore: UInt64, notAfter: UInt64) {
        self.notBefore = notBefore
        self.notAfter = notAfter
    }

    /// Whether `time` (seconds since the Unix epoch) lies within the lifetime, ends included.
    public func contains(_ time: UInt64) -> Bool { notBefore <= time && time <= notAfter }

    public init(from reader: inout TLSReader) throws {
        notBefore = try reader.readUInt64()
        notAfter = try reader.readUInt64()
    }

    public func encode(to writer: inout TLSWriter) throws {
        writer.writeUInt64(notBefore)
        writer.writeUInt64(notAfter)
    }
}
