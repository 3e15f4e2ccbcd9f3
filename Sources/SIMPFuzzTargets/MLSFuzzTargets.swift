import SIMPMLS

/// The MLS (RFC 9420) decoders a client runs on bytes from other members and from the server,
/// before anything about them is trusted: `MLSMessage` (and through it `PublicMessage`,
/// `PrivateMessage`, `Welcome`, `GroupInfo`, `KeyPackage`) and the `ratchet_tree` extension.
extension FuzzTarget {
    static let mlsSuite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
    static let mlsKey = [UInt8](repeating: 7, count: 32)

    /// One `MLSMessage`: what decodes encodes back to exactly the input, and the checks a
    /// receiver runs next do not trap. The same bytes also go to the group's saved-state
    /// decoder (`MLSGroup(savedState:...)`, whose checks must throw, never trap); what restores
    /// saves back to a state that restores.
    static func mlsMessage(_ data: [UInt8]) {
        if let group = try? MLSGroup(savedState: data, credentialValidator: nil, proposalApprover: nil) {
            let saved = try? group.savedState()
            precondition(saved.flatMap { try? MLSGroup(savedState: $0, credentialValidator: nil, proposalApprover: nil) } != nil,
                         "a restored group state does not restore again")
        }
        guard let message = try? MLSMessage(mlsDecoding: data) else { return }
        precondition((try? message.mlsEncoded()) == data, "an MLSMessage does not encode back to its bytes")
        switch message {
        case .publicMessage(let m): checkPublicMessage(m)
        case .privateMessage(let m):
            // The ciphertext stands in for a plaintext: the content decoder after decryption.
            if let content = try? PrivateMessageContent(decoding: m.ciphertext, contentType: m.contentType) {
                precondition((try? content.encoded()) == m.ciphertext, "a PrivateMessageContent does not encode back")
            }
        case .welcome(let welcome):
            if let first = welcome.secrets.first {
                precondition(welcome.secrets(for: first.newMember) != nil, "a Welcome's own reference is not found")
            }
        case .groupInfo(let info):
            if let tree = try? info.ratchetTree() { checkRatchetTree(tree) }
            if let signer = try? SignaturePrivateKey(rawRepresentation: mlsKey) {
                precondition((try? info.verify(with: signer.publicKey, suite: mlsSuite)) == nil,
                             "a GroupInfo verified under a key that did not sign it")
            }
        case .keyPackage(let package):
            // Vector seeds may carry valid signatures, so success is allowed; it must be consistent.
            if let checked = try? package.validate(suite: mlsSuite) {
                precondition(checked.wire == package && checked.initKey != checked.encryptionKey, "a validated KeyPackage differs")
            }
        }
    }

    private static func checkPublicMessage(_ message: PublicMessage) {
        let content = message.authenticatedContent
        let context = FramedContentTBS.coversContext(content.content.sender) ? groupContext(for: content.content) : nil
        precondition((try? content.signedContent(context: context)) != nil, "a decoded PublicMessage cannot be given to verify")
        if content.content.contentType == .commit {
            precondition((try? TranscriptHashes.after(content, interimBefore: [], suite: mlsSuite)) != nil,
                         "a decoded commit has no transcript hashes")
        }
        if message.membershipTag != nil {
            precondition((try? message.verifyMembershipTag(membershipKey: mlsKey, context: groupContext(for: content.content), suite: mlsSuite)) == nil,
                         "random bytes carry a valid membership tag")
        }
    }

    private static func groupContext(for content: FramedContent) -> GroupContext {
        GroupContext(cipherSuite: mlsSuite.id, groupID: content.groupID, epoch: content.epoch, treeHash: [],
                     confirmedTranscriptHash: [], extensions: [])
    }

    /// The `ratchet_tree` extension's data: what decodes has the shape RFC 9420 section
    /// 12.4.3.3 requires and encodes back to exactly the input; as a `PublicRatchetTree` it gives
    /// the same nodes back, a joiner's `validate` (section 12.4.3.1) may refuse it but does not
    /// trap, and after a Remove its kept tree hashes are those of the same tree built afresh.
    static func mlsRatchetTree(_ data: [UInt8]) {
        guard let tree = try? RatchetTree(mlsDecoding: data) else { return }
        precondition((try? tree.mlsEncoded()) == data, "a ratchet tree does not encode back to its bytes")
        checkRatchetTree(tree)
        guard let publicTree = try? PublicRatchetTree(suite: mlsSuite, ratchetTree: tree) else { return }
        precondition((try? publicTree.ratchetTree()) == tree, "a public ratchet tree does not give back its nodes")
        _ = try? publicTree.validate(groupID: Array("fuzz".utf8))
        checkTreeHashesAfterRemove(publicTree)
    }

    /// Removes the last member and compares every tree hash with a fresh tree's of the same
    /// nodes (unless truncation left a size the extension's data does not give, which only an
    /// invalid tree can: a non-blank root over a blank right subtree).
    private static func checkTreeHashesAfterRemove(_ tree: PublicRatchetTree) {
        guard let leaf = tree.memberLeaves.last else { return }
        var changed = tree
        guard (try? changed.remove(leaf)) != nil, let nodes = try? changed.ratchetTree(),
              let fresh = try? PublicRatchetTree(suite: mlsSuite, ratchetTree: nodes), fresh.size == changed.size
        else { return }
        precondition(fresh == changed, "a tree rebuilt from its own nodes differs")
        precondition((try? changed.treeHashes()) == (try? fresh.treeHashes()), "kept tree hashes differ from a fresh tree's")
    }

    private static func checkRatchetTree(_ tree: RatchetTree) {
        precondition(tree.nodes.last.map { $0 != nil } == true, "a ratchet tree decoded empty or ending blank")
        guard let size = tree.size else { preconditionFailure("a decoded ratchet tree has no size") }
        precondition(Int(size.nodeCount) >= tree.nodes.count, "a ratchet tree's size does not hold its nodes")
        for (index, node) in tree.nodes.enumerated() {
            guard let node else { continue }
            precondition((node.nodeType == .leaf) == (index % 2 == 0), "node \(index) of a ratchet tree has the wrong type")
        }
    }
}
