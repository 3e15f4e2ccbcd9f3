/// RFC 9420 section 8.4: `enum { reserved(0), external(1), resumption(2), (255) } PSKType;`
public enum PSKType: UInt8, MLSEnum, Sendable {
    case external = 1
    case resumption = 2
}

/// RFC 9420 section 8.4: `enum { reserved(0), application(1), reinit(2), branch(3), (255) }
/// ResumptionPSKUsage;`
public enum ResumptionPSKUsage: UInt8, MLSEnum, Sendable {
    case application = 1
    case reinit = 2
    case branch = 3
}

/// RFC 9420 section 8.4, how a pre-shared key is named (not the key itself):
///
///     struct {
///         PSKType psktype;
///         select (PreSharedKeyID.psktype) {
///             case external:   opaque psk_id<V>;
///             case resumption: ResumptionPSKUsage usage; opaque psk_group_id<V>; uint64 psk_epoch;
///         };
///         opaque psk_nonce<V>;
///     } PreSharedKeyID;
public struct PreSharedKeyID: Sendable, Equatable, MLSCodable {
    /// The `psktype`-dependent part.
    public enum Kind: Sendable, Equatable {
        case external(pskID: [UInt8])
        case resumption(usage: ResumptionPSKUsage, pskGroupID: [UInt8], pskEpoch: UInt64)

        public var pskType: PSKType {
            switch self {
            case .external: .external
            case .resumption: .resumption
            }
        }
    }

    public var kind: Kind
    public var pskNonce: [UInt8]

    public init(kind: Kind, pskNonce: [UInt8]) {
        self.kind = kind
        self.pskNonce = pskNonce
    }

    public init(from reader: inout TLSReader) throws {
        switch try reader.readEnum(PSKType.self) {
        case .external:
            kind = .external(pskID: try reader.readOpaque())
        case .resumption:
            let usage = try reader.readEnum(ResumptionPSKUsage.self)
            let groupID = try reader.readOpaque()
            kind = .resumption(usage: usage, pskGroupID: groupID, pskEpoch: try reader.readUInt64())
        }
        pskNonce = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        try kind.pskType.encode(to: &writer)
        switch kind {
        case .external(let pskID):
            try writer.writeOpaque(pskID)
        case .resumption(let usage, let groupID, let epoch):
            try usage.encode(to: &writer)
            try writer.writeOpaque(groupID)
            writer.writeUInt64(epoch)
        }
        try writer.writeOpaque(pskNonce)
    }
}
