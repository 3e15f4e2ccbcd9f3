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
public struct SecretTree: Sendable, CustomStringConvertible, CustomReflectable {
    public let suite: MLSCipherSuite
    public let size: TreeSize
    public let window: RatchetWindow
    /// Node secrets not yet split, by node index: the root at first.
    var nodeSecrets: [UInt32: SecretBytes]
    /// The ratchets of leaves whose secret has been used, by leaf index.
    var ratchets: [UInt32: LeafRatchets]

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
        nodeSecrets = [size.root.value: encryptionSecret]
        ratchets = [:]
    }

    /// The key of the next generation of `leaf`'s ratchet, for sending as that leaf.
    public mutating func nextKey(leaf: LeafIndex, type: RatchetType) throws -> RatchetKey {
        var t = self
        let key = try t.withRatchet(leaf, type) { try $0.next() }
        self = t
        return key
    }

    /// The key of `generation` of `leaf`'s ratchet, for a message received from that leaf. See
    /// ``HashRatchet/key(for:)`` for the window and what is refused.
    public mutating func key(leaf: LeafIndex, type: RatchetType, generation: UInt32) throws -> RatchetKey {
        var t = self
        let key = try t.withRatchet(leaf, type) { try $0.key(for: generation) }
        self = t
        return key
    }

    /// `leaf`'s ratchet, if it has been derived (read-only: to inspect its generation and window).
    public func ratchet(leaf: LeafIndex, type: RatchetType) -> HashRatchet? {
        guard let r = ratchets[leaf.value] else { return nil }
        return type == .handshake ? r.handshake : r.application
    }

    /// The nodes whose secrets the tree still holds, ascending (not the secrets).
    public var retainedNodeSecrets: [NodeIndex] { nodeSecrets.keys.sorted().map(NodeIndex.init) }

    mutating func withRatchet<T>(_ leaf: LeafIndex, _ type: RatchetType, _ body: (inout HashRatchet) throws -> T) throws -> T {
        var r = try leafRatchets(leaf)
        let result: T
        switch type {
        case .handshake: result = try body(&r.handshake)
        case .application: result = try body(&r.application)
        }
        ratchets[leaf.value] = r
        return result
    }

    /// The ratchets of `leaf`, deriving the secrets on its path from the nearest held ancestor.
    mutating func leafRatchets(_ leaf: LeafIndex) throws -> LeafRatchets {
        if let r = ratchets[leaf.value] { return r }
        guard leaf.value < size.leafCount, let leafNode = leaf.nodeIndex, let directPath = TreeMath.directPath(leaf, in: size) else {
            throw SecretTreeError.leafOutOfRange(leaf, leafCount: size.leafCount)
        }
        // From the leaf up to the root: the nearest node whose secret is held.
        let upward = [leafNode] + directPath
        guard let start = upward.firstIndex(where: { nodeSecrets[$0.value] != nil }) else {
            throw SecretTreeError.secretUnavailable(leafNode)
        }
        // Down from it to the leaf, splitting each node and deleting its secret.
        var i = start
        while i > 0 {
            let node = upward[i]
            let towards = upward[i - 1]
            guard let secret = nodeSecrets.removeValue(forKey: node.value),
                  let left = TreeMath.left(node), let right = TreeMath.right(node)
            else { throw SecretTreeError.secretUnavailable(node) }
            nodeSecrets[left.value] = SecretBytes(try expand(secret, "tree", Array("left".utf8)))
            nodeSecrets[right.value] = SecretBytes(try expand(secret, "tree", Array("right".utf8)))
            guard towards == left || towards == right else { throw SecretTreeError.secretUnavailable(towards) }
            i -= 1
        }
        guard let leafSecret = nodeSecrets.removeValue(forKey: leafNode.value) else {
            throw SecretTreeError.secretUnavailable(leafNode)
        }
        return LeafRatchets(
            handshake: HashRatchet(suite: suite, secret: SecretBytes(try expand(leafSecret, "handshake", [])), window: window),
            application: HashRatchet(suite: suite, secret: SecretBytes(try expand(leafSecret, "application", [])), window: window))
    }

    func expand(_ secret: SecretBytes, _ label: String, _ context: [UInt8]) throws -> [UInt8] {
        try suite.expandWithLabel(secret: secret.bytes, label: Array(label.utf8), context: context, length: suite.hashLength)
    }

    public var description: String {
        "SecretTree(\(size.leafCount) leaves, \(nodeSecrets.count) node secrets, \(ratchets.count) leaves' ratchets, redacted)"
    }
    public var customMirror: Mirror {
        Mirror(self, children: ["leafCount": size.leafCount, "retainedNodeSecrets": retainedNodeSecrets.map(\.value)], displayStyle: .struct)
    }
}

extension SecretTree {
    /// The tree's whole state, secrets included, for ``MLSGroup``'s saved state: the window,
    /// the node secrets not yet split and the leaves' ratchets, each in index order.
    func encodeState(to writer: inout TLSWriter) throws {
        writer.writeUInt32(window.maximumForwardDistance)
        writer.writeUInt32(UInt32(clamping: window.maximumSkippedKeys))
        try writer.writeVector { w in
            for node in nodeSecrets.keys.sorted() {
                guard let secret = nodeSecrets[node] else { continue }
                w.writeUInt32(node)
                try w.writeOpaque(secret.bytes)
            }
        }
        try writer.writeVector { w in
            for leaf in ratchets.keys.sorted() {
                guard let r = ratchets[leaf] else { continue }
                w.writeUInt32(leaf)
                try r.handshake.encodeState(to: &w)
                try r.application.encodeState(to: &w)
            }
        }
    }

    /// A tree of `size` leaves from ``encodeState(to:)``'s bytes; indices and lengths are checked.
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
        nodeSecrets = Dictionary(secrets, uniquingKeysWith: { a, _ in a })
        ratchets = Dictionary(leaves, uniquingKeysWith: { a, _ in a })
    }
}
