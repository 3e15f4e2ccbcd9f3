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

extension MLSTestVectors {
    // MARK: treekem.json

    struct TreeKEMCase: Decodable {
        struct PathSecret: Decodable { let node: UInt32; let path_secret: Hex }
        struct LeafPrivate: Decodable {
            let index: UInt32
            let encryption_priv: Hex
            let signature_priv: Hex
            let path_secrets: [PathSecret]
        }
        struct UpdatePathCase: Decodable {
            let sender: UInt32
            let update_path: Hex
            let path_secrets: [Hex?]
            let commit_secret: Hex
            let tree_hash_after: Hex
        }
        let cipher_suite: UInt16
        let group_id: Hex
        let epoch: UInt64
        let confirmed_transcript_hash: Hex
        let ratchet_tree: Hex
        let leaves_private: [LeafPrivate]
        let update_paths: [UpdatePathCase]
    }

    /// A member's private state in a treekem case.
    struct TreeKEMMember {
        let keys: TreeKEMPrivateKeys
        let signer: SignaturePrivateKey
    }

    /// As test-vectors.md has it: each `leaves_private` entry's keys (its leaf key and the key
    /// pairs of its path secrets) fit `ratchet_tree`. With the GroupContext of the case (no
    /// extensions, the tree's hash), for each of `update_paths`: merged, it is parent-hash valid
    /// and the tree hashes to `tree_hash_after`; every other member with private state decrypts
    /// `path_secrets[j]` and derives `commit_secret`. Then an UpdatePath we make from the same
    /// sender (fixed leaf secret and randomness) is processed by every other member to our commit
    /// secret and our tree hash, and our merged tree's parent hashes verify.
    static func checkTreeKEM(_ parsed: Result<TreeKEMCase, CaseError>) -> Outcome {
        let c: TreeKEMCase, suite: MLSCipherSuite
        switch parsedCase(parsed, suite: { $0.cipher_suite }) {
        case .done(let outcome): return outcome
        case .check(let v, let s): (c, suite) = (v, s)
        }
        return outcome("treekem") {
            let tree = try PublicRatchetTree(suite: suite, ratchetTree: try decoded(c.ratchet_tree, RatchetTree.self, "ratchet_tree"))
            var members: [UInt32: TreeKEMMember] = [:]
            for (i, leaf) in c.leaves_private.enumerated() {
                do { members[leaf.index] = try treeKEMMember(leaf, tree: tree) } catch {
                    return .failed(reason: "leaves_private[\(i)]: \(error)")
                }
            }
            let context = GroupContext(
                cipherSuite: suite.id, groupID: c.group_id.bytes, epoch: c.epoch, treeHash: try tree.treeHash(),
                confirmedTranscriptHash: c.confirmed_transcript_hash.bytes, extensions: [])
            for (u, up) in c.update_paths.enumerated() {
                let outcome = checkUpdatePath(up, tree: tree, members: members, context: context)
                if case .failed(let reason) = outcome { return .failed(reason: "update_paths[\(u)]: \(reason)") }
            }
            return .passed
        }
    }

    static func treeKEMMember(_ leaf: TreeKEMCase.LeafPrivate, tree: PublicRatchetTree) throws -> TreeKEMMember {
        var keys = TreeKEMPrivateKeys(leaf: LeafIndex(leaf.index), encryptionKey: try HPKEPrivateKey(rawRepresentation: leaf.encryption_priv.bytes))
        for entry in leaf.path_secrets {
            try keys.setPathSecret(SecretBytes(entry.path_secret.bytes), at: NodeIndex(entry.node), suite: tree.suite)
        }
        try keys.checkConsistent(with: tree)
        return TreeKEMMember(keys: keys, signer: try SignaturePrivateKey(rawRepresentation: leaf.signature_priv.bytes))
    }

    static func checkUpdatePath(
        _ up: TreeKEMCase.UpdatePathCase, tree: PublicRatchetTree, members: [UInt32: TreeKEMMember], context: GroupContext
    ) -> Outcome {
        outcome("update path") {
            let path = try decoded(up.update_path, UpdatePath.self, "update_path")
            let sender = LeafIndex(up.sender)
            guard up.path_secrets.count == Int(tree.size.leafCount) else { return .failed(reason: "path_secrets has not one entry per leaf") }
            let merged: PublicRatchetTree
            do {
                merged = try tree.merging(path, from: sender, groupID: context.groupID)
                try merged.verifyParentHashes()
            } catch { return .failed(reason: "merge: \(error)") }
            guard try merged.treeHash() == up.tree_hash_after.bytes else { return .failed(reason: "tree_hash_after") }
            let receivers = members.filter { $0.key != up.sender && tree.leaf(LeafIndex($0.key)) != nil }.sorted { $0.key < $1.key }
            for (j, member) in receivers {
                let processed: PublicRatchetTree.ProcessedUpdatePath
                do {
                    processed = try tree.processing(path, from: sender, groupContext: context, privateKeys: member.keys)
                } catch { return .failed(reason: "leaf \(j) processing: \(error)") }
                guard let expected = up.path_secrets[Int(j)], processed.decryptedPathSecret.matches(expected.bytes) else {
                    return .failed(reason: "path_secrets[\(j)]")
                }
                guard processed.commitSecret.matches(up.commit_secret.bytes) else { return .failed(reason: "leaf \(j): commit_secret") }
            }
            return try checkOurUpdatePath(from: sender, tree: tree, receivers: receivers, context: context, signer: members[up.sender]?.signer)
        }
    }

    /// An UpdatePath we make from `sender` is processed by every receiver to our commit secret
    /// and tree hash, and our merged tree's parent hashes verify.
    static func checkOurUpdatePath(
        from sender: LeafIndex, tree: PublicRatchetTree, receivers: [(key: UInt32, value: TreeKEMMember)], context: GroupContext,
        signer: SignaturePrivateKey?
    ) throws -> Outcome {
        guard let signer else { return .failed(reason: "no leaves_private entry for the sender") }
        var counter: UInt32 = 0
        let created = try tree.createUpdatePath(
            from: sender, leafSecret: SecretBytes(tree.suite.hash(Array("treekem check leaf secret".utf8))), signer: signer,
            groupContext: context
        ) { count in
            counter += 1
            return Array(tree.suite.hash(Array("treekem check randomness".utf8) + withUnsafeBytes(of: counter.bigEndian, Array.init)).prefix(count))
        }
        do { try created.tree.verifyParentHashes() } catch { return .failed(reason: "our update path: \(error)") }
        let ourTreeHash = try created.tree.treeHash()
        for (j, member) in receivers {
            let processed: PublicRatchetTree.ProcessedUpdatePath
            do {
                processed = try tree.processing(created.updatePath, from: sender, groupContext: context, privateKeys: member.keys)
            } catch { return .failed(reason: "leaf \(j) processing our update path: \(error)") }
            guard processed.commitSecret == created.commitSecret else { return .failed(reason: "leaf \(j): our commit_secret") }
            guard try processed.tree.treeHash() == ourTreeHash else { return .failed(reason: "leaf \(j): our tree hash") }
        }
        return .passed
    }
}
