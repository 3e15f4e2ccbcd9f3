/// Which of a leaf's two ratchets (RFC 9420 section 9.1): proposals and commits use the
/// handshake ratchet, application messages the application ratchet.
public enum RatchetType: Sendable, Hashable {
    case handshake
    case application

    /// The ratchet of a message of `contentType`: application for application data, handshake
    /// for proposals and commits (RFC 9420 section 9.1).
    public init(_ contentType: ContentType) {
        switch contentType {
        case .application: self = .application
        case .proposal, .commit: self = .handshake
        }
    }
}

/// RFC 9420 section 9: the secret tree of an epoch, a value.
///
/// It has the shape of the ratchet tree; its root secret is the epoch's `encryption_secret`, and
///
///     tree_node_[left(N)]_secret  = ExpandWithLabel(tree_node_[N]_secret, "tree", "left", KDF.Nh)
///     tree_node_[right(N)]_secret = ExpandWithLabel(tree_node_[N]_secret, "tree", "right", KDF.Nh)
///     handshake_ratchet_secret_[N]_[0]   = ExpandWithLabel(tree_node_[N]_secret, "handshake", "", KDF.Nh)
///     application_ratchet_secret_[N]_[0] = ExpandWithLabel(tree_node_[N]_secret, "application", "", KDF.Nh)
///
/// for a leaf node N. Secrets are derived when a leaf's key is first asked for, and deleted as
/// section 9.2 says: a node's secret once both its children's are derived, a leaf's once its two
/// ratchets are, and each key once it is handed out (see ``HashRatchet``). A call that throws
/// leaves the tree unchanged; to delete a key only once its message has decrypted, work on a copy
/// and keep it on success.
///
/// The tree is sparse and persistent: it holds only the part derived so far (``SecretTreeNode``,
/// immutable nodes shared between copies), so a copy costs one reference and taking a key
/// rebuilds only the nodes on the path from the root to the leaf. A message's cost does not grow
/// with the number of members who have sent in the epoch.
public struct SecretTree: Sendable, CustomStringConvertible, CustomReflectable {
    public let suite: MLSCipherSuite
    public let size: TreeSize
    public let window: RatchetWindow
    /// What is held under the root: its secret at first.
    var root: SecretTreeNode

    struct LeafRatchets: Sendable {
        var handshake: HashRatchet
        var application: HashRatchet
    }

    /// The tree of an epoch with `size` leaves, from its `encryption_secret` (`KDF.Nh` bytes).
    public init(suite: MLSCipherSuite, encryptionSecret: SecretBytes, size: TreeSize, window: RatchetWindow = .default) throws {
        try KeySchedule.checkLength(encryptionSecret, "encryption_secret", suite)
        self.suite = suite
        self.size = size
        self.window = window
        root = .secret(encryptionSecret)
    }

    /// The key of the next generation of `leaf`'s ratchet, for sending as that leaf.
    public mutating func nextKey(leaf: LeafIndex, type: RatchetType) throws -> RatchetKey {
        try withRatchet(leaf, type) { try $0.next() }
    }

    /// The key of `generation` of `leaf`'s ratchet, for a message received from that leaf. See
    /// ``HashRatchet/key(for:)`` for the window and what is refused.
    public mutating func key(leaf: LeafIndex, type: RatchetType, generation: UInt32) throws -> RatchetKey {
        try withRatchet(leaf, type) { try $0.key(for: generation) }
    }

    /// `leaf`'s ratchet, if it has been derived (read-only: to inspect its generation and window).
    public func ratchet(leaf: LeafIndex, type: RatchetType) -> HashRatchet? {
        guard leaf.value < size.leafCount, let target = leaf.nodeIndex else { return nil }
        var node = root
        var x = size.root
        while x != target {
            guard case .split(let left, let right) = node, let l = TreeMath.left(x), let r = TreeMath.right(x) else { return nil }
            (node, x) = target < x ? (left, l) : (right, r)
        }
        guard case .ratchets(let ratchets) = node else { return nil }
        return type == .handshake ? ratchets.handshake : ratchets.application
    }

