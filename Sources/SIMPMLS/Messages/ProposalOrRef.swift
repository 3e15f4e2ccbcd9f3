/// RFC 9420 section 12.4: `enum { reserved(0), proposal(1), reference(2), (255) } ProposalOrRefType;`
public enum ProposalOrRefType: UInt8, MLSEnum, Sendable {
    case proposal = 1
    case reference = 2
}

/// RFC 9420 section 12.4, a proposal a commit carries or names:
///
///     struct {
///         ProposalOrRefType type;
///         select (ProposalOrRef.type) {
///             case proposal:  Proposal proposal;
///             case reference: ProposalRef reference;
///         };
///     } ProposalOrRef;
///
/// `ProposalRef` is a `HashReference` (`opaque HashReference<V>`, section 5.2):
/// `RefHash("MLS 1.0 Proposal Reference", AuthenticatedContent)`.
public enum ProposalOrRef: Sendable, Equatable, MLSCodable {
    case proposal(Proposal)
    case reference([UInt8])

    public var type: ProposalOrRefType {
        switch self {
        case .proposal: .proposal
        case .reference: .reference
        }
    }

    public init(from reader: inout TLSReader) throws {
        switch try reader.readEnum(ProposalOrRefType.self) {
        case .proposal: self = .proposal(try Proposal(from: &reader))
        case .reference: self = .reference(try reader.readOpaque())
        }
    }

    public func encode(to writer: inout TLSWriter) throws {
        try type.encode(to: &writer)
        switch self {
        case .proposal(let proposal): try proposal.encode(to: &writer)
        case .reference(let reference): try writer.writeOpaque(reference)
        }
    }
}
