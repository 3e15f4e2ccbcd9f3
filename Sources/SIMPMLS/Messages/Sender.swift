/// RFC 9420 section 6:
///
///     struct {
///         SenderType sender_type;
///         select (Sender.sender_type) {
///             case member:              uint32 leaf_index;
///             case external:            uint32 sender_index;
///             case new_member_commit:
///             case new_member_proposal: struct{};
///         };
///     } Sender;
public enum Sender: Sendable, Equatable, Hashable, MLSCodable {
    /// A member, by its leaf index.
    case member(leafIndex: UInt32)
    /// An external sender, by its index in the group's `external_senders` extension.
    case external(senderIndex: UInt32)
    /// A new member proposing to be added (section 12.1.8).
    case newMemberProposal
    /// A new member joining by an external commit (section 12.4.3.2).
    case newMemberCommit

    public var senderType: SenderType {
        switch self {
        case .member: .member
        case .external: .external
        case .newMemberProposal: .newMemberProposal
        case .newMemberCommit: .newMemberCommit
        }
    }

    public init(from reader: inout TLSReader) throws {
        switch try reader.readEnum(SenderType.self) {
        case .member: self = .member(leafIndex: try reader.readUInt32())
        case .external: self = .external(senderIndex: try reader.readUInt32())
        case .newMemberProposal: self = .newMemberProposal
        case .newMemberCommit: self = .newMemberCommit
        }
    }

    public func encode(to writer: inout TLSWriter) throws {
        try senderType.encode(to: &writer)
        switch self {
        case .member(let index), .external(let index): writer.writeUInt32(index)
        case .newMemberProposal, .newMemberCommit: break
        }
    }
}
