import Foundation
import SIMPMLS
import Testing

/// The secret tree and its ratchets (RFC 9420 section 9): out-of-order generations within the
/// window, refusals past it and of used generations, and deletion of used secrets.
@Suite struct SecretTreeTests {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
    static let encryptionSecret = SecretBytes((0..<32).map { UInt8($0) })

    static func tree(leaves: UInt32 = 4, window: RatchetWindow = .default) throws -> SecretTree {
        try SecretTree(suite: suite, encryptionSecret: encryptionSecret, size: try #require(TreeSize(leafCount: leaves)), window: window)
    }

    /// Generations 0..<n of a ratchet taken in order, as a sender does.
    static func inOrder(_ n: Int, leaf: UInt32 = 1, type: RatchetType = .application) throws -> [RatchetKey] {
        var t = try tree()
        return try (0..<n).map { _ in try t.nextKey(leaf: LeafIndex(leaf), type: type) }
    }

    @Test func theSendersKeysAreTheReceiversInAnyOrderWithinTheWindow() throws {
        let sent = try Self.inOrder(8)
        #expect(sent.map(\.generation) == Array(0..<8))
        var receiver = try Self.tree()
        for g in [5, 3, 7, 0, 6, 1, 4, 2] as [UInt32] {
            let key = try receiver.key(leaf: LeafIndex(1), type: .application, generation: g)
            #expect(key == sent[Int(g)])
        }
        #expect(receiver.ratchet(leaf: LeafIndex(1), type: .application)?.retainedSkippedGenerations == [])
        // Keys differ by generation, by ratchet and by leaf.
        #expect(Set(sent.map(\.key.bytes)).count == 8)
        #expect(try Self.inOrder(1, type: .handshake)[0] != sent[0])
        #expect(try Self.inOrder(1, leaf: 2)[0] != sent[0])
    }

    @Test func aRatchetKeySealsWhatTheReceiversKeyOpens() throws {
        for suite in MLSCipherSuite.allCases {
            let secret = SecretBytes([UInt8](repeating: 0x42, count: 32))
            let size = try #require(TreeSize(leafCount: 2))
            var sender = try SecretTree(suite: suite, encryptionSecret: secret, size: size)
            var receiver = try SecretTree(suite: suite, encryptionSecret: secret, size: size)
            _ = try sender.nextKey(leaf: LeafIndex(1), type: RatchetType(.application))
            let k = try sender.nextKey(leaf: LeafIndex(1), type: RatchetType(.application))
            #expect(k.key.count == suite.aeadKeyLength && k.nonce.count == suite.aeadNonceLength)
            let sealed = try suite.seal(key: k.key.bytes, nonce: k.nonce.bytes, aad: [1], plaintext: Array("hello".utf8))
            let r = try receiver.key(leaf: LeafIndex(1), type: RatchetType(.application), generation: k.generation)
            #expect(try suite.open(key: r.key.bytes, nonce: r.nonce.bytes, aad: [1], ciphertext: sealed) == Array("hello".utf8))
            // Proposals and commits use the other ratchet.
            #expect(RatchetType(.proposal) == .handshake && RatchetType(.commit) == .handshake)
            let h = try receiver.key(leaf: LeafIndex(1), type: RatchetType(.commit), generation: k.generation)
            #expect(throws: MLSCryptoError.aeadFailure) {
                try suite.open(key: h.key.bytes, nonce: h.nonce.bytes, aad: [1], ciphertext: sealed)
            }
        }
    }