    /// The nodes whose secrets the tree still holds, ascending (not the secrets).
    public var retainedNodeSecrets: [NodeIndex] {
        var found: [NodeIndex] = []
        root.visit(at: size.root) { x, node in if case .secret = node { found.append(x) } }
        return found
    }

    /// Runs `body` on `leaf`'s ratchet of `type`, deriving the secrets on the path to the leaf
    /// from the nearest held ancestor, splitting and deleting each on the way; the nodes on the
    /// path are rebuilt, the rest shared. If anything throws, the tree is unchanged.
    mutating func withRatchet<T>(_ leaf: LeafIndex, _ type: RatchetType, _ body: (inout HashRatchet) throws -> T) throws -> T {
        guard leaf.value < size.leafCount, let target = leaf.nodeIndex else {
            throw SecretTreeError.leafOutOfRange(leaf, leafCount: size.leafCount)
        }
        var result: T?
        let updated = try updating(root, at: size.root, target: target) { ratchets in
            switch type {
            case .handshake: result = try body(&ratchets.handshake)
            case .application: result = try body(&ratchets.application)
            }
        }
        guard let result else { throw SecretTreeError.secretUnavailable(target) }
        root = updated
        return result
    }

    /// `node` (at `x`) with the leaf at `target` below it changed by `body`.
    private func updating(
        _ node: SecretTreeNode, at x: NodeIndex, target: NodeIndex, _ body: (inout LeafRatchets) throws -> Void
    ) throws -> SecretTreeNode {
        if x == target {
            var ratchets: LeafRatchets
            switch node {
            case .ratchets(let held): ratchets = held
            case .secret(let leafSecret):
                ratchets = LeafRatchets(
                    handshake: HashRatchet(suite: suite, secret: SecretBytes(try expand(leafSecret, "handshake", [])), window: window),
                    application: HashRatchet(suite: suite, secret: SecretBytes(try expand(leafSecret, "application", [])), window: window))
            case .split, .deleted: throw SecretTreeError.secretUnavailable(x)
            }
            try body(&ratchets)
            return .ratchets(ratchets)
        }
        guard let leftIndex = TreeMath.left(x), let rightIndex = TreeMath.right(x) else { throw SecretTreeError.secretUnavailable(target) }
        var left: SecretTreeNode, right: SecretTreeNode
        switch node {
        case .split(let l, let r): (left, right) = (l, r)
        case .secret(let secret):
            left = .secret(SecretBytes(try expand(secret, "tree", Array("left".utf8))))
            right = .secret(SecretBytes(try expand(secret, "tree", Array("right".utf8))))
        case .ratchets, .deleted: throw SecretTreeError.secretUnavailable(target)
        }
        if target < x {
            left = try updating(left, at: leftIndex, target: target, body)
        } else {
            right = try updating(right, at: rightIndex, target: target, body)
        }
        return .split(left, right)
    }

    func expand(_ secret: SecretBytes, _ label: String, _ context: [UInt8]) throws -> [UInt8] {
        try suite.expandWithLabel(secret: secret.bytes, label: Array(label.utf8), context: context, length: suite.hashLength)
    }

    /// The leaves whose ratchets are held, ascending, with them.
    var heldRatchets: [(leaf: UInt32, ratchets: LeafRatchets)] {
        var found: [(UInt32, LeafRatchets)] = []
        root.visit(at: size.root) { x, node in if case .ratchets(let r) = node { found.append((x.value / 2, r)) } }
        return found
    }

    public var description: String {
        "SecretTree(\(size.leafCount) leaves, \(retainedNodeSecrets.count) node secrets, \(heldRatchets.count) leaves' ratchets, redacted)"
    }
    public var customMirror: Mirror {
        Mirror(self, children: ["leafCount": size.leafCount, "retainedNodeSecrets": retainedNodeSecrets.map(\.value)], displayStyle: .struct)
    }
}

