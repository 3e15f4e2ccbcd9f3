import Foundation
import SIMPMLS
import Testing

/// PublicRatchetTree and TreeKEM on trees made here with fixed keys: the operations, UpdatePaths
/// made and processed, and the refusals of tree validation and of forged UpdatePaths.
@Suite struct RatchetTreeTests {
    static let suite = MessageFixtures.suite
    static let groupID = Array("group".utf8)

    /// Member `i`: signature key from seed `10 + i`, encryption key from seed `40 + i`, a key
    /// package leaf node.
    struct Member {
        let signer: SignaturePrivateKey
        let encryptionKey: HPKEPrivateKey
        let leaf: LeafNode

        init(_ i: UInt8, lifetime: Lifetime = Lifetime(notBefore: 0, notAfter: .max)) throws {
            signer = try MessageFixtures.signer(10 + i)
            encryptionKey = try MessageFixtures.hpkeKey(40 + i)
            leaf = try MessageFixtures.leafNode(
                signer: signer, encryptionKey: encryptionKey.publicKey, source: .keyPackage(lifetime: lifetime), identity: "member \(i)")
        }
    }

    /// A group's public tree and every member's private keys, changed together.
    struct Group {
        var tree: PublicRatchetTree
        var keys: [UInt32: TreeKEMPrivateKeys]
        let members: [Member]
        var epoch: UInt64 = 0

        /// `count` members: member 0 creates the group, the others are added.
        init(_ count: UInt8) throws {
            members = try (0..<count).map { try Member($0) }
            tree = PublicRatchetTree(suite: RatchetTreeTests.suite, creator: members[0].leaf)
            keys = [:]
            for (i, member) in members.enumerated() {
                if i > 0 { try tree.add(member.leaf) }
                keys[UInt32(i)] = TreeKEMPrivateKeys(leaf: LeafIndex(UInt32(i)), encryptionKey: member.encryptionKey)
            }
        }

        var context: GroupContext {
            GroupContext(
                cipherSuite: RatchetTreeTests.suite.id, groupID: RatchetTreeTests.groupID, epoch: epoch, treeHash: [],
                confirmedTranscriptHash: [UInt8](repeating: 7, count: 32), extensions: [])
        }

        /// The member at `leaf` makes an UpdatePath; every other member processes it.
        @discardableResult
        mutating func commit(from leaf: UInt32) throws -> PublicRatchetTree.CreatedUpdatePath {
            let created = try tree.createUpdatePath(
                from: LeafIndex(leaf), leafSecret: SecretBytes([UInt8](repeating: UInt8(epoch + 1), count: 32)),
                signer: members[Int(leaf)].signer, groupContext: context, randomness: RatchetTreeTests.randomness())
            for (j, own) in keys where j != leaf {
                let processed = try tree.processing(created.updatePath, from: LeafIndex(leaf), groupContext: context, privateKeys: own)
                #expect(processed.commitSecret == created.commitSecret)
                #expect(try processed.tree.treeHash() == created.tree.treeHash())
                keys[j] = processed.privateKeys
            }
            keys[leaf] = created.privateKeys
            tree = created.tree
            epoch += 1
            return created
        }
    }

    /// Distinct 32-byte strings, one per call: test randomness.
    static func randomness() -> (Int) throws -> [UInt8] {
        var counter: UInt8 = 0
        return { count in
            counter &+= 1
            return Array(suite.hash([counter, 0x52]).prefix(count))
        }
    }

    /// `tree` with its nodes changed by `change`, rebuilt from the extension's data.
    static func tampered(_ tree: PublicRatchetTree, _ change: (inout [Node?]) throws -> Void) throws -> PublicRatchetTree {
        var nodes = try tree.ratchetTree().nodes
        try change(&nodes)
        return try PublicRatchetTree(suite: suite, ratchetTree: try RatchetTree(nodes: nodes))
    }

    static func parentNode(_ node: Node?) throws -> ParentNode {
        guard case .parent(let parent)? = node else { throw MLSTreeError.parentHashInvalid(node: 0) }
        return parent
    }

    // MARK: operations

