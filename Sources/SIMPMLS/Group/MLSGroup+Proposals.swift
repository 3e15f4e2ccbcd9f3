/// Validating and applying a commit's proposals (RFC 9420 sections 12.1, 12.2, 12.3).
extension MLSGroup {
    /// A proposal of a commit, resolved (by value, or from this epoch's cache), with its sender
    /// and, for an Add, its validated key package.
    struct ResolvedProposal: Sendable {
        let proposal: Proposal
        let sender: Sender
        let proposalOrRef: ProposalOrRef
        let keyPackage: KeyPackage?
        /// Whether the proposal came from the cache (a committer drops such a proposal when it
        /// is invalid, instead of failing).
        var isCached: Bool { if case .reference = proposalOrRef { true } else { false } }
    }

    /// What applying a valid proposal list gives (section 12.3).
    struct AppliedProposals {
        var tree: PublicRatchetTree
        /// The new epoch's GroupContext extensions.
        var extensions: [Extension]
        var added: [(leaf: LeafIndex, keyPackage: KeyPackage)]
        var removed: Set<LeafIndex>
        /// The leaves whose members' Updates were applied.
        var updated: Set<LeafIndex>
        /// The PreSharedKey proposals' ids, in order.
        var psks: [PreSharedKeyID]
        var externalInit: ExternalInitProposal?
        var reInit: ReInitProposal?
        /// Whether the commit must carry a path (section 12.4): when it has no proposal or one
        /// of type Update, Remove, ExternalInit or GroupContextExtensions.
        var pathRequired: Bool
    }

    // MARK: one proposal (section 12.1)

    /// The checks of one proposal from `sender` that need no other proposal (section 12.1):
    /// who may send its type (12.1.8); an Add's key package validates for the suite (10.1) and
    /// its leaf's credential passes the validator; an Update comes from a member, its leaf node
    /// is of source `update`, signed for the group and leaf, with a new encryption key and the
    /// same signature key; a Remove names a member; a PSK's nonce is `KDF.Nh` bytes and a
    /// resumption PSK is of usage `application`; a ReInit's version is not lower. Returns an
    /// Add's key package.
    func validate(_ proposal: Proposal, from sender: Sender) throws -> KeyPackage? {
        try checkSenderMayPropose(proposal.proposalType, sender)
        switch proposal {
        case .add(let add):
            let keyPackage = try add.keyPackage.validate(suite: suite)
            try credentialValidator?.validate(keyPackage.leafNode.credential, signatureKey: keyPackage.signatureKey)
            return keyPackage
        case .update(let update):
            guard case .member(let index) = sender else { throw MLSGroupError.proposalNotAllowed(.update, sender: sender.senderType) }
            try validateUpdate(update.leafNode, at: LeafIndex(index))
        case .remove(let remove):
            guard tree.leaf(LeafIndex(remove.removed)) != nil else { throw MLSGroupError.invalidRemove(leaf: remove.removed) }
        case .preSharedKey(let psk):
            guard psk.psk.nonce.count == suite.hashLength else { throw MLSGroupError.invalidPSK }
            if case .resumption(let usage, _, _) = psk.psk.kind, usage != .application { throw MLSGroupError.invalidPSK }
        case .reInit(let reInit):
            guard reInit.version.rawValue >= groupContext.version.rawValue else { throw MLSGroupError.invalidReInit }
        case .externalInit, .groupContextExtensions:
            break
        }
        return nil
    }

    /// Section 12.1.8: an `external` sender proposes Add, Remove, PSK, ReInit or
    /// GroupContextExtensions; a `new_member_proposal` sender only an Add; a member anything but
    /// ExternalInit, which only an external commit carries.
    func checkSenderMayPropose(_ type: ProposalType, _ sender: Sender) throws {
        let allowed: Bool
        switch sender {
        case .member: allowed = type != .externalInit
        case .external: allowed = [.add, .remove, .preSharedKey, .reInit, .groupContextExtensions].contains(type)
        case .newMemberProposal: allowed = type == .add
        case .newMemberCommit: allowed = [.externalInit, .remove, .preSharedKey].contains(type)
        }
        guard allowed else { throw MLSGroupError.proposalNotAllowed(type, sender: sender.senderType) }
    }

