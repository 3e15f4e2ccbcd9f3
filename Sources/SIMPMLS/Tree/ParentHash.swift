/// Parent hashes (RFC 9420 section 7.9):
///
///     struct {
///         HPKEPublicKey encryption_key;
///         opaque parent_hash<V>;
///         opaque original_sibling_tree_hash<V>;
///     } ParentHashInput;
extension PublicRatchetTree {
    /// The parent hash of `parent` with copath child of tree hash `originalSiblingTreeHash`.
    func parentHash(_ parent: ParentNode, originalSiblingTreeHash: [UInt8]) throws -> [UInt8] {
        var w = TLSWriter()
        try parent.encryptionKey.encode(to: &w)
        try w.writeOpaque(parent.parentHash)
        try w.writeOpaque(originalSiblingTreeHash)
        return suite.hash(w.bytes)
    }

    /// Sets the `parent_hash` of each node of `path` (a leaf's filtered direct path, its nodes
    /// just set by an UpdatePath, so without unmerged leaves), from the root down: the root's is
    /// empty, each other's is the parent hash of the next node up (section 7.9). Returns the
    /// parent hash of the first node, the leaf's `parent_hash` (empty if `path` is).
    mutating func setParentHashes(along path: [PathStep]) throws -> [UInt8] {
        var above: [UInt8] = []
        for step in path.reversed() {
            guard var parent = parent(step.node) else { throw MLSTreeError.parentHashInvalid(node: step.node.value) }
            parent.parentHash = above
            set(step.node, .parent(parent))
            above = try parentHash(parent, originalSiblingTreeHash: try treeHash(of: step.copathChild))
        }
        return above
    }

    /// The `parent_hash` a node carries: a parent's, or a leaf's of source `commit`; nil for
    /// other leaves and blank nodes.
    func parentHashField(_ x: NodeIndex) -> [UInt8]? {
        switch node(x) {
        case .parent(let parent): parent.parentHash
        case .leaf(let leaf): if case .commit(let hash) = leaf.sourceFields { hash } else { nil }
        case nil: nil
        }
    }

    /// Checks that every non-blank parent node is parent-hash valid, "top down" (section
    /// 7.9.2): exactly one descendant D links to it, that is, for C its child above D and S the
    /// other child, D's `parent_hash` is the parent hash of P with S's original tree hash, D is
    /// in C's resolution, and P's unmerged leaves under C are C's resolution without D. Since
    /// every link ends at a non-blank parent that is itself checked, or at a leaf, each parent
    /// chains back to a leaf.
    public func verifyParentHashes() throws {
        for i in stride(from: 1, to: nodes.count, by: 2) {
            let p = NodeIndex(UInt32(i))
            guard let parent = parent(p), let left = TreeMath.left(p), let right = TreeMath.right(p) else { continue }
            let links = try linkCount(p, parent, child: left, sibling: right) + linkCount(p, parent, child: right, sibling: left)
            guard links == 1 else { throw MLSTreeError.parentHashInvalid(node: p.value) }
        }
    }

    /// How many nodes of `child`'s resolution link to `parent` (at `p`) across `child`.
    private func linkCount(_ p: NodeIndex, _ parent: ParentNode, child: NodeIndex, sibling: NodeIndex) throws -> Int {
        let unmerged = Set(parent.unmergedLeaves)
        let expected = try parentHash(parent, originalSiblingTreeHash: try treeHash(of: sibling, excluding: unmerged))
        let resolution = resolution(of: child)
        let unmergedUnderChild = Set(parent.unmergedLeaves.compactMap { LeafIndex($0).nodeIndex }
            .filter { TreeMath.isInSubtree($0, of: child) })
        return resolution.filter { d in
            guard parentHashField(d) == expected else { return false }
            return Set(resolution.filter { $0 != d }) == unmergedUnderChild
        }.count
    }
}
