/// The path secret chain of RFC 9420 section 7.4:
///
///     path_secret[n] = DeriveSecret(path_secret[n-1], "path")
///     node_secret[n] = DeriveSecret(path_secret[n], "node")
///     node_priv[n], node_pub[n] = KEM.DeriveKeyPair(node_secret[n])
extension MLSCipherSuite {
    /// `DeriveSecret(path_secret, "path")`: the next node's path secret, or after the root's,
    /// the `commit_secret` (section 8).
    public func nextPathSecret(_ pathSecret: SecretBytes) throws -> SecretBytes {
        SecretBytes(try deriveSecret(secret: pathSecret.bytes, label: Array("path".utf8)))
    }

    /// `KEM.DeriveKeyPair(DeriveSecret(path_secret, "node"))`: the key pair of the node whose
    /// path secret this is.
    public func nodeKeyPair(pathSecret: SecretBytes) throws -> HPKEPrivateKey {
        try deriveHPKEKeyPair(ikm: try deriveSecret(secret: pathSecret.bytes, label: Array("node".utf8)))
    }
}

/// A member's private part of the ratchet tree (RFC 9420 section 4.2, 7.4): the HPKE private
/// keys of its leaf and of the nodes of its direct path it knows. Path and node secrets are not
/// kept: each is turned into its key pair and dropped (section 7.5, "delete outdated key
/// material"). It never prints a key: its description names the nodes only.
public struct TreeKEMPrivateKeys: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The member's leaf.
    public let leaf: LeafIndex
    private var keys: [NodeIndex: HPKEPrivateKey]

    /// The state of a member that knows only its leaf's private key (a joiner before its
    /// Welcome's path secret, or a member whose direct path is blank).
    public init(leaf: LeafIndex, encryptionKey: HPKEPrivateKey) {
        self.leaf = leaf
        keys = leaf.nodeIndex.map { [$0: encryptionKey] } ?? [:]
    }

    /// The private key of `node`, if the member knows it.
    public func privateKey(for node: NodeIndex) -> HPKEPrivateKey? { keys[node] }

    /// The nodes whose private keys the member knows, in index order.
    public var nodes: [NodeIndex] { keys.keys.sorted() }

    /// Sets the key pair of `node` from its path secret. Returns the next path secret,
    /// `DeriveSecret(path_secret, "path")`.
    @discardableResult
    public mutating func setPathSecret(_ pathSecret: SecretBytes, at node: NodeIndex, suite: MLSCipherSuite) throws -> SecretBytes {
        try setPathSecret(pathSecret, along: [node], suite: suite)
    }

    /// Sets the key pairs of `path`'s nodes from `pathSecret` (the first's) and the secrets
    /// derived from it. Returns the secret after the last node's.
    mutating func setPathSecret(_ pathSecret: SecretBytes, along path: [NodeIndex], suite: MLSCipherSuite) throws -> SecretBytes {
        var secret = pathSecret
        for node in path {
            keys[node] = try suite.nodeKeyPair(pathSecret: secret)
            secret = try suite.nextPathSecret(secret)
        }
        return secret
    }

    /// Drops the keys of `nodes` (nodes an UpdatePath blanked or replaced, section 7.5).
    mutating func forget(_ nodes: [NodeIndex]) {
        for node in nodes { keys[node] = nil }
    }

    /// Sets one node's key.
    mutating func set(_ key: HPKEPrivateKey, for node: NodeIndex) { keys[node] = key }

    /// Checks that this state fits `tree`: every node with a key is the member's leaf or on its
    /// direct path, is not blank, and holds the public key of the private key (the test vectors'
    /// "consistent with the ratchet tree").
    public func checkConsistent(with tree: PublicRatchetTree) throws {
        let path = Set(try tree.directPath(leaf))
        let leafNode = try tree.nodeIndex(leaf)
        for (node, key) in keys {
            guard node == leafNode || path.contains(node), let publicKey = tree.encryptionKey(node) else {
                throw MLSTreeError.privateStateInconsistent(node: node.value)
            }
            guard publicKey.bytes == key.publicKey.rawRepresentation else { throw MLSTreeError.publicKeyMismatch(node: node.value) }
        }
    }

    public var description: String {
        "TreeKEMPrivateKeys(\(leaf), keys for nodes \(nodes.map(\.value)), redacted)"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:], displayStyle: .struct) }
}

extension PublicRatchetTree {
    /// The `encryption_key` of the leaf or parent node at `x`; nil if it is blank.
    public func encryptionKey(_ x: NodeIndex) -> HPKEPublicKeyIn? {
        switch node(x) {
        case .leaf(let leaf): leaf.encryptionKey
        case .parent(let parent): parent.encryptionKey
        case nil: nil
        }
    }
}

extension TreeKEMPrivateKeys {
    /// The keys, secrets included, for ``MLSGroup``'s saved state: the leaf, then
    /// `(uint32 node, opaque private_key)` pairs in node order.
    func encodeState(to writer: inout TLSWriter) throws {
        writer.writeUInt32(leaf.value)
        try writer.writeVector { w in
            for node in nodes {
                guard let key = keys[node] else { continue }
                w.writeUInt32(node.value)
                try w.writeOpaque(Array(key.key.rawRepresentation))
            }
        }
    }

    /// Keys from ``encodeState(to:)``'s bytes (their fit to the tree is checked by the caller,
    /// ``checkConsistent(with:)``).
    init(stateFrom reader: inout TLSReader) throws {
        leaf = LeafIndex(try reader.readUInt32())
        let pairs = try reader.readVector { r in (NodeIndex(try r.readUInt32()), try HPKEPrivateKey(rawRepresentation: try r.readOpaque())) }
        keys = Dictionary(pairs, uniquingKeysWith: { a, _ in a })
    }
}