    /// Section 12.1.2 with 7.3: an Update's leaf node replaces the leaf at `leaf`.
    func validateUpdate(_ leaf: LeafNode, at index: LeafIndex) throws {
        guard leaf.source == .update, let old = tree.leaf(index), old.encryptionKey != leaf.encryptionKey,
              old.signatureKey == leaf.signatureKey
        else { throw MLSGroupError.invalidUpdate(leaf: index.value) }
        let key = try leaf.verifySignature(suite: suite, group: LeafNodeTBS.Group(groupID: groupID, leafIndex: index.value))
        _ = try leaf.encryptionKey.validate(for: suite)
        try credentialValidator?.validate(leaf.credential, signatureKey: key)
        try checkCapabilities(of: leaf, extensions: groupContext.extensions, members: tree.memberLeaves.filter { $0 != index })
    }

    /// Section 7.3's group checks of a leaf joining or changing: its capabilities list what the
    /// `required_capabilities` extension of `extensions` requires, its credential type is
    /// supported by every leaf of `members`, and it supports theirs.
    func checkCapabilities(of leaf: LeafNode, extensions: [Extension], members: [LeafIndex]) throws {
        try checkCapabilities(of: leaf, extensions: extensions, others: members.compactMap { tree.leaf($0) })
    }

    /// ``checkCapabilities(of:extensions:members:)`` against the leaf nodes `others`.
    func checkCapabilities(of leaf: LeafNode, extensions: [Extension], others: [LeafNode]) throws {
        if let required = try Extension.decoded(RequiredCapabilities.extensionType, in: extensions, as: RequiredCapabilities.self) {
            guard required.isSupported(by: leaf.capabilities) else { throw MLSGroupError.unsupportedCapabilities }
        }
        let supported = Set(leaf.capabilities.credentials)
        for other in others {
            guard other.capabilities.credentials.contains(leaf.credential.credentialType),
                  supported.contains(other.credential.credentialType)
            else { throw MLSGroupError.unsupportedCapabilities }
        }
    }

    // MARK: the list (section 12.2)

    /// The rules of section 12.2 on a whole list, checked one proposal at a time in scanning
    /// order: each ``check(_:)`` throws if its proposal makes the list invalid given those
    /// before it and the list as a whole.
    struct ListCheck {
        let group: MLSGroup
        let committer: Sender
        let count: Int
        /// Leaves the list removes, and the members left once it is applied (Adds aside).
        let removedLeaves: Set<LeafIndex>
        let remaining: [LeafIndex]
        /// The new epoch's extensions: the GroupContextExtensions proposal's, or the current.
        let extensions: [Extension]
        /// Whether the list has a GroupContextExtensions proposal.
        let changesExtensions: Bool
        let addedLeaves: [LeafNode]
        /// The leaf nodes the list's Updates bring (section 12.1.2), by leaf.
        let updatedLeaves: [LeafIndex: LeafNode]
        var touched: Set<LeafIndex> = []
        var addedKeys: Set<[UInt8]> = []
        var pskIDs: [PreSharedKeyID] = []
        var extensionProposals = 0
        var externalInits = 0
        var removes = 0

        init(group: MLSGroup, committer: Sender, list: [ResolvedProposal]) {
            self.group = group
            self.committer = committer
            count = list.count
            var removed: Set<LeafIndex> = []
            var extensions: [Extension]?
            var added: [LeafNode] = []
            var updated: [LeafIndex: LeafNode] = [:]
            for entry in list {
                switch entry.proposal {
                case .update(let update): if case .member(let index) = entry.sender { updated[LeafIndex(index)] = update.leafNode }
                case .remove(let remove): removed.insert(LeafIndex(remove.removed))
                case .groupContextExtensions(let gce): extensions = extensions ?? gce.extensions
                case .add: if let keyPackage = entry.keyPackage { added.append(keyPackage.leafNode) }
                default: break
                }
            }
            removedLeaves = removed
            remaining = group.tree.memberLeaves.filter { !removed.contains($0) }
            self.extensions = extensions ?? group.groupContext.extensions
            changesExtensions = extensions != nil
            addedLeaves = added
            updatedLeaves = updated
        }

