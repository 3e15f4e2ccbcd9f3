/// RFC 9420 section 12.1: `uint16 ProposalType;`, an open registry (section 17.5). Any value
/// decodes where only a type is named (``Capabilities/proposals``); a ``Proposal`` of a type
/// without a case cannot be decoded.
public struct ProposalType: Hashable, Sendable, MLSCodable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let add = ProposalType(1)
    public static let update = ProposalType(2)
    public static let remove = ProposalType(3)
    public static let preSharedKey = ProposalType(4)
    public static let reInit = ProposalType(5)
    public static let externalInit = ProposalType(6)
    public static let groupContextExtensions = ProposalType(7)

    public init(from reader: inout TLSReader) throws { rawValue = try reader.readUInt16() }
    public func encode(to writer: inout TLSWriter) throws { writer.writeUInt16(rawValue) }
    public var description: String { "0x" + String(rawValue, radix: 16) }
}


/// RFC 9420 section 12.1:
///
///     struct {
///         ProposalType proposal_type;
///         select (Proposal.proposal_type) {
///             case add:                      Add;
///             case update:                   Update;
///             case remove:                   Remove;
///             case psk:                      PreSharedKey;
///             case reinit:                   ReInit;
///             case external_init:            ExternalInit;
///             case group_context_extensions: GroupContextExtensions;
///         };
///     } Proposal;
///
/// A proposal of any other type cannot be decoded (its body has no length prefix), so it is
/// rejected with ``MLSDecodingError/unknownEnumValue(type:value:)``.
public enum Proposal: Sendable, Equatable, MLSCodable {
    case add(AddProposal)
    case update(UpdateProposal)
    case remove(RemoveProposal)
    case preSharedKey(PreSharedKeyProposal)
    case reInit(ReInitProposal)
    case externalInit(ExternalInitProposal)
    case groupContextExtensions(GroupContextExtensionsProposal)

    public var proposalType: ProposalType {
        switch self {
        case .add: .add
        case .update: .update
        case .remove: .remove
        case .preSharedKey: .preSharedKey
        case .reInit: .reInit
        case .externalInit: .externalInit
        case .groupContextExtensions: .groupContextExtensions
        }
    }

    public init(from reader: inout TLSReader) throws {
        let type = try ProposalType(from: &reader)
        switch type {
        case .add: self = .add(try AddProposal(from: &reader))
        case .update: self = .update(try UpdateProposal(from: &reader))
        case .remove: self = .remove(try RemoveProposal(from: &reader))
        case .preSharedKey: self = .preSharedKey(try PreSharedKeyProposal(from: &reader))
        case .reInit: self = .reInit(try ReInitProposal(from: &reader))
        case .externalInit: self = .externalInit(try ExternalInitProposal(from: &reader))
        case .groupContextExtensions: self = .groupContextExtensions(try GroupContextExtensionsProposal(from: &reader))
        default: throw MLSDecodingError.unknownEnumValue(type: "ProposalType", value: UInt64(type.rawValue))
        }
    }

    public func encode(to writer: inout TLSWriter) throws {
        try proposalType.encode(to: &writer)
        switch self {
        case .add(let p): try p.encode(to: &writer)
        case .update(let p): try p.encode(to: &writer)
        case .remove(let p): try p.encode(to: &writer)
        case .preSharedKey(let p): try p.encode(to: &writer)
        case .reInit(let p): try p.encode(to: &writer)
        case .externalInit(let p): try p.encode(to: &writer)
        case .groupContextExtensions(let p): try p.encode(to: &writer)
        }
    }
}
