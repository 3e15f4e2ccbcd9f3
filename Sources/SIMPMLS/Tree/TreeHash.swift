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
        if let hash = hashCache.hash(x) { return hash }
        guard let left = TreeMath.left(x), let right = TreeMath.right(x) else {
            return try leafTreeHash(x, leaf: x.leafIndex.flatMap { leaf($0) })
        }
        return try parentTreeHash(parent(x), left: try treeHash(of: left), right: try treeHash(of: right))
    }

    /// The tree hash of every node, in node index order.
    public func treeHashes() throws -> [[UInt8]] {
        var tree = self
        try tree.updateTreeHashes()
        return try (0..<tree.nodes.count).map { try tree.treeHash(of: NodeIndex(UInt32($0))) }
    }

    /// Computes the stale tree hashes (those of the nodes changed since the last call and of
    /// their ancestors), bottom up.
    mutating func updateTreeHashes() throws {
        try updateTreeHash(size.root)
    }

    private mutating func updateTreeHash(_ x: NodeIndex) throws {
        guard !hashCache.isFresh(x) else { return }
        let hash: [UInt8]
        if let left = TreeMath.left(x), let right = TreeMath.right(x) {
            try updateTreeHash(left)
            try updateTreeHash(right)
            hash = try parentTreeHash(parent(x), left: try treeHash(of: left), right: try treeHash(of: right))
        } else {
            hash = try leafTreeHash(x, leaf: x.leafIndex.flatMap { leaf($0) })
        }
        hashCache.set(x, hash)
    }

    /// The tree hash of `x` in the tree with the leaves of `excluded` blanked and removed from
    /// every `unmerged_leaves`: the "original sibling tree hash" of section 7.9 when `excluded`
    /// is a parent's unmerged leaves. A subtree without excluded leaves has its usual hash.
    func treeHash(of x: NodeIndex, excluding excluded: Set<UInt32>) throws -> [UInt8] {
        if excluded.isEmpty || !excluded.contains(where: { LeafIndex($0).nodeIndex.map { TreeMath.isInSubtree($0, of: x) } ?? false }) {
            return try treeHash(of: x)
        }
        guard let left = TreeMath.left(x), let right = TreeMath.right(x) else {
            let leaf = x.leafIndex.flatMap { excluded.contains($0.value) ? nil : self.leaf($0) }
            return try leafTreeHash(x, leaf: leaf)
        }
        var parent = parent(x)
        parent?.unmergedLeaves.removeAll { excluded.contains($0) }
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