        /// The leaf nodes of the members after the commit, Adds aside: an Update's new leaf in
        /// place of its old one.
        func remainingLeaves(except leaf: LeafIndex? = nil) -> [LeafNode] {
            remaining.filter { $0 != leaf }.compactMap { updatedLeaves[$0] ?? group.tree.leaf($0) }
        }

        var isExternal: Bool { committer == .newMemberCommit }

        mutating func check(_ entry: ResolvedProposal) throws {
            let type = entry.proposal.proposalType
            try group.checkSenderMayPropose(type, isExternal ? .newMemberCommit : entry.sender)
            switch entry.proposal {
            case .add:
                guard let keyPackage = entry.keyPackage else { throw MLSGroupError.unsupportedContent }
                try checkAdd(keyPackage)
            case .update(let update):
                guard case .member(let index) = entry.sender, entry.sender != committer else {
                    throw MLSGroupError.updateByValue
                }
                guard touched.insert(LeafIndex(index)).inserted else { throw MLSGroupError.conflictingProposals(leaf: index) }
                // Sections 12.1.7, 12.2: the new leaf must fit the epoch after the commit, whose
                // extensions a GroupContextExtensions proposal of the same list may change (its
                // fit to the current ones was checked on its own, 12.1.2).
                let leaf = LeafIndex(index)
                try group.checkCapabilities(of: update.leafNode, extensions: extensions, others: remainingLeaves(except: leaf))
                if changesExtensions { try checkSupports(extensions, update.leafNode) }
            case .remove(let remove):
                let leaf = LeafIndex(remove.removed)
                removes += 1
                guard !isExternal || removes == 1 else { throw MLSGroupError.invalidExternalCommit }
                guard committer != .member(leafIndex: leaf.value), group.tree.leaf(leaf) != nil else {
                    throw MLSGroupError.invalidRemove(leaf: leaf.value)
                }
                guard touched.insert(leaf).inserted else { throw MLSGroupError.conflictingProposals(leaf: leaf.value) }
            case .preSharedKey(let psk):
                guard !pskIDs.contains(psk.psk) else { throw MLSGroupError.duplicatePSK }
                pskIDs.append(psk.psk)
            case .reInit:
                guard count == 1 else { throw MLSGroupError.invalidReInit }
            case .externalInit:
                externalInits += 1
                guard externalInits == 1 else { throw MLSGroupError.invalidExternalCommit }
            case .groupContextExtensions(let gce):
                extensionProposals += 1
                guard extensionProposals == 1 else { throw MLSGroupError.multipleGroupContextExtensions }
                try checkExtensions(gce.extensions)
            }
        }

        /// Section 12.2: one Add per client (by signature key), none of a client already in
        /// the group that the list does not remove; section 7.3 against the new extensions.
        mutating func checkAdd(_ keyPackage: KeyPackage) throws {
            let key = keyPackage.leafNode.signatureKey.bytes
            guard addedKeys.insert(key).inserted,
                  !remaining.contains(where: { group.tree.leaf($0)?.signatureKey.bytes == key })
            else { throw MLSGroupError.duplicateAdd }
            try group.checkCapabilities(of: keyPackage.leafNode, extensions: extensions, others: remainingLeaves())
        }

        /// Section 12.1.7: every member after the commit (those added included, those removed
        /// not) supports the `required_capabilities` and every extension type not of section 7.2.
        /// A member the list updates is judged by its new leaf, when its Update is checked (so
        /// a committer drops that Update, not the extensions).
        func checkExtensions(_ extensions: [Extension]) throws {
            _ = try ExternalSender.list(in: extensions)
            let kept = remaining.filter { updatedLeaves[$0] == nil }.compactMap { group.tree.leaf($0) }
            for leaf in kept + addedLeaves { try checkSupports(extensions, leaf) }
        }

