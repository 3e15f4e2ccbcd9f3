/// Making a commit (RFC 9420 section 12.4.1) and the Welcome of the members it adds (12.4.3).
extension MLSGroup {
    /// What ``commit(adding:removing:proposals:includingPath:psk:randomness:)`` makes.
    public struct CommitOutput: Sendable {
        /// The commit, a PublicMessage or PrivateMessage of the current epoch (as
        /// ``MLSGroupPolicy/handshakeWireFormat`` says), for every member.
        public let message: MLSMessage
        /// The Welcome for the added members; nil when none are added.
        public let welcome: Welcome?
        /// The committer's state in the new epoch, to be kept once the delivery service has
        /// accepted the commit (until then the current state stays valid).
        public let group: MLSGroup
        /// The cached proposals left out because they were invalid, conflicted with others
        /// (section 12.2) or were refused by the ``MLSGroup/proposalApprover``, by reference.
        public let dropped: [[UInt8]]
    }

    /// A commit of this epoch's cached proposals (by reference) and of Adds of `adding`,
    /// Removes of `removing` and `proposals` (PreSharedKey, GroupContextExtensions, ReInit) by
    /// value.
    ///
    /// Section 12.2: a cached proposal that is invalid or conflicts with another is left out
    /// (reported in ``CommitOutput/dropped``): one the ``proposalApprover`` refuses, this
    /// member's own Updates (its path replaces them), two Updates or Removes of one leaf (a Remove preferred, then the most recent
    /// Update), a second Add of one client, a second PSK of one id or GroupContextExtensions,
    /// a ReInit with other proposals, a PSK whose value is not available. A proposal by value
    /// that is invalid makes the commit throw.
    ///
    /// A path is sent when `includingPath` is true (the default: it refreshes the committer's
    /// keys) or the proposals require one (section 12.4). `psk` gives the value of a PSK that is
    /// not a resumption PSK of this group. For a PrivateMessage this uses a generation of the
    /// member's handshake ratchet (hence `mutating`); nothing else of the state changes.
    public mutating func commit(
        adding: [KeyPackage] = [], removing: [LeafIndex] = [], proposals extra: [Proposal] = [], includingPath: Bool = true,
        psk: (PreSharedKeyID) throws -> SecretBytes = MLSGroup.noExternalPSK, randomness: (Int) throws -> [UInt8]
    ) throws -> CommitOutput {
        guard reInit == nil else { throw MLSGroupError.groupReinitialized }
        let byValue = removing.map { Proposal.remove(RemoveProposal(removed: $0.value)) }
            + adding.map { Proposal.add(AddProposal(keyPackage: $0.wire)) } + extra
        let chosen = try chooseProposals(byValue: byValue, psk: psk)
        let applied = try apply(chosen.list)
        let pskSecret = try self.pskSecret(applied.psks, external: psk)
        var provisional = try provisionalContext(tree: applied.tree, extensions: applied.extensions)
        var newTree = applied.tree
        var keys = privateKeys
        keys.forget(keys.nodes.filter { applied.tree.node($0) == nil })
        var commitSecret: SecretBytes?
        var pathSecrets: [(node: NodeIndex, secret: SecretBytes)] = []
        var updatePath: UpdatePath?
        if includingPath || applied.pathRequired {
            let path = try applied.tree.createUpdatePath(
                from: myLeaf, leafSecret: SecretBytes(try randomness(suite.hashLength)), signer: signer,
                groupContext: provisional, excluding: Set(applied.added.map(\.leaf)), randomness: randomness)
            (newTree, provisional, keys, commitSecret) = (path.tree, path.groupContext, path.privateKeys, path.commitSecret)
            (pathSecrets, updatePath) = (path.pathSecrets, path.updatePath)
        }
        let wireFormat = try outgoingHandshakeFormat()
        let framed = FramedContent(
            groupID: groupID, epoch: epoch, sender: .member(leafIndex: myLeaf.value), authenticatedData: [],
            content: .commit(Commit(proposals: chosen.list.map(\.proposalOrRef), path: updatePath)))
        var content = try AuthenticatedContent(
            signing: framed, wireFormat: wireFormat, context: groupContext, signer: signer, suite: suite, confirmationTag: [])
        let next = try nextEpoch(
            commit: content, provisional: provisional, initSecret: epochSecrets.initSecret, commitSecret: commitSecret,
            pskSecret: pskSecret)
        content.auth.confirmationTag = next.confirmationTag
        var sender = self
        let message = try sender.protectHandshake(content, randomness: randomness)
        let group = try sender.moving(to: next, tree: newTree, privateKeys: keys, reInit: applied.reInit)
        // Section 12.4.3.1: the Welcome needs `joiner_secret` and `welcome_secret`, which the
        // new state does not keep (section 9.2); it is sealed now from `next`, the last holder.
        let welcome = applied.added.isEmpty ? nil : try group.welcome(
            added: applied.added, secrets: next.secrets, pathSecrets: pathSecrets, psks: applied.psks, randomness: randomness)
        self = sender
        return CommitOutput(message: message, welcome: welcome, group: group, dropped: chosen.dropped)
    }

    /// The default of `psk`: no external PSK is known.
    public static func noExternalPSK(_: PreSharedKeyID) throws -> SecretBytes { throw MLSGroupError.unknownPSK }