    @Test func addExtendsTheTreeAndRemoveTruncatesIt() throws {
        var group = try Group(3)
        #expect(group.tree.size.leafCount == 4)
        #expect(group.tree.memberLeaves == [LeafIndex(0), LeafIndex(1), LeafIndex(2)])
        try group.tree.remove(LeafIndex(2))
        #expect(group.tree.size.leafCount == 2)
        #expect(throws: MLSTreeError.noSuchLeaf(5)) { try group.tree.update(group.members[1].leaf, at: LeafIndex(5)) }
        try group.tree.remove(LeafIndex(1))
        #expect(group.tree.size.leafCount == 1)
        #expect(throws: MLSTreeError.noSuchLeaf(1)) { try group.tree.remove(LeafIndex(1)) }
        // Encoded and decoded back: the same tree.
        let decoded = try PublicRatchetTree(suite: Self.suite, ratchetTree: try RatchetTree(mlsDecoding: try group.tree.ratchetTree().mlsEncoded()))
        #expect(decoded == group.tree)
    }

    @Test func anAddTakesTheLeftmostBlankLeafAndIsUnmergedAboveIt() throws {
        var group = try Group(3)
        try group.commit(from: 0)
        // Leaf 0's filtered direct path: node 1 (copath leaf 1) and the root, node 3 (copath node 5).
        #expect(try group.tree.filteredDirectPath(LeafIndex(0)).map(\.node) == [NodeIndex(1), NodeIndex(3)])
        #expect(group.tree.parent(NodeIndex(5)) == nil)
        let added = try group.tree.add(try Member(3).leaf)
        #expect(added == LeafIndex(3))
        #expect(try Self.parentNode(group.tree.node(NodeIndex(3))).unmergedLeaves == [3])
        #expect(group.tree.resolution(of: NodeIndex(3)) == [NodeIndex(3), NodeIndex(6)])
        #expect(group.tree.resolution(of: NodeIndex(5)) == [NodeIndex(4), NodeIndex(6)])
        #expect(group.tree.resolution(of: NodeIndex(5), excluding: [LeafIndex(3)]) == [NodeIndex(4)])
        try group.tree.validate(groupID: Self.groupID)
        // Removing leaf 1 blanks node 1 and the root; the next add fills leaf 1.
        try group.tree.remove(LeafIndex(1))
        #expect(group.tree.parent(NodeIndex(3)) == nil)
        #expect(try group.tree.add(try Member(4).leaf) == LeafIndex(1))
    }

    // MARK: TreeKEM

    @Test func updatePathsFromEveryMemberAreProcessedByTheOthers() throws {
        var group = try Group(5)
        for leaf in [UInt32(0), 3, 1, 4, 2] {
            try group.commit(from: leaf)
            try group.tree.validate(groupID: Self.groupID, expectedTreeHash: try group.tree.treeHash())
            for keys in group.keys.values { try keys.checkConsistent(with: group.tree) }
        }
        // After everyone committed, every member knows the root's key.
        let root = group.tree.size.root
        #expect(group.keys.values.allSatisfy { $0.privateKey(for: root) != nil })
    }