        /// Section 12.1.7 for one leaf: it supports the `required_capabilities` of `extensions`
        /// and every extension type of `extensions` not of section 7.2's defaults.
        func checkSupports(_ extensions: [Extension], _ leaf: LeafNode) throws {
            let required = try Extension.decoded(RequiredCapabilities.extensionType, in: extensions, as: RequiredCapabilities.self)
            let types = Set(extensions.map(\.extensionType)).subtracting(PublicRatchetTree.defaultExtensionTypes)
            guard required?.isSupported(by: leaf.capabilities) ?? true, types.isSubset(of: Set(leaf.capabilities.extensions)) else {
                throw MLSGroupError.unsupportedCapabilities
            }
        }

        /// What can only be judged once every proposal is seen: an external commit has exactly
        /// one ExternalInit.
        func finish() throws {
            guard !isExternal || externalInits == 1 else { throw MLSGroupError.invalidExternalCommit }
        }
    }

    /// Section 12.2 for a received commit: the list is valid or the commit is refused.
    func checkList(_ list: [ResolvedProposal], committer: Sender) throws {
        var check = ListCheck(group: self, committer: committer, list: list)
        for entry in list { try check.check(entry) }
        try check.finish()
    }

    // MARK: applying (section 12.3)

    /// Applies a valid list in the order of section 12.3: GroupContextExtensions, Updates,
    /// Removes, Adds (in list order), then PSKs, ExternalInit and ReInit noted. The tree's keys
    /// stay unique.
    func apply(_ list: [ResolvedProposal]) throws -> AppliedProposals {
        var applied = AppliedProposals(
            tree: tree, extensions: groupContext.extensions, added: [], removed: [], updated: [], psks: [], externalInit: nil,
            reInit: nil, pathRequired: list.isEmpty)
        for entry in list {
            switch entry.proposal {
            case .groupContextExtensions(let gce): applied.extensions = gce.extensions
            case .preSharedKey(let psk): applied.psks.append(psk.psk)
            case .externalInit(let externalInit): applied.externalInit = externalInit
            case .reInit(let reInit): applied.reInit = reInit
            default: break
            }
            let type = entry.proposal.proposalType
            if [.update, .remove, .externalInit, .groupContextExtensions].contains(type) { applied.pathRequired = true }
        }
        for entry in list {
            guard case .update(let update) = entry.proposal, case .member(let index) = entry.sender else { continue }
            try applied.tree.update(update.leafNode, at: LeafIndex(index))
            applied.updated.insert(LeafIndex(index))
        }
        for entry in list {
            guard case .remove(let remove) = entry.proposal else { continue }
            try applied.tree.remove(LeafIndex(remove.removed))
            applied.removed.insert(LeafIndex(remove.removed))
        }
        for entry in list {
            guard case .add = entry.proposal, let keyPackage = entry.keyPackage else { continue }
            applied.added.append((try applied.tree.add(keyPackage.leafNode), keyPackage))
        }
        try applied.tree.verifyUniqueKeys()
        return applied
    }

    // MARK: resolving

    /// A received commit's proposals: by value (their sender the committer) or from this
    /// epoch's cache, each valid on its own (section 12.1). An Update by value is invalid
    /// (section 12.2: a committer's own Update is not committed, another's comes by reference),
    /// and an external commit carries no reference (section 12.4.3.2).
    func resolve(_ proposals: [ProposalOrRef], committer: Sender) throws -> [ResolvedProposal] {
        try proposals.map { proposalOrRef in
            switch proposalOrRef {
            case .proposal(let proposal):
                if case .update = proposal { throw MLSGroupError.updateByValue }
                let keyPackage = try validate(proposal, from: committer)
                return ResolvedProposal(proposal: proposal, sender: committer, proposalOrRef: proposalOrRef, keyPackage: keyPackage)
            case .reference(let reference):
                guard committer != .newMemberCommit else { throw MLSGroupError.invalidExternalCommit }
                guard let cached = proposalCache.first(where: { $0.reference == reference }) else {
                    throw MLSGroupError.unknownProposalReference
                }
                return try resolved(cached)
            }
        }
    }

