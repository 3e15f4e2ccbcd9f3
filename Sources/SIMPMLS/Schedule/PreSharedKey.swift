/// RFC 9420 section 8.4: `enum { reserved(0), external(1), resumption(2), (255) } PSKType;`
public enum PSKType: UInt8, MLSEnum, Sendable {
    case external = 1
    case resumption = 2
}

/// RFC 9420 section 8.4:
/// `enum { reserved(0), application(1), reinit(2), branch(3), (255) } ResumptionPSKUsage;`
public enum ResumptionPSKUsage: UInt8, MLSEnum, Sendable {
    case application = 1
    case reinit = 2
    case branch = 3
}

/// RFC 9420 section 8.4: which pre-shared key a group injects, and a nonce.
///
///     struct {
///       PSKType psktype;
///       select (PreSharedKeyID.psktype) {
///         case external:
///           opaque psk_id<V>;
///         case resumption:
///           ResumptionPSKUsage usage;
///           opaque psk_group_id<V>;
///           uint64 psk_epoch;
///       };
///       opaque psk_nonce<V>;
///     } PreSharedKeyID;
///
/// Decoding checks the structure only; that `psk_nonce` is `KDF.Nh` bytes long, and the rules on
/// `usage` (section 8.4, 12.1.4), are for whoever processes the PreSharedKey proposal.
public struct PreSharedKeyID: Sendable, Equatable, MLSCodable {
    /// The `select` of `PreSharedKeyID`.
    public enum Kind: Sendable, Equatable {
        /// `psk_id`: the application's name for an external PSK.
        case external(pskID: [UInt8])
        /// The `resumption_psk` of epoch `epoch` of group `groupID`.
        case resumption(usage: ResumptionPSKUsage, groupID: [UInt8], epoch: UInt64)
    }

    public var kind: Kind
    /// `psk_nonce`: fresh random bytes, `KDF.Nh` of them.
    public var nonce: [UInt8]

    public init(kind: Kind, nonce: [UInt8]) {
        self.kind = kind
        self.nonce = nonce
    }

    public var pskType: PSKType {
        switch kind {
        case .external: .external
        case .resumption: .resumption
        }
    }

    public init(from reader: inout TLSReader) throws {
        switch try reader.readEnum(PSKType.self) {
        case .external:
            kind = .external(pskID: try reader.readOpaque())
        case .resumption:
            let usage = try reader.readEnum(ResumptionPSKUsage.self)
            let groupID = try reader.readOpaque()
            kind = .resumption(usage: usage, groupID: groupID, epoch: try reader.readUInt64())
        }
        nonce = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        try pskType.encode(to: &writer)
        switch kind {
        case .external(let pskID):
            try writer.writeOpaque(pskID)
        case .resumption(let usage, let groupID, let epoch):
            try usage.encode(to: &writer)
            try writer.writeOpaque(groupID)
            writer.writeUInt64(epoch)
        }
        try writer.writeOpaque(nonce)
    }
}

/// RFC 9420 section 8.4: `struct { PreSharedKeyID id; uint16 index; uint16 count; } PSKLabel;`
public struct PSKLabel: Sendable, Equatable, MLSEncodable {
    public var id: PreSharedKeyID
    public var index: UInt16
    public var count: UInt16

    public init(id: PreSharedKeyID, index: UInt16, count: UInt16) {
        self.id = id
        self.index = index
        self.count = count
    }

    public func encode(to writer: inout TLSWriter) throws {
        try id.encode(to: &writer)
        writer.writeUInt16(index)
        writer.writeUInt16(count)
    }
}

/// Why the PSKs could not be combined.
public enum PSKError: Error, Equatable, Sendable {
    /// More PSKs than `PSKLabel.count` (a uint16) can number.
    case tooManyPSKs(Int)
}

/// A pre-shared key with its identifier, as injected into an epoch (RFC 9420 section 8.4).
public struct PreSharedKey: Sendable, Equatable {
    public var id: PreSharedKeyID
    /// The PSK's value: the external key, or the named epoch's `resumption_psk`.
    public var secret: SecretBytes

    public init(id: PreSharedKeyID, secret: SecretBytes) {
        self.id = id
        self.secret = secret
    }
}

extension MLSCipherSuite {
    /// `psk_secret` for the PSKs `psks`, in the order their proposals appear in the commit
    /// (RFC 9420 section 8.4):
    ///
    ///     psk_extracted_[i] = KDF.Extract(0, psk_[i])
    ///     psk_input_[i] = ExpandWithLabel(psk_extracted_[i], "derived psk", PSKLabel, KDF.Nh)
    ///     psk_secret_[0] = 0
    ///     psk_secret_[i] = KDF.Extract(psk_input_[i-1], psk_secret_[i-1])
    ///     psk_secret     = psk_secret_[n]
    ///
    /// where 0 is `KDF.Nh` zero bytes; with no PSK, `psk_secret` is that zero string.
    public func pskSecret(_ psks: [PreSharedKey]) throws -> SecretBytes {
        guard psks.count <= Int(UInt16.max) else { throw PSKError.tooManyPSKs(psks.count) }
        let zero = SecretBytes.zero(self).bytes
        var secret = zero
        for (i, psk) in psks.enumerated() {
            let extracted = extract(salt: zero, ikm: psk.secret.bytes)
            let label = try PSKLabel(id: psk.id, index: UInt16(i), count: UInt16(psks.count)).mlsEncoded()
            let input = try expandWithLabel(secret: extracted, label: Array("derived psk".utf8), context: label, length: hashLength)
            secret = extract(salt: input, ikm: secret)
        }
        return SecretBytes(secret)
    }
}