    @Test func anAddedMemberIsLeftOutOfTheCiphertextsAndCannotDecrypt() throws {
        var group = try Group(3)
        try group.commit(from: 0)
        let newcomer = try Member(3)
        let leaf = try group.tree.add(newcomer.leaf)
        let created = try group.tree.createUpdatePath(
            from: LeafIndex(1), leafSecret: SecretBytes([UInt8](repeating: 9, count: 32)), signer: group.members[1].signer,
            groupContext: group.context, excluding: [leaf], randomness: Self.randomness())
        // Leaf 1's path: node 1 (to leaf 0) and the root (to node 5's resolution without leaf 3: leaf 2).
        #expect(created.updatePath.nodes.map(\.encryptedPathSecret.count) == [1, 1])
        let keys = TreeKEMPrivateKeys(leaf: leaf, encryptionKey: newcomer.encryptionKey)
        #expect(throws: MLSTreeError.noDecryptionKey) {
            try group.tree.processing(created.updatePath, from: LeafIndex(1), groupContext: group.context, excluding: [leaf], privateKeys: keys)
        }
        // Processed without excluding the new leaf, the ciphertext count is wrong.
        #expect(throws: MLSTreeError.ciphertextCount(node: 3, expected: 2, got: 1)) {
            try group.tree.processing(created.updatePath, from: LeafIndex(1), groupContext: group.context, privateKeys: group.keys[0]!)
        }
        let processed = try group.tree.processing(
            created.updatePath, from: LeafIndex(1), groupContext: group.context, excluding: [leaf], privateKeys: group.keys[2]!)
        #expect(processed.commitSecret == created.commitSecret)
        // The root's path secret is what a Welcome gives the new member.
        #expect(created.pathSecrets.last?.node == NodeIndex(3))
    }

    @Test func aForgedUpdatePathIsRefused() throws {
        var group = try Group(4)
        try group.commit(from: 0)
        let created = try group.tree.createUpdatePath(
            from: LeafIndex(2), leafSecret: SecretBytes([UInt8](repeating: 5, count: 32)), signer: group.members[2].signer,
            groupContext: group.context, randomness: Self.randomness())
        let path = created.updatePath
        let context = group.context
        let tree = group.tree

        // A path node's key that the leaf's parent hash does not cover.
        var otherKey = path
        otherKey.nodes[0].encryptionKey = HPKEPublicKeyIn(bytes: try MessageFixtures.hpkeKey(99).publicKey.rawRepresentation)
        #expect(throws: MLSTreeError.leafParentHashMismatch) { try tree.merging(otherKey, from: LeafIndex(2), groupID: Self.groupID) }
        // One node too few.
        var short = path
        short.nodes.removeLast()
        #expect(throws: MLSTreeError.updatePathLength(expected: 2, got: 1)) { try tree.merging(short, from: LeafIndex(2), groupID: Self.groupID) }
        // Signed for leaf 2, sent as leaf 3's; or checked for another group.
        #expect(throws: MLSCryptoError.invalidSignature) { try tree.merging(path, from: LeafIndex(3), groupID: Self.groupID) }
        #expect(throws: MLSCryptoError.invalidSignature) { try tree.merging(path, from: LeafIndex(2), groupID: Array("other".utf8)) }
        // A key package's leaf in the path.
        var keyPackageLeaf = path
        keyPackageLeaf.leafNode = group.members[2].leaf
        #expect(throws: MLSTreeError.wrongLeafNodeSource(leaf: 2, expected: .commit, got: .keyPackage)) {
            try tree.merging(keyPackageLeaf, from: LeafIndex(2), groupID: Self.groupID)
        }
        // Under another GroupContext the path secret does not decrypt.
        var otherContext = context
        otherContext.epoch += 1
        #expect(throws: MLSCryptoError.decryptionFailed) {
            try tree.processing(path, from: LeafIndex(2), groupContext: otherContext, privateKeys: group.keys[0]!)
        }
        // A member cannot process its own path.
        #expect(throws: MLSTreeError.noDecryptionKey) {
            try tree.processing(path, from: LeafIndex(2), groupContext: context, privateKeys: group.keys[2]!)
        }
        // Signed by a key that is not the leaf's.
        #expect(throws: MLSTreeError.signerMismatch) {
            try tree.createUpdatePath(
                from: LeafIndex(2), leafSecret: SecretBytes([UInt8](repeating: 5, count: 32)), signer: group.members[1].signer,
                groupContext: context, randomness: Self.randomness())
        }
    }

    @Test func aPathSecretThatDoesNotGiveThePathsKeyIsRefused() throws {
        var group = try Group(4)
        try group.commit(from: 0)
        // Leaf 2's path secret for the root, replaced by another: its public key is not the path's.
        let created = try group.tree.createUpdatePath(
            from: LeafIndex(2), leafSecret: SecretBytes([UInt8](repeating: 5, count: 32)), signer: group.members[2].signer,
            groupContext: group.context, randomness: Self.randomness())
        var context = group.context
        context.treeHash = try created.tree.treeHash()
        var path = created.updatePath
        let leaf0 = try #require(group.keys[0]?.privateKey(for: NodeIndex(1)))
        path.nodes[1].encryptedPathSecret[0] = try Self.suite.encryptWithLabel(
            leaf0.publicKey, label: PublicRatchetTree.updatePathNodeLabel, context: try context.mlsEncoded(),
            plaintext: [UInt8](repeating: 1, count: 32), randomness: [UInt8](repeating: 3, count: 32))
        #expect(throws: MLSTreeError.publicKeyMismatch(node: 3)) {
            try group.tree.processing(path, from: LeafIndex(2), groupContext: group.context, privateKeys: group.keys[0]!)
        }
    }

    // MARK: validation

    @Test func aTreeWithABadParentHashIsRejected() throws {
        var group = try Group(4)
        try group.commit(from: 0)
        try group.commit(from: 3)
        try group.tree.validate(groupID: Self.groupID)
        // Node 5's parent hash changed: the root (node 3) no longer has a child linking to it
        // (node 1's parent hash is the old root's).
        let badHash = try Self.tampered(group.tree) { nodes in
            var parent = try Self.parentNode(nodes[5])
            parent.parentHash[0] ^= 1
            nodes[5] = .parent(parent)
        }
        #expect(throws: MLSTreeError.parentHashInvalid(node: 3)) { try badHash.validate(groupID: Self.groupID) }
        // Node 5's key replaced: leaf 3's parent hash no longer links to it.
        let badKey = try Self.tampered(group.tree) { nodes in
            var parent = try Self.parentNode(nodes[5])
            parent.encryptionKey = HPKEPublicKeyIn(bytes: try MessageFixtures.hpkeKey(99).publicKey.rawRepresentation)
            nodes[5] = .parent(parent)
        }
        #expect(throws: MLSTreeError.parentHashInvalid(node: 5)) { try badKey.validate(groupID: Self.groupID) }
        // And the tree hash differs from the one the group agreed on.
        #expect(throws: MLSTreeError.treeHashMismatch) {
            try badKey.validate(groupID: Self.groupID, expectedTreeHash: try group.tree.treeHash())
        }
    }

    @Test func aLeafSignatureThatDoesNotVerifyIsRejected() throws {
        // No parent nodes, so no parent hash covers the leaf changed.
        let group = try Group(3)
        let badSignature = try Self.tampered(group.tree) { nodes in
            guard case .leaf(var leaf)? = nodes[4] else { return }
            leaf.signature[0] ^= 1
            nodes[4] = .leaf(leaf)
        }
        #expect(throws: MLSCryptoError.invalidSignature) { try badSignature.validate(groupID: Self.groupID) }
        // A committer's leaf is signed for the group: another group id fails.
        var committed = try Group(4)
        try committed.commit(from: 1)
        try committed.tree.validate(groupID: Self.groupID)
        #expect(throws: MLSCryptoError.invalidSignature) { try committed.tree.validate(groupID: Array("other".utf8)) }
    }

    @Test func duplicateKeysAreRejected() throws {
        let a = try Member(0), b = try Member(1)
        // b's leaf with a's encryption key, signed by b.
        let sameEncryptionKey = try MessageFixtures.leafNode(signer: b.signer, encryptionKey: a.encryptionKey.publicKey, identity: "b")
        var tree = PublicRatchetTree(suite: Self.suite, creator: a.leaf)
        try tree.add(sameEncryptionKey)
        #expect(throws: MLSTreeError.duplicateEncryptionKey(node: 2)) { try tree.validate(groupID: Self.groupID) }
        // a's signature key in a second leaf with its own encryption key.
        let sameSignatureKey = try MessageFixtures.leafNode(signer: a.signer, encryptionKey: b.encryptionKey.publicKey, identity: "a again")
        tree = PublicRatchetTree(suite: Self.suite, creator: a.leaf)
        try tree.add(sameSignatureKey)
        #expect(throws: MLSTreeError.duplicateSignatureKey(leaf: 1)) { try tree.validate(groupID: Self.groupID) }
    }

    @Test func unmergedLeavesMustBeSortedMembersBelowTheNode() throws {
        var group = try Group(3)
        try group.commit(from: 0)
        try group.tree.add(try Member(3).leaf)
        try group.tree.validate(groupID: Self.groupID)
        for unmerged in [[UInt32(3), 3], [2, 3]] {
            let tree = try Self.tampered(group.tree) { nodes in
                var root = try Self.parentNode(nodes[3])
                root.unmergedLeaves = unmerged
                nodes[3] = .parent(root)
            }
            #expect(throws: MLSTreeError.self) { try tree.validate(groupID: Self.groupID) }
        }
        // Sorted but repeated: the parent hash link still holds, the list does not.
        let repeated = try Self.tampered(group.tree) { nodes in
            var root = try Self.parentNode(nodes[3])
            root.unmergedLeaves = [3, 3]
            nodes[3] = .parent(root)
        }
        #expect(throws: MLSTreeError.unmergedLeavesInvalid(node: 3)) { try repeated.validate(groupID: Self.groupID) }
    }

    @Test func aKeyPackageLeafOutsideItsLifetimeIsRejectedOnlyWhenATimeIsGiven() throws {
        let a = try Member(0), b = try Member(1, lifetime: Lifetime(notBefore: 10, notAfter: 20))
        var tree = PublicRatchetTree(suite: Self.suite, creator: a.leaf)
        try tree.add(b.leaf)
        try tree.validate(groupID: Self.groupID)
        try tree.validate(groupID: Self.groupID, time: 15)
        #expect(throws: MLSTreeError.lifetimeInvalid(leaf: 1)) { try tree.validate(groupID: Self.groupID, time: 21) }
    }

    @Test func changedVectorTreesThrowOrValidateButNeverTrap() throws {
        let json = try #require(try JSONSerialization.jsonObject(with: try VectorFiles.load("tree-validation.json")) as? [[String: Any]])
        var trees: [(tree: [UInt8], groupID: [UInt8])] = []
        for c in json.prefix(14) {
            let tree = try #require(c["tree"] as? String), groupID = try #require(c["group_id"] as? String)
            trees.append((try #require(MessageFixtures.bytes(hex: tree)), try #require(MessageFixtures.bytes(hex: groupID))))
        }
        var random = SeededGenerator(seed: 9420)
        var decoded = 0
        for _ in 0..<300 {
            let (original, groupID) = trees[Int.random(in: 0..<trees.count, using: &random)]
            var bytes = original
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            guard bytes != original, let wire = try? RatchetTree(mlsDecoding: bytes), let tree = try? PublicRatchetTree(suite: Self.suite, ratchetTree: wire) else {
                continue
            }
            decoded += 1
            _ = try? tree.treeHashes()
            for x in 0..<tree.size.nodeCount { _ = tree.resolution(of: NodeIndex(x)) }
            for leaf in tree.memberLeaves { _ = try? tree.filteredDirectPath(leaf) }
            // A changed byte that still decodes changes a key, a signature, a hash or a field the
            // signatures or parent hashes cover, or the unmerged leaves: never accepted silently.
            #expect(throws: (any Error).self) { try tree.validate(groupID: groupID) }
        }
        #expect(decoded > 50)
    }

    // MARK: secrets

    @Test func noPrivateKeyOrSecretIsPrinted() throws {
        var group = try Group(3)
        let created = try group.commit(from: 0)
        let secrets = [created.commitSecret.bytes] + created.pathSecrets.map(\.secret.bytes)
        let keys = try #require(group.keys[1])
        let privateKeys = keys.nodes.compactMap { keys.privateKey(for: $0) }
        var dumped = ""
        dump(created, to: &dumped)
        dump(keys, to: &dumped)
        let printed = [String(describing: created), String(reflecting: created), String(describing: keys), dumped].joined()
        for secret in secrets {
            let hex = secret.map { String(format: "%02x", $0) }.joined()
            #expect(!printed.contains(hex))
            #expect(!printed.contains(String(describing: secret)))
        }
        #expect(!printed.isEmpty && privateKeys.count == 3)
        #expect(String(describing: keys).contains("redacted"))
    }
}