    /// A cached proposal, checked again against the current state (an Add's key package is
    /// needed validated).
    func resolved(_ cached: CachedProposal) throws -> ResolvedProposal {
        ResolvedProposal(
            proposal: cached.proposal, sender: cached.sender, proposalOrRef: .reference(cached.reference),
            keyPackage: try validate(cached.proposal, from: cached.sender))
    }

    // MARK: the next epoch

    /// The GroupContext of the next epoch before its transcript hash is known (section 12.4.1's
    /// provisional GroupContext): epoch + 1, the tree hash of `tree`, the new `extensions`.
    func provisionalContext(tree: PublicRatchetTree, extensions: [Extension]) throws -> GroupContext {
        guard epoch < UInt64.max else { throw MLSGroupError.epochExhausted }
        var context = groupContext
        context.epoch = epoch + 1
        context.treeHash = try tree.treeHash()
        context.extensions = extensions
        return context
    }

    /// The value of a PSK a commit injects (section 8.4): a resumption PSK of this group from
    /// this epoch or a kept past one (section 8.6); any other from `external`.
    func pskValue(_ id: PreSharedKeyID, external: (PreSharedKeyID) throws -> SecretBytes) throws -> PreSharedKey {
        if case .resumption(_, let group, let pskEpoch) = id.kind, group == groupID {
            if pskEpoch == epoch { return PreSharedKey(id: id, secret: epochSecrets.resumptionPSK) }
            guard let kept = resumptionPSKs.first(where: { $0.epoch == pskEpoch }) else { throw MLSGroupError.unknownPSK }
            return PreSharedKey(id: id, secret: kept.secret)
        }
        return PreSharedKey(id: id, secret: try external(id))
    }

    /// `psk_secret` of the PSKs `ids` in order; nil without any (all zero, section 8.4).
    func pskSecret(_ ids: [PreSharedKeyID], external: (PreSharedKeyID) throws -> SecretBytes) throws -> SecretBytes? {
        ids.isEmpty ? nil : try suite.pskSecret(try ids.map { try pskValue($0, external: external) })
    }

    /// The next epoch from a commit (sections 8, 8.2, 12.4.1, 12.4.2): the confirmed transcript
    /// hash over the commit's content and signature, the epoch's secrets from `initSecret` (this
    /// epoch's, or an external commit's), `commitSecret` (nil: no path) and `pskSecret`, the
    /// confirmation tag and the interim transcript hash. The commit's `auth.confirmationTag` is
    /// not read.
    func nextEpoch(
        commit: AuthenticatedContent, provisional: GroupContext, initSecret: SecretBytes, commitSecret: SecretBytes?,
        pskSecret: SecretBytes?
    ) throws -> NextEpoch {
        try NextEpoch(
            suite: suite, commit: commit, provisional: provisional, interimBefore: interimTranscriptHash, initSecret: initSecret,
            commitSecret: commitSecret, pskSecret: pskSecret)
    }
}

/// The GroupContext, secrets and transcript hashes of the epoch a commit begins (sections 8,
/// 8.2).
struct NextEpoch {
    let context: GroupContext
    let secrets: EpochSecrets
    let confirmationTag: [UInt8]
    let interim: [UInt8]

    init(
        suite: MLSCipherSuite, commit: AuthenticatedContent, provisional: GroupContext, interimBefore: [UInt8],
        initSecret: SecretBytes, commitSecret: SecretBytes?, pskSecret: SecretBytes?
    ) throws {
        var context = provisional
        context.confirmedTranscriptHash = suite.hash(interimBefore + (try TranscriptHashes.confirmedInput(commit)))
        secrets = try EpochSecrets(
            suite: suite, initSecret: initSecret, commitSecret: commitSecret, pskSecret: pskSecret, groupContext: context)
        confirmationTag = secrets.confirmationTag(confirmedTranscriptHash: context.confirmedTranscriptHash)
        interim = try TranscriptHashes.interim(confirmed: context.confirmedTranscriptHash, confirmationTag: confirmationTag, suite: suite)
        self.context = context
    }
}
