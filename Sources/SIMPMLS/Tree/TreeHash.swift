/// Tree hashes (RFC 9420 section 7.8):
///
///     struct {
///         NodeType node_type;
///         select (TreeHashInput.node_type) {
///             case leaf:   LeafNodeHashInput leaf_node;
///             case parent: ParentNodeHashInput parent_node;
///         };
///     } TreeHashInput;
///
///     struct { uint32 leaf_index; optional<LeafNode> leaf_node; } LeafNodeHashInput;
///     struct { optional<ParentNode> parent_node; opaque left_hash<V>; opaque right_hash<V>; } ParentNodeHashInput;
extension PublicRatchetTree {
    /// The tree hash of the whole tree: its root's. This is the GroupContext's `tree_hash`.
    public func treeHash() throws -> [UInt8] {
        try treeHash(of: size.root)
    }

    /// The tree hash of the subtree under `x`.
    public func treeHash(of x: NodeIndex) throws -> [UInt8] {
        try treeHash(of: x, excluding: [])
    }

    /// The tree hash of every node, in node index order.
    public func treeHashes() throws -> [[UInt8]] {
        var hashes = [[UInt8]](repeating: [], count: nodes.count)
        _ = try fillTreeHashes(size.root, into: &hashes)
        return hashes
    }

    private func fillTreeHashes(_ x: NodeIndex, into hashes: inout [[UInt8]]) throws -> [UInt8] {
        let hash: [UInt8]
        if let left = TreeMath.left(x), let right = TreeMath.right(x) {
            let l = try fillTreeHashes(left, into: &hashes)
            let r = try fillTreeHashes(right, into: &hashes)
            hash = try parentTreeHash(parent(x), left: l, right: r)
        } else {
            hash = try leafTreeHash(x, leaf: x.leafIndex.flatMap { leaf($0) })
        }
        hashes[Int(x.value)] = hash
        return hash
    }

    /// The tree hash of `x` in the tree with the leaves of `excluded` blanked and removed from
    /// every `unmerged_leaves`: the "original sibling tree hash" of section 7.9 when `excluded`
    /// is a parent's unmerged leaves.
    func treeHash(of x: NodeIndex, excluding excluded: Set<UInt32>) throws -> [UInt8] {
        guard let left = TreeMath.left(x), let right = TreeMath.right(x) else {
            let leaf = x.leafIndex.flatMap { excluded.contains($0.value) ? nil : self.leaf($0) }
            return try leafTreeHash(x, leaf: leaf)
        }
        var parent = parent(x)
        if !excluded.isEmpty { parent?.unmergedLeaves.removeAll { excluded.contains($0) } }
        return try parentTreeHash(
            parent, left: try treeHash(of: left, excluding: excluded), right: try treeHash(of: right, excluding: excluded))
    }

    private func leafTreeHash(_ x: NodeIndex, leaf: LeafNode?) throws -> [UInt8] {
        var w = TLSWriter()
        try NodeType.leaf.encode(to: &w)
        w.writeUInt32(x.value / 2)
        try w.writeOptional(leaf) { try $1.encode(to: &$0) }
        return suite.hash(w.bytes)
    }

    private func parentTreeHash(_ parent: ParentNode?, left: [UInt8], right: [UInt8]) throws -> [UInt8] {
        var w = TLSWriter()
        try NodeType.parent.encode(to: &w)
        try w.writeOptional(parent) { try $1.encode(to: &$0) }
        try w.writeOpaque(left)
        try w.writeOpaque(right)
        return suite.hash(w.bytes)
    }
}
