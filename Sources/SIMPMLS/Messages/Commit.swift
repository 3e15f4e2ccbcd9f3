/// RFC 9420 section 12.4:
///
///     struct {
///         ProposalOrRef proposals<V>;
///         optional<UpdatePath> path;
///     } Commit;
public struct Commit: Sendable, Equatable, MLSCodable {
    public var proposals: [ProposalOrRef]
    public var path: UpdatePath?

    public init(proposals: [ProposalOrRef], path: UpdatePath?) {
        self.proposals = proposals
        self.path = path
    }

    public init(from reader: inout TLSReader) throws {
        proposals = try reader.readVector(of: ProposalOrRef.self)
        path = try reader.readOptional { try UpdatePath(from: &$0) }
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeVector(proposals)
        try writer.writeOptional(path) { try $1.encode(to: &$0) }
    }
}
