/// The public part of a group's ratchet tree (RFC 9420 sections 4 and 7): every node's public
/// content, blanks included, for a tree of a power-of-two number of leaves.
///
/// It is a value: changes (``add(_:)``, ``update(_:at:)``, ``remove(_:)``, merging an
/// UpdatePath) make a new tree. Built from the `ratchet_tree` extension's data
/// (``init(suite:ratchetTree:)``, which checks nothing but the shape: a joiner then calls
/// ``validate(groupID:expectedTreeHash:)``) and encoded back by ``ratchetTree()``.
///
/// It keeps every node's tree hash (``TreeHashCache``): a change recomputes the hashes of the
/// nodes it touched and of their ancestors, not the whole tree's. Two trees are equal when their
/// suites, sizes and nodes are.
public struct PublicRatchetTree: Sendable, Equatable {
    public let suite: MLSCipherSuite
    /// The number of leaves (section 7.7: always a power of two).
    public private(set) var size: TreeSize
    /// `size.nodeCount` nodes in array order (Appendix C); nil is a blank node.
    public private(set) var nodes: [Node?]
    /// The tree hash of every node, fresh after every public method (stale only inside one).
    var hashCache: TreeHashCache

    /// The tree of the `ratchet_tree` extension (section 12.4.3.3), extended to the right with
    /// blank nodes to a full tree.
    public init(suite: MLSCipherSuite, ratchetTree: RatchetTree) throws {
        guard let size = ratchetTree.size else { throw MLSTreeError.tooLarge }
        self.suite = suite
        self.size = size
        nodes = ratchetTree.nodes + Array(repeating: nil, count: Int(size.nodeCount) - ratchetTree.nodes.count)
        hashCache = TreeHashCache(length: suite.hashLength, nodeCount: nodes.count)
        try updateTreeHashes()
    }

    /// A one-member tree: the creator's leaf (section 11).
    public init(suite: MLSCipherSuite, creator: LeafNode) {
        self.suite = suite
        // A power of two.
        size = TreeSize(leafCount: 1)!
        nodes = [.leaf(creator)]
        hashCache = TreeHashCache(length: suite.hashLength, nodeCount: 1)
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.suite == b.suite && a.size == b.size && a.nodes == b.nodes
    }

    /// The `ratchet_tree` extension's data: the nodes without the blank ones after the last
    /// non-blank one (section 12.4.3.3). Throws if every node is blank.
    public func ratchetTree() throws -> RatchetTree {
        guard let last = nodes.lastIndex(where: { $0 != nil }) else {
            throw MLSDecodingError.invalidValue("ratchet tree has no non-blank node")
        }
        return try RatchetTree(nodes: Array(nodes[...last]))
    }

    // MARK: nodes

    /// The node at `x`; nil if it is blank or outside the tree.
    public func node(_ x: NodeIndex) -> Node? {
        size.contains(x) ? nodes[Int(x.value)] : nil
    }

    /// The leaf node at `leaf`; nil if it is blank or outside the tree.
    public func leaf(_ leaf: LeafIndex) -> LeafNode? {
        guard let x = leaf.nodeIndex, case .leaf(let node)? = node(x) else { return nil }
        return node
    }

    /// The parent node at `x`; nil if it is blank, a leaf or outside the tree.
    public func parent(_ x: NodeIndex) -> ParentNode? {
        guard case .parent(let node)? = node(x) else { return nil }
        return node
    }

    /// The leaf indices of the non-blank leaves, in order.
    public var memberLeaves: [LeafIndex] {
        (0..<size.leafCount).map(LeafIndex.init).filter { leaf($0) != nil }
    }

    /// The leaf at `leaf`, which must be in the tree and not blank.
    func requireLeaf(_ leaf: LeafIndex) throws -> LeafNode {
        guard leaf.value < size.leafCount else { throw MLSTreeError.noSuchLeaf(leaf.value) }
        guard let node = self.leaf(leaf) else { throw MLSTreeError.blankLeaf(leaf.value) }
        return node
    }

    /// Sets the node at `x`, which is in the tree; its tree hash and its ancestors' go stale.
    mutating func set(_ x: NodeIndex, _ node: Node?) {
        nodes[Int(x.value)] = node
        hashCache.invalidate(x, in: size)
    }