    /// The proposal list of this member's commit (section 12.2): the cached proposals in cache
    /// order, then `byValue`. Proposals by value must be valid; a cached one that is not valid
    /// on its own, whose PSK is not available, or that the list's rules refuse is dropped, the
    /// rules judging by-value proposals first, then Removes, then Updates newest first, then the
    /// rest in order, so the ones kept are the ones section 12.2 prefers.
    func chooseProposals(
        byValue: [Proposal], psk: (PreSharedKeyID) throws -> SecretBytes
    ) throws -> (list: [ResolvedProposal], dropped: [[UInt8]]) {
        let me = Sender.member(leafIndex: myLeaf.value)
        let own = try byValue.map { proposal in
            ResolvedProposal(proposal: proposal, sender: me, proposalOrRef: .proposal(proposal), keyPackage: try validate(proposal, from: me))
        }
        for entry in own { if case .preSharedKey(let p) = entry.proposal { _ = try pskValue(p.psk, external: psk) } }
        var dropped: [[UInt8]] = []
        var cached: [ResolvedProposal] = []
        for entry in proposalCache {
            guard let valid = try? resolved(entry), entry.sender != me || entry.proposal.proposalType != .update,
                  approves(valid, committer: me)
            else {
                dropped.append(entry.reference)
                continue
            }
            if case .preSharedKey(let p) = entry.proposal, (try? pskValue(p.psk, external: psk)) == nil {
                dropped.append(entry.reference)
                continue
            }
            cached.append(valid)
        }
        while true {
            let list = cached + own
            guard let bad = try firstRefused(in: list) else { return (list, dropped) }
            guard case .reference(let reference) = bad.proposalOrRef else { throw try refusal(of: bad, in: list) }
            dropped.append(reference)
            cached.removeAll { $0.proposalOrRef == bad.proposalOrRef }
        }
    }

    /// The proposal a committer gives up first to make `list` valid, scanning in the order of
    /// preference of ``chooseProposals(byValue:psk:)``; nil if the list is valid.
    func firstRefused(in list: [ResolvedProposal]) throws -> ResolvedProposal? {
        func kind(_ e: ResolvedProposal) -> Int {
            if !e.isCached { return 0 }
            switch e.proposal.proposalType {
            case .remove: return 1
            case .update: return 2
            default: return 3
            }
        }
        let indexed = Array(list.enumerated())
        let order = indexed.sorted { a, b in
            let (ka, kb) = (kind(a.element), kind(b.element))
            if ka != kb { return ka < kb }
            // Updates: the most recent first; the rest in list order.
            return ka == 2 ? a.offset > b.offset : a.offset < b.offset
        }
        var check = ListCheck(group: self, committer: .member(leafIndex: myLeaf.value), list: list)
        for (_, entry) in order {
            do { try check.check(entry) } catch { return entry }
        }
        return nil
    }

    /// The error that refuses `entry` in `list`, for a proposal by value the caller gave.
    func refusal(of entry: ResolvedProposal, in list: [ResolvedProposal]) throws -> Error {
        var check = ListCheck(group: self, committer: .member(leafIndex: myLeaf.value), list: list)
        for other in list where other.proposalOrRef != entry.proposalOrRef { try? check.check(other) }
        do { try check.check(entry) } catch { return error }
        return MLSGroupError.unsupportedContent
    }

    /// The Welcome to this (new) epoch for `added` (section 12.4.3.1): a GroupInfo with the
    /// `ratchet_tree` extension signed by this member, and for each new member the epoch's
    /// `joiner_secret` (from `secrets`, this epoch's full secrets, which the state does not
    /// keep), the PSKs of the commit and the path secret of the lowest node of the committer's
    /// filtered direct path above it (none without a path).
    func welcome(
        added: [(leaf: LeafIndex, keyPackage: KeyPackage)], secrets epochSecrets: EpochSecrets,
        pathSecrets: [(node: NodeIndex, secret: SecretBytes)],
        psks: [PreSharedKeyID], randomness: (Int) throws -> [UInt8]
    ) throws -> Welcome {
        let info = try groupInfo(externalPub: false)
        let members = try added.map { member in
            let joiner = try tree.nodeIndex(member.leaf)
            let pathSecret = pathSecrets.first { TreeMath.isInSubtree(joiner, of: $0.node) }.map { PathSecret(pathSecret: $0.secret.bytes) }
            let secrets = GroupSecrets(joinerSecret: epochSecrets.joinerSecret.bytes, pathSecret: pathSecret, psks: psks)
            return (member.keyPackage, secrets, try randomness(MLSCipherSuite.encapsulationRandomnessLength))
        }
        return try Welcome(sealing: info, epochSecrets: epochSecrets, newMembers: members)
    }

    /// This epoch's GroupInfo (section 12.4.3), signed by this member: the GroupContext, the
    /// confirmation tag of the commit that began the epoch, the `ratchet_tree` extension (when
    /// `ratchetTree`), and with `externalPub` the `external_pub` extension that lets a new
    /// member join by external commit (section 12.4.3.2).
    public func groupInfo(externalPub: Bool = false, ratchetTree: Bool = true) throws -> GroupInfoIn {
        var extensions: [Extension] = []
        if ratchetTree {
            extensions.append(Extension(extensionType: RatchetTree.extensionType, extensionData: try tree.ratchetTree().mlsEncoded()))
        }
        if externalPub {
            let key = ExternalPub(externalPub: try epochSecrets.externalKeyPair().publicKey.wire)
            extensions.append(Extension(extensionType: ExternalPub.extensionType, extensionData: try key.mlsEncoded()))
        }
        var info = GroupInfoIn(
            groupContext: groupContext, extensions: extensions, confirmationTag: confirmationTag, signer: myLeaf.value, signature: [])
        info.signature = try suite.signWithLabel(signer, label: GroupInfoTBS.label, content: try info.toBeSigned.mlsEncoded())
        return info
    }
}