    @Test func aGenerationTooFarAheadIsRefusedAndChangesNothing() throws {
        var t = try Self.tree(window: RatchetWindow(maximumForwardDistance: 10, maximumSkippedKeys: 4))
        #expect(throws: SecretTreeError.generationTooFarAhead(requested: 11, next: 0, maximumDistance: 10)) {
            try t.key(leaf: LeafIndex(0), type: .handshake, generation: 11)
        }
        // Nothing was derived: the leaf's path is intact.
        #expect(t.ratchet(leaf: LeafIndex(0), type: .handshake) == nil)
        #expect(t.retainedNodeSecrets == [NodeIndex(3)])
        // Exactly the distance is allowed; afterwards the window moves with the ratchet.
        _ = try t.key(leaf: LeafIndex(0), type: .handshake, generation: 10)
        #expect(throws: SecretTreeError.generationTooFarAhead(requested: 22, next: 11, maximumDistance: 10)) {
            try t.key(leaf: LeafIndex(0), type: .handshake, generation: 22)
        }
        _ = try t.key(leaf: LeafIndex(0), type: .handshake, generation: 21)
        #expect(t.ratchet(leaf: LeafIndex(0), type: .handshake)?.nextGeneration == 22)
    }

    @Test func skippedKeysBeyondTheWindowAreDroppedAndRefused() throws {
        var t = try Self.tree(window: RatchetWindow(maximumForwardDistance: 100, maximumSkippedKeys: 4))
        let sent = try Self.inOrder(14, leaf: 1, type: .handshake)
        #expect(try t.key(leaf: LeafIndex(1), type: .handshake, generation: 10) == sent[10])
        #expect(t.ratchet(leaf: LeafIndex(1), type: .handshake)?.retainedSkippedGenerations == [6, 7, 8, 9])
        for g in [0, 5] as [UInt32] {
            #expect(throws: SecretTreeError.generationExpired(g)) { try t.key(leaf: LeafIndex(1), type: .handshake, generation: g) }
        }
        #expect(try t.key(leaf: LeafIndex(1), type: .handshake, generation: 7) == sent[7])
        // One more skipped key: the oldest kept one, 6, goes.
        #expect(try t.key(leaf: LeafIndex(1), type: .handshake, generation: 13) == sent[13])
        #expect(t.ratchet(leaf: LeafIndex(1), type: .handshake)?.retainedSkippedGenerations == [8, 9, 11, 12])
        #expect(throws: SecretTreeError.generationExpired(6)) { try t.key(leaf: LeafIndex(1), type: .handshake, generation: 6) }
        #expect(try t.key(leaf: LeafIndex(1), type: .handshake, generation: 11) == sent[11])
    }

    @Test func aUsedGenerationIsRefusedAsAReplay() throws {
        var t = try Self.tree()
        let k0 = try t.key(leaf: LeafIndex(2), type: .application, generation: 0)
        #expect(throws: SecretTreeError.generationAlreadyUsed(0)) { try t.key(leaf: LeafIndex(2), type: .application, generation: 0) }
        // A skipped generation, once used, too.
        _ = try t.key(leaf: LeafIndex(2), type: .application, generation: 3)
        _ = try t.key(leaf: LeafIndex(2), type: .application, generation: 1)
        #expect(throws: SecretTreeError.generationAlreadyUsed(1)) { try t.key(leaf: LeafIndex(2), type: .application, generation: 1) }
        #expect(throws: SecretTreeError.generationAlreadyUsed(3)) { try t.key(leaf: LeafIndex(2), type: .application, generation: 3) }
        // The other ratchet of the leaf is independent.
        #expect(try t.key(leaf: LeafIndex(2), type: .handshake, generation: 0) != k0)
        // A sender never hands out a generation twice.
        var s = try Self.tree()
        let a = try s.nextKey(leaf: LeafIndex(2), type: .application)
        let b = try s.nextKey(leaf: LeafIndex(2), type: .application)
        #expect(a.generation == 0 && b.generation == 1 && a == k0)
    }

    @Test func usedSecretsAreDeleted() throws {
        var t = try Self.tree(leaves: 4)
        #expect(t.retainedNodeSecrets == [NodeIndex(3)])
        // Leaf 0 (node 0): root 3 splits into 1 and 5, 1 into 0 and 2; 0 becomes the leaf's ratchets.
        _ = try t.key(leaf: LeafIndex(0), type: .application, generation: 0)
        #expect(t.retainedNodeSecrets == [NodeIndex(2), NodeIndex(5)])
        _ = try t.key(leaf: LeafIndex(3), type: .application, generation: 0)
        #expect(t.retainedNodeSecrets == [NodeIndex(2), NodeIndex(4)])
        _ = try t.key(leaf: LeafIndex(1), type: .application, generation: 0)
        _ = try t.key(leaf: LeafIndex(2), type: .application, generation: 0)
        #expect(t.retainedNodeSecrets == [])
        // The ratchet keeps only what it may still hand out.
        _ = try t.key(leaf: LeafIndex(0), type: .application, generation: 5)
        #expect(t.ratchet(leaf: LeafIndex(0), type: .application)?.retainedSkippedGenerations == [1, 2, 3, 4])
        _ = try t.key(leaf: LeafIndex(0), type: .application, generation: 2)
        #expect(t.ratchet(leaf: LeafIndex(0), type: .application)?.retainedSkippedGenerations == [1, 3, 4])
        #expect(t.ratchet(leaf: LeafIndex(0), type: .application)?.nextGeneration == 6)
        #expect(t.ratchet(leaf: LeafIndex(0), type: .handshake)?.nextGeneration == 0)
    }

    @Test func theTreeIsAValue() throws {
        var original = try Self.tree()
        var copy = original
        let fromCopy = try copy.key(leaf: LeafIndex(1), type: .application, generation: 0)
        // The copy's use deletes nothing from the original.
        #expect(original.retainedNodeSecrets == [NodeIndex(3)])
        #expect(try original.key(leaf: LeafIndex(1), type: .application, generation: 0) == fromCopy)
        #expect(throws: SecretTreeError.generationAlreadyUsed(0)) { try copy.key(leaf: LeafIndex(1), type: .application, generation: 0) }
    }

    @Test func aLeafOutsideTheTreeIsRefused() throws {
        var t = try Self.tree(leaves: 4)
        #expect(throws: SecretTreeError.leafOutOfRange(LeafIndex(4), leafCount: 4)) {
            try t.key(leaf: LeafIndex(4), type: .handshake, generation: 0)
        }
        #expect(throws: SecretTreeError.leafOutOfRange(LeafIndex(UInt32.max), leafCount: 4)) {
            try t.nextKey(leaf: LeafIndex(UInt32.max), type: .handshake)
        }
        #expect(throws: KeyScheduleError.invalidSecretLength(name: "encryption_secret", expected: 32, got: 31)) {
            try SecretTree(suite: Self.suite, encryptionSecret: SecretBytes([UInt8](repeating: 1, count: 31)), size: try #require(TreeSize(leafCount: 1)))
        }
    }

    @Test func aOneLeafTreeUsesTheEncryptionSecretAsItsLeaf() throws {
        var t = try Self.tree(leaves: 1)
        let handshake = try Self.suite.expandWithLabel(
            secret: Self.encryptionSecret.bytes, label: Array("handshake".utf8), context: [], length: 32)
        let key = try Self.suite.deriveTreeSecret(secret: handshake, label: Array("key".utf8), generation: 0, length: 16)
        #expect(try t.nextKey(leaf: LeafIndex(0), type: .handshake).key.matches(key))
        #expect(t.retainedNodeSecrets == [])
    }

    @Test func nothingPrintsASecret() throws {
        var t = try Self.tree()
        let key = try t.nextKey(leaf: LeafIndex(0), type: .application)
        let hex = { (b: [UInt8]) in b.map { String(format: "%02x", $0) }.joined() }
        let secrets = [Self.encryptionSecret.bytes, key.key.bytes, key.nonce.bytes]
        var dumped = ""
        dump(t, to: &dumped)
        dump(key, to: &dumped)
        dump(Self.encryptionSecret, to: &dumped)
        let printed = [
            "\(t)", "\(key)", "\(Self.encryptionSecret)", String(reflecting: key), String(reflecting: Self.encryptionSecret),
            String(reflecting: t), dumped,
        ]
        for text in printed {
            #expect(text.contains("redacted") || text.contains("generation") || text.contains("leafCount"))
            for s in secrets {
                #expect(!text.contains(hex(s)))
                #expect(!text.contains(s.map(String.init).joined(separator: ", ")))
            }
        }
    }
}
