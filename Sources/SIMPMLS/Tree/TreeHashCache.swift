/// The tree hash of every node's subtree (RFC 9420 section 7.8), kept with a
/// ``PublicRatchetTree`` so that a commit hashes only what it changed: a change to a node makes
/// its hash and its ancestors' stale, and only stale hashes are computed again.
///
/// The hashes sit in one flat byte array (`length` bytes per node, in node index order), so a
/// copy of the tree copies them with one `memcpy` rather than one reference per node. A stale
/// node's ancestors are always stale, so a fresh node's whole subtree is fresh.
struct TreeHashCache: Sendable {
    /// `KDF.Nh`: the length of every hash.
    let length: Int
    private var bytes: [UInt8]
    private var fresh: [Bool]

    /// A cache of `nodeCount` stale hashes.
    init(length: Int, nodeCount: Int) {
        self.length = length
        bytes = [UInt8](repeating: 0, count: length * nodeCount)
        fresh = [Bool](repeating: false, count: nodeCount)
    }

    var nodeCount: Int { fresh.count }

    /// The hash of `x`'s subtree, if it is fresh.
    func hash(_ x: NodeIndex) -> [UInt8]? {
        let i = Int(x.value)
        guard i < fresh.count, fresh[i] else { return nil }
        return Array(bytes[(i * length)..<((i + 1) * length)])
    }

    /// Whether the hash of `x`'s subtree is fresh.
    func isFresh(_ x: NodeIndex) -> Bool {
        let i = Int(x.value)
        return i < fresh.count && fresh[i]
    }

    /// Records the hash of `x`'s subtree (its length must be `length`).
    mutating func set(_ x: NodeIndex, _ hash: [UInt8]) {
        precondition(hash.count == length, "a tree hash of the wrong length")
        let i = Int(x.value)
        bytes.replaceSubrange((i * length)..<((i + 1) * length), with: hash)
        fresh[i] = true
    }

    /// Marks `x` and its ancestors in a tree of `size` stale.
    mutating func invalidate(_ x: NodeIndex, in size: TreeSize) {
        var node: NodeIndex? = x
        while let n = node, Int(n.value) < fresh.count, fresh[Int(n.value)] {
            fresh[Int(n.value)] = false
            node = TreeMath.parent(n, in: size)
        }
    }

    /// Grows (with stale hashes) or shrinks to `nodeCount` nodes.
    mutating func resize(to nodeCount: Int) {
        if nodeCount > fresh.count {
            bytes += [UInt8](repeating: 0, count: (nodeCount - fresh.count) * length)
            fresh += [Bool](repeating: false, count: nodeCount - fresh.count)
        } else {
            bytes.removeLast((fresh.count - nodeCount) * length)
            fresh.removeLast(fresh.count - nodeCount)
        }
    }
}
