/// Array-based tree arithmetic of RFC 9420 Appendix C (and section 4.1.1's index conventions).
///
/// A tree of `n` leaves is stored as an array of `2n - 1` nodes: leaves at even node indices,
/// parents at odd ones; leaf `i` is node `2i`. RFC 9420 trees always have a power-of-two number
/// of leaves (section 7.7: a tree grows by doubling), which ``TreeSize`` enforces.

/// A leaf's position among the leaves (RFC 9420 section 4.1.1, `LeafIndex`).
public struct LeafIndex: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let value: UInt32
    public init(_ value: UInt32) { self.value = value }
    /// The node index of this leaf: `2 * i` (RFC 9420 Appendix C). Nil if it does not fit in 32 bits.
    public var nodeIndex: NodeIndex? {
        value <= UInt32.max / 2 ? NodeIndex(value * 2) : nil
    }
    public static func < (a: Self, b: Self) -> Bool { a.value < b.value }
    public var description: String { "leaf \(value)" }
}

/// A node's position in the tree's array (RFC 9420 Appendix C).
public struct NodeIndex: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let value: UInt32
    public init(_ value: UInt32) { self.value = value }
    /// Leaves are at even node indices.
    public var isLeaf: Bool { value & 1 == 0 }
    /// The leaf at this node, if it is one.
    public var leafIndex: LeafIndex? { isLeaf ? LeafIndex(value / 2) : nil }
    public static func < (a: Self, b: Self) -> Bool { a.value < b.value }
    public var description: String { "node \(value)" }
}

/// The size of a tree: its number of leaves, a power of two between 1 and 2^31.
public struct TreeSize: Hashable, Sendable {
    public let leafCount: UInt32

    /// Nil unless `leafCount` is a power of two no larger than 2^31 (so node indices fit in 32 bits).
    public init?(leafCount: UInt32) {
        guard leafCount > 0, leafCount & (leafCount - 1) == 0, leafCount <= 1 << 31 else { return nil }
        self.leafCount = leafCount
    }

    /// `node_width(n)`: the number of nodes, `2(n - 1) + 1`.
    public var nodeCount: UInt32 { 2 * (leafCount - 1) + 1 }

    /// Whether `x` is a node of this tree.
    public func contains(_ x: NodeIndex) -> Bool { x.value < nodeCount }

    /// `root(n)`: `(1 << log2(width)) - 1`. For a power-of-two leaf count that is `n - 1`.
    public var root: NodeIndex {
        let log2Width = UInt32(31 - nodeCount.leadingZeroBitCount)
        return NodeIndex((UInt32(1) << log2Width) - 1)
    }
}

/// RFC 9420 Appendix C's functions. Each returns nil where the RFC's version is undefined or
/// raises: a leaf has no children, the root has no parent or sibling, a node outside the tree
/// has none of these.
public enum TreeMath {
    /// `level(x)`: the number of trailing one bits; leaves are level 0.
    public static func level(_ x: NodeIndex) -> Int {
        (~x.value).trailingZeroBitCount
    }

    /// `left(x)`: `x ^ (1 << (k - 1))` for a parent at level `k`.
    public static func left(_ x: NodeIndex) -> NodeIndex? {
        let k = level(x)
        guard k > 0 else { return nil }
        return NodeIndex(x.value ^ (UInt32(1) << (k - 1)))
    }

    /// `right(x)`: `x ^ (3 << (k - 1))` for a parent at level `k`.
    public static func right(_ x: NodeIndex) -> NodeIndex? {
        let k = level(x)
        guard k > 0 else { return nil }
        return NodeIndex(x.value ^ (UInt32(3) << (k - 1)))
    }

    /// `parent(x, n)`: the node one level up whose subtree holds `x`; nil for the root.
    public static func parent(_ x: NodeIndex, in size: TreeSize) -> NodeIndex? {
        guard size.contains(x), x != size.root else { return nil }
        let k = level(x)
        // Below the root, level k <= 30, so the shifts stay inside 32 bits; compute in 64 to be plain about it.
        let v = UInt64(x.value)
        let b = (v >> (k + 1)) & 1
        let p = (v | (UInt64(1) << k)) ^ (b << (k + 1))
        guard p < UInt64(size.nodeCount) else { return nil }
        return NodeIndex(UInt32(p))
    }

    /// `sibling(x, n)`: the other child of `x`'s parent; nil for the root.
    public static func sibling(_ x: NodeIndex, in size: TreeSize) -> NodeIndex? {
        guard let p = parent(x, in: size) else { return nil }
        return x < p ? right(p) : left(p)
    }

    /// `direct_path(x, n)`: `x`'s ancestors from its parent up to the root, inclusive; empty for
    /// the root (RFC 9420 section 4.1.2). Nil if `x` is not in the tree.
    public static func directPath(_ x: NodeIndex, in size: TreeSize) -> [NodeIndex]? {
        guard size.contains(x) else { return nil }
        var path: [NodeIndex] = []
        var node = x
        while let p = parent(node, in: size) {
            path.append(p)
            node = p
        }
        return path
    }

    /// `copath(x, n)`: the siblings of `x` and of each node of its direct path but the root
    /// (RFC 9420 section 4.1.2). Nil if `x` is not in the tree.
    public static func copath(_ x: NodeIndex, in size: TreeSize) -> [NodeIndex]? {
        guard let path = directPath(x, in: size) else { return nil }
        guard !path.isEmpty else { return [] }
        let nodes = [x] + path.dropLast()
        return nodes.compactMap { sibling($0, in: size) }
    }

    /// The direct path of a leaf.
    public static func directPath(_ leaf: LeafIndex, in size: TreeSize) -> [NodeIndex]? {
        guard let x = leaf.nodeIndex else { return nil }
        return directPath(x, in: size)
    }

    /// The copath of a leaf.
    public static func copath(_ leaf: LeafIndex, in size: TreeSize) -> [NodeIndex]? {
        guard let x = leaf.nodeIndex else { return nil }
        return copath(x, in: size)
    }
}
