import Foundation

/// Checks of the ratchet tree (RFC 9420 sections 4, 7, 12.1) and TreeKEM (7.4-7.6) against
/// `tree-operations.json`, `tree-validation.json` and `treekem.json`.
extension MLSTestVectors {
    /// Decodes `bytes` as a whole `T`, failing the case with `name` if it does not.
    static func decoded<T: MLSDecodable>(_ bytes: Hex, _: T.Type, _ name: String) throws -> T {
        do { return try T(mlsDecoding: bytes.bytes) } catch { throw CaseError(reason: "\(name) does not decode: \(error)") }
    }

    /// Runs `body`, its `CaseError` the failed reason, any other error "name: error".
    static func outcome(_ name: String, _ body: () throws -> Outcome) -> Outcome {
        do { return try body() } catch let e as CaseError {
            return .failed(reason: e.reason)
        } catch {
            return .failed(reason: "\(name): \(error)")
        }
    }

    // MARK: tree-operations.json

    struct TreeOperationsCase: Decodable {
        let cipher_suite: UInt16
        let tree_before: Hex
        let proposal: Hex
        let proposal_sender: UInt32
        let tree_hash_before: Hex
        let tree_after: Hex
        let tree_hash_after: Hex
    }

    /// `tree_before` hashes to `tree_hash_before`; the proposal (an Add, whose key package
    /// validates; an Update; a Remove) applied for `proposal_sender` gives a tree that encodes to
    /// `tree_after` and hashes to `tree_hash_after`.
    static func checkTreeOperations(_ parsed: Result<TreeOperationsCase, CaseError>) -> Outcome {
        let c: TreeOperationsCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        return outcome("tree operation") {
            var tree = try PublicRatchetTree(suite: suite, ratchetTree: try decoded(c.tree_before, RatchetTree.self, "tree_before"))
            guard try tree.treeHash() == c.tree_hash_before.bytes else { return .failed(reason: "tree_hash_before") }
            switch try decoded(c.proposal, Proposal.self, "proposal") {
            case .add(let add): try tree.add(try add.keyPackage.validate(suite: suite).leafNode)
            case .update(let update): try tree.update(update.leafNode, at: LeafIndex(c.proposal_sender))
            case .remove(let remove): try tree.remove(LeafIndex(remove.removed))
            default: return .failed(reason: "proposal is not an add, update or remove")
            }
            guard try tree.ratchetTree().mlsEncoded() == c.tree_after.bytes else { return .failed(reason: "tree_after") }
            guard try tree.treeHash() == c.tree_hash_after.bytes else { return .failed(reason: "tree_hash_after") }
            return .passed
        }
    }

    // MARK: tree-validation.json

    struct TreeValidationCase: Decodable {
        let cipher_suite: UInt16
        let tree: Hex
        let group_id: Hex
        let resolutions: [[UInt32]]
        let tree_hashes: [Hex]
    }

    /// Each node's resolution and tree hash are the vector's (one per node of the full tree),
    /// and the tree validates for `group_id` as a joiner's would (parent hashes, unmerged
    /// leaves, leaf signatures and capabilities, unique keys).
    static func checkTreeValidation(_ parsed: Result<TreeValidationCase, CaseError>) -> Outcome {
        let c: TreeValidationCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        return outcome("tree validation") {
            let tree = try PublicRatchetTree(suite: suite, ratchetTree: try decoded(c.tree, RatchetTree.self, "tree"))
            let count = Int(tree.size.nodeCount)
            guard c.resolutions.count == count, c.tree_hashes.count == count else {
                return .failed(reason: "\(count) nodes, the vector lists \(c.resolutions.count) resolutions, \(c.tree_hashes.count) tree hashes")
            }
            for i in 0..<count where tree.resolution(of: NodeIndex(UInt32(i))).map(\.value) != c.resolutions[i] {
                return .failed(reason: "resolution of node \(i)")
            }
            let hashes = try tree.treeHashes()
            for i in 0..<count where hashes[i] != c.tree_hashes[i].bytes {
                return .failed(reason: "tree hash of node \(i)")
            }
            do { try tree.validate(groupID: c.group_id.bytes) } catch { return .failed(reason: "validation: \(error)") }
            return .passed
        }
    }
}