/// What the secret tree holds at one node (RFC 9420 section 9.2): immutable, shared by copies of
/// the tree. Below a `secret` nothing is derived yet; a `split` node's own secret is deleted and
/// both children are held; a leaf's secret gives way to its `ratchets`.
indirect enum SecretTreeNode: Sendable {
    /// The node's secret, not split yet.
    case secret(SecretBytes)
    /// Both children derived, the node's secret deleted.
    case split(SecretTreeNode, SecretTreeNode)
    /// A leaf's ratchets, its secret deleted.
    case ratchets(SecretTree.LeafRatchets)
    /// Nothing held (a restored state that held nothing under this node).
    case deleted

    /// Calls `body` with each node held, in node index order, this one being at `x`.
    func visit(at x: NodeIndex, _ body: (NodeIndex, SecretTreeNode) -> Void) {
        if case .split(let left, let right) = self, let l = TreeMath.left(x), let r = TreeMath.right(x) {
            left.visit(at: l, body)
            body(x, self)
            right.visit(at: r, body)
        } else {
            body(x, self)
        }
    }
}

extension SecretTree {
    /// The tree's whole state, secrets included, for ``MLSGroup``'s saved state: the window,
    /// the node secrets not yet split and the leaves' ratchets, each in index order.
    func encodeState(to writer: inout TLSWriter) throws {
        writer.writeUInt32(window.maximumForwardDistance)
        writer.writeUInt32(UInt32(clamping: window.maximumSkippedKeys))
        var secrets: [(UInt32, SecretBytes)] = []
        root.visit(at: size.root) { x, node in if case .secret(let secret) = node { secrets.append((x.value, secret)) } }
        try writer.writeVector { w in
            for (node, secret) in secrets {
                w.writeUInt32(node)
                try w.writeOpaque(secret.bytes)
            }
        }
        try writer.writeVector { w in
            for (leaf, r) in heldRatchets {
                w.writeUInt32(leaf)
                try r.handshake.encodeState(to: &w)
                try r.application.encodeState(to: &w)
            }
        }
    }

    /// A tree of `size` leaves from ``encodeState(to:)``'s bytes; indices and lengths are checked,
    /// and that no node is held below another (a secret or ratchets under a held secret).
    init(suite: MLSCipherSuite, size: TreeSize, stateFrom reader: inout TLSReader) throws {
        self.suite = suite
        self.size = size
        window = RatchetWindow(maximumForwardDistance: try reader.readUInt32(), maximumSkippedKeys: Int(try reader.readUInt32()))
        let secrets = try reader.readVector { r in (try r.readUInt32(), SecretBytes(try r.readOpaque())) }
        let window = self.window
        let leaves = try reader.readVector { r in
            (try r.readUInt32(), LeafRatchets(
                handshake: try HashRatchet(suite: suite, window: window, stateFrom: &r),
                application: try HashRatchet(suite: suite, window: window, stateFrom: &r)))
        }
        guard secrets.allSatisfy({ size.contains(NodeIndex($0.0)) && $0.1.count == suite.hashLength }),
              leaves.allSatisfy({ $0.0 < size.leafCount })
        else { throw MLSDecodingError.invalidValue("secret tree state") }
        var held: [UInt32: SecretTreeNode] = [:]
        for (node, secret) in secrets where held[node] == nil { held[node] = .secret(secret) }
        for (leaf, ratchets) in leaves {
            guard held[leaf * 2] == nil else { throw MLSDecodingError.invalidValue("secret tree state") }
            held[leaf * 2] = .ratchets(ratchets)
        }
        let sorted = held.keys.sorted().map { (NodeIndex($0), held[$0]!) }
        root = try Self.build(sorted[...], at: size.root)
    }

    /// The node at `x` holding `held` (the held nodes of `x`'s subtree, in index order).
    private static func build(_ held: ArraySlice<(NodeIndex, SecretTreeNode)>, at x: NodeIndex) throws -> SecretTreeNode {
        guard !held.isEmpty else { return .deleted }
        guard let left = TreeMath.left(x), let right = TreeMath.right(x) else {
            guard held.count == 1, let only = held.first, only.0 == x else { throw MLSDecodingError.invalidValue("secret tree state") }
            return only.1
        }
        if let at = held.first(where: { $0.0 == x }) {
            guard held.count == 1 else { throw MLSDecodingError.invalidValue("secret tree state") }
            return at.1
        }
        let split = held.firstIndex { $0.0 > x } ?? held.endIndex
        return .split(try build(held[..<split], at: left), try build(held[split...], at: right))
    }
}
