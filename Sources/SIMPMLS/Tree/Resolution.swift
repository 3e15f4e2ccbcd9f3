extension TreeMath {
    /// Whether `x` is `ancestor` or in its subtree: a node of level `k` spans the node indices
    /// within `2^k - 1` of it (Appendix C).
    public static func isInSubtree(_ x: NodeIndex, of ancestor: NodeIndex) -> Bool {
        let span = (UInt64(1) << level(ancestor)) - 1
        let a = UInt64(ancestor.value), v = UInt64(x.value)
        return v + span >= a && v <= a + span
    }
}

extension PublicRatchetTree {
    /// The resolution of `x` (section 4.1.1): a non-blank node followed by its unmerged leaves;
    /// nothing for a blank leaf; for a blank parent, its left child's resolution then its right
    /// child's. Leaves in `excluding` (members added by the commit being made, section 7.6) are
    /// left out.
    public func resolution(of x: NodeIndex, excluding: Set<LeafIndex> = []) -> [NodeIndex] {
        if let leaf = x.leafIndex {
            return self.leaf(leaf) != nil && !excluding.contains(leaf) ? [x] : []
        }
        switch node(x) {
        case .parent(let parent):
            let unmerged = parent.unmergedLeaves.map(LeafIndex.init).filter { !excluding.contains($0) }
            return [x] + unmerged.compactMap(\.nodeIndex)
        case .leaf, nil:
            guard let left = TreeMath.left(x), let right = TreeMath.right(x) else { return [] }
            return resolution(of: left, excluding: excluding) + resolution(of: right, excluding: excluding)
        }
    }

    /// One step of a leaf's filtered direct path: a node of its direct path and that node's
    /// child on the leaf's copath.
    public struct PathStep: Sendable, Equatable {
        public let node: NodeIndex
        public let copathChild: NodeIndex
    }

    /// The leaf's filtered direct path (section 4.1.2): its direct path without the nodes whose
    /// child on the leaf's copath has an empty resolution (unmerged leaves counting), each with
    /// that child.
    public func filteredDirectPath(_ leaf: LeafIndex) throws -> [PathStep] {
        let x = try nodeIndex(leaf)
        let path = try directPath(leaf)
        guard let copath = TreeMath.copath(x, in: size), copath.count == path.count else { throw MLSTreeError.noSuchLeaf(leaf.value) }
        return zip(path, copath)
            .filter { !resolution(of: $0.1).isEmpty }
            .map { PathStep(node: $0.0, copathChild: $0.1) }
    }
}