    /// The node index of a leaf of this tree.
    func nodeIndex(_ leaf: LeafIndex) throws -> NodeIndex {
        guard leaf.value < size.leafCount, let x = leaf.nodeIndex else { throw MLSTreeError.noSuchLeaf(leaf.value) }
        return x
    }

    /// The direct path of a leaf of this tree (section 4.1.2).
    func directPath(_ leaf: LeafIndex) throws -> [NodeIndex] {
        guard let path = TreeMath.directPath(try nodeIndex(leaf), in: size) else { throw MLSTreeError.noSuchLeaf(leaf.value) }
        return path
    }

    /// Blanks every node of the leaf's direct path (sections 7.5, 12.1.2, 12.1.3).
    mutating func blankDirectPath(_ leaf: LeafIndex) throws {
        for x in try directPath(leaf) { set(x, nil) }
    }

    // MARK: extension and truncation (section 7.7)

    /// Doubles the number of leaves: a new blank root whose left subtree is the tree and whose
    /// right subtree is blank. In the array, `N + 1` blank nodes are appended (Appendix C).
    mutating func extend() throws {
        guard size.leafCount <= UInt32.max / 2, let bigger = TreeSize(leafCount: size.leafCount * 2) else {
            throw MLSTreeError.tooLarge
        }
        nodes += Array(repeating: nil, count: nodes.count + 1)
        size = bigger
        hashCache.resize(to: nodes.count)
    }

    /// Halves the tree while its right subtree is all blank: the root and the right subtree are
    /// dropped, the left subtree becomes the tree (the array keeps its first `(N - 1) / 2` nodes).
    mutating func truncate() {
        while size.leafCount > 1 {
            let half = nodes.count / 2
            guard nodes[(half + 1)...].allSatisfy({ $0 == nil }) else { return }
            nodes.removeLast(nodes.count - half)
            hashCache.resize(to: half)
            // Half a power of two above 1 is a power of two.
            size = TreeSize(leafCount: size.leafCount / 2)!
        }
    }

    // MARK: proposals (section 12.1)

    /// Adds a member (section 12.1.1): at the leftmost blank leaf, or at the first new leaf of
    /// the tree extended if there is none; the leaf is added to the `unmerged_leaves` of every
    /// non-blank parent on its direct path. The leaf node is placed as given: validating it (its
    /// key package, section 10.1) is the caller's. Returns the leaf index.
    @discardableResult
    public mutating func add(_ leafNode: LeafNode) throws -> LeafIndex {
        let leaf: LeafIndex
        if let blank = (0..<size.leafCount).first(where: { self.leaf(LeafIndex($0)) == nil }) {
            leaf = LeafIndex(blank)
        } else {
            leaf = LeafIndex(size.leafCount)
            try extend()
        }
        for x in try directPath(leaf) {
            guard var parent = parent(x) else { continue }
            parent.unmergedLeaves.append(leaf.value)
            parent.unmergedLeaves.sort()
            set(x, .parent(parent))
        }
        set(try nodeIndex(leaf), .leaf(leafNode))
        try updateTreeHashes()
        return leaf
    }

    /// Applies an Update from the member at `leaf` (section 12.1.2): its leaf node is replaced
    /// and its direct path blanked. The leaf node is placed as given: validating it (source
    /// `update`, signature for the group and leaf, a new encryption key) is the caller's.
    public mutating func update(_ leafNode: LeafNode, at leaf: LeafIndex) throws {
        _ = try requireLeaf(leaf)
        try blankDirectPath(leaf)
        set(try nodeIndex(leaf), .leaf(leafNode))
        try updateTreeHashes()
    }

    /// Applies a Remove of the member at `leaf` (section 12.1.3): its leaf and direct path are
    /// blanked and the tree truncated. Throws if the leaf is blank.
    public mutating func remove(_ leaf: LeafIndex) throws {
        _ = try requireLeaf(leaf)
        try blankDirectPath(leaf)
        set(try nodeIndex(leaf), nil)
        truncate()
        try updateTreeHashes()
    }
}
