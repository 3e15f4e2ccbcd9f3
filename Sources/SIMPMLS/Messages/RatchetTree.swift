/// RFC 9420 section 7.8:
///
///     struct {
///         NodeType node_type;
///         select (Node.node_type) {
///             case leaf:   LeafNode leaf_node;
///             case parent: ParentNode parent_node;
///         };
///     } Node;
public enum Node: Sendable, Equatable, MLSCodable {
    case leaf(LeafNode)
    case parent(ParentNode)

    public var nodeType: NodeType {
        switch self {
        case .leaf: .leaf
        case .parent: .parent
        }
    }

    public init(from reader: inout TLSReader) throws {
        switch try reader.readEnum(NodeType.self) {
        case .leaf: self = .leaf(try LeafNode(from: &reader))
        case .parent: self = .parent(try ParentNode(from: &reader))
        }
    }

    public func encode(to writer: inout TLSWriter) throws {
        try nodeType.encode(to: &writer)
        switch self {
        case .leaf(let leaf): try leaf.encode(to: &writer)
        case .parent(let parent): try parent.encode(to: &writer)
        }
    }
}

/// The `ratchet_tree` extension's data (RFC 9420 section 12.4.3.3): `optional<Node>
/// ratchet_tree<V>;`, the tree's nodes in array order (section 4.1.2 and Appendix C), nil for a
/// blank node, without the blank nodes after the last non-blank one.
///
/// Decoding checks the shape only: at least one node, the last one not blank (the sender "MUST
/// NOT include blank nodes after the last non-blank node", and the receiver "MUST check that the
/// last node in ratchet_tree is non-blank"), leaves at even indices and parents at odd ones. The
/// tree's hashes, keys and signatures are checked by tree validation (section 12.4.3.1), not here.
public struct RatchetTree: Sendable, Equatable, MLSCodable {
    /// The `ExtensionType` of `ratchet_tree` (RFC 9420 section 17.3).
    public static let extensionType: UInt16 = 0x0002

    /// The nodes as sent: index i is node i.
    public let nodes: [Node?]

    /// Throws ``MLSDecodingError/invalidValue(_:)`` unless `nodes` has the shape above.
    public init(nodes: [Node?]) throws {
        try Self.checkShape(nodes)
        self.nodes = nodes
    }

    public init(from reader: inout TLSReader) throws {
        let nodes = try reader.readVector { r in try r.readOptional { try Node(from: &$0) } }
        try self.init(nodes: nodes)
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeVector { w in
            for node in nodes { try w.writeOptional(node) { try $1.encode(to: &$0) } }
        }
    }

    /// The number of leaves once the tree is extended to the right with blank nodes to a full
    /// tree (`2^(d+1) - 1` nodes): the smallest power of two whose tree has as many nodes as
    /// were sent. Nil only if the tree would be larger than node indices allow.
    public var size: TreeSize? {
        // 2L - 1 >= nodes.count, so L >= (nodes.count + 1) / 2, rounded up.
        let leavesSent = UInt32((nodes.count + 2) / 2)
        var leaves: UInt32 = 1
        while leaves < leavesSent { leaves <<= 1 }
        return TreeSize(leafCount: leaves)
    }

    static func checkShape(_ nodes: [Node?]) throws {
        guard let last = nodes.last else { throw MLSDecodingError.invalidValue("ratchet_tree is empty") }
        guard last != nil else { throw MLSDecodingError.invalidValue("ratchet_tree ends with a blank node") }
        for (index, node) in nodes.enumerated() {
            guard let node else { continue }
            let expected: NodeType = index % 2 == 0 ? .leaf : .parent
            guard node.nodeType == expected else {
                throw MLSDecodingError.invalidValue("ratchet_tree node \(index) is not a \(expected) node")
            }
        }
    }
}
