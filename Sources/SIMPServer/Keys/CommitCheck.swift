import SIMPCore
import SIMPMLS

/// A submitted commit and its Welcome as received: nothing in them is trusted. `checked` is the
/// only way to a `CommitFraming` (docs/E2EE.md, Part 3, "What the server reads of a commit").
///
/// The server cannot verify a commit: its signature needs the committer's leaf (the ratchet
/// tree), its membership tag the epoch's membership key, its confirmation tag the next epoch's
/// secrets, and it holds none of them. It reads only the framing every member reads first
/// (RFC 9420 section 6), with SIMPMLS's decoders, and refuses a commit that every member would
/// refuse for it: stored on the current epoch, such a commit would stop every later one.
struct UncheckedCommit: Sendable, Equatable {
    let commit: [UInt8]
    /// The commit's one Welcome, if it adds devices.
    let welcome: [UInt8]?
    /// How many devices the submit says the commit adds (`added`): the Welcome holds one
    /// `EncryptedGroupSecrets` for each.
    let added: Int
    /// The GroupInfo of the epoch the commit leads to, if given.
    var groupInfo: [UInt8]? = nil

    /// Why a commit was refused (`INVALID_COMMIT`, the reason naming what is wrong).
    struct Problem: Error, Equatable, Sendable {
        var reason: String
        var code: Simp_ErrorCode { .invalidCommit }
    }

    /// The commit's framing, if `commit` decodes whole as an `MLSMessage` (RFC 9420 section 6)
    /// of wire format `mls_public_message` (SIMP's commits are public messages:
    /// `MLSGroupPolicy.handshakeWireFormat`) whose `FramedContent` is of content type `commit`,
    /// from a `member` sender, or a `new_member_commit` with a path (a device rejoining by
    /// external commit, section 12.4.3.2), framed on `epoch` (the epoch it is submitted for); the
    /// Welcome decodes whole as an `MLSMessage` of wire format `mls_welcome` with as many
    /// `EncryptedGroupSecrets` as `added`; and the GroupInfo decodes whole as an `MLSMessage` of
    /// wire format `mls_group_info` of the commit's group and the epoch after. Decoding only: no
    /// signature, tag or leaf index is checked (that needs the group's state), nor which key
    /// packages the secrets are for, and the group id is compared by the store, which records
    /// the first one. A path's leaf node is read out (`CommitFraming.pathLeaf`) for the flow to
    /// compare with the device's certificate; a leaf without a basic credential is refused here.
    func checked(epoch: UInt64) throws(Problem) -> CommitFraming {
        let content: FramedContent
        switch try? MLSMessage(mlsDecoding: commit) {
        case .publicMessage(let message)?: content = message.content
        case nil: throw Problem(reason: "the commit does not decode as an MLSMessage (RFC 9420 section 6)")
        case let other?: throw Problem(reason: "the commit is an MLSMessage of wire format \(Self.name(other.wireFormat)), not mls_public_message")
        }
        guard content.contentType == .commit else {
            throw Problem(reason: "the commit's content type is \(Self.name(content.contentType)), not commit")
        }
        let leaf: UInt32?
        switch content.sender {
        case .member(let index): leaf = index
        case .newMemberCommit: leaf = nil
        default:
            throw Problem(reason: "the commit's sender is of type \(Self.name(content.sender.senderType)), not member or new_member_commit")
        }
        guard content.epoch == epoch else {
            throw Problem(reason: "the commit is framed on epoch \(content.epoch), not on epoch \(epoch) it is submitted for")
        }
        // One Welcome for every device the commit adds (RFC 9420 section 12.4.3.1): decoded once.
        if let welcome {
            guard case .welcome(let decoded)? = try? MLSMessage(mlsDecoding: welcome) else {
                throw Problem(reason: "the Welcome does not decode as an MLSMessage of wire format mls_welcome")
            }
            // It holds one EncryptedGroupSecrets per new member (RFC 9420 section 12.4.3.1).
            // Stored, a Welcome with fewer would replace each listed device's pending Welcome
            // with one some of them cannot join from; the server cannot tell which secret is
            // whose (a KeyPackageRef needs the KeyPackage), so it compares the counts.
            guard decoded.secrets.count == added else {
                throw Problem(reason: "the Welcome holds \(decoded.secrets.count) EncryptedGroupSecrets for \(added) added devices: "
                              + "one per new member (RFC 9420 section 12.4.3.1)")
            }
        }
        try checkGroupInfo(groupID: content.groupID, epoch: content.epoch)
        var pathLeaf: CommitFraming.PathLeaf?
        if case .commit(let body) = content.content, let path = body.path {
            guard case .basic(let identity) = path.leafNode.credential else {
                throw Problem(reason: "the commit's path leaf holds no basic credential (SIMP's credentials are basic: USER/DEVICE)")
            }
            // Signed over the group and the committer's leaf (section 7.2, LeafNodeTBS), by the
            // key it names: every member checks that too. SIMP's suites sign with Ed25519. An
            // external joiner's leaf index is the tree's leftmost blank leaf (section 12.4.3.2),
            // which the server, without the tree, does not know: its members check that one.
            if let leaf {
                let group = LeafNodeTBS.Group(groupID: content.groupID, leafIndex: leaf)
                guard (try? path.leafNode.verifySignature(suite: .x25519AES128GCMSHA256Ed25519, group: group)) != nil else {
                    throw Problem(reason: "the commit's path leaf signature does not verify under the key it names (RFC 9420 section 7.2)")
                }
            }
            pathLeaf = CommitFraming.PathLeaf(identity: identity, signatureKey: path.leafNode.signatureKey.bytes)
        } else if leaf == nil {
            throw Problem(reason: "an external commit has a path (RFC 9420 section 12.4.3.2)")
        }
        return CommitFraming(groupID: content.groupID, epoch: content.epoch, leaf: leaf, pathLeaf: pathLeaf)
    }

    /// The GroupInfo, if given, decodes whole as a GroupInfo (RFC 9420 section 12.4.3) of the
    /// commit's group at the epoch after the commit's: a joiner's external commit made on any
    /// other would be refused. Its signature needs the signer's leaf in the tree it carries,
    /// which the joiner checks (section 12.4.3.1); the server does not.
    private func checkGroupInfo(groupID: [UInt8], epoch: UInt64) throws(Problem) {
        guard let groupInfo else { return }
        guard case .groupInfo(let info)? = try? MLSMessage(mlsDecoding: groupInfo) else {
            throw Problem(reason: "the GroupInfo does not decode as an MLSMessage of wire format mls_group_info")
        }
        guard info.groupContext.groupID == groupID, info.groupContext.epoch == epoch + 1 else {
            throw Problem(reason: "the GroupInfo is of another group, or of epoch \(info.groupContext.epoch), "
                          + "not the epoch the commit leads to (\(epoch + 1))")
        }
    }

    /// `checked(epoch:)` as a result.
    func checking(epoch: UInt64) -> Result<CommitFraming, Problem> {
        Result { () throws(Problem) in try checked(epoch: epoch) }
    }

    /// RFC 9420's names (section 6, section 17.2).
    private static func name(_ type: ContentType) -> String {
        switch type {
        case .application: "application"
        case .proposal: "proposal"
        case .commit: "commit"
        }
    }

    private static func name(_ type: SenderType) -> String {
        switch type {
        case .member: "member"
        case .external: "external"
        case .newMemberProposal: "new_member_proposal"
        case .newMemberCommit: "new_member_commit"
        }
    }

    private static func name(_ format: WireFormat) -> String {
        switch format {
        case .publicMessage: "mls_public_message"
        case .privateMessage: "mls_private_message"
        case .welcome: "mls_welcome"
        case .groupInfo: "mls_group_info"
        case .keyPackage: "mls_key_package"
        }
    }
}

/// What a commit that passed `UncheckedCommit.checked` is framed for: its group, its epoch and
/// its sender's leaf (unchecked: the server has no tree; nil for an external commit).
struct CommitFraming: Sendable, Equatable {
    let groupID: [UInt8]
    let epoch: UInt64
    let leaf: UInt32?
    /// The committer's new leaf, when the commit has a path (RFC 9420 section 12.4.1): the
    /// submitting device's, which its members check against its certificate; the server does
    /// too (`CommitFlow.checked`), so that a commit they would all refuse is never stored.
    let pathLeaf: PathLeaf?

    struct PathLeaf: Sendable, Equatable {
        /// The basic credential's identity, "USER/DEVICE".
        let identity: [UInt8]
        let signatureKey: [UInt8]
    }

    fileprivate init(groupID: [UInt8], epoch: UInt64, leaf: UInt32?, pathLeaf: PathLeaf?) {
        self.groupID = groupID
        self.epoch = epoch
        self.leaf = leaf
        self.pathLeaf = pathLeaf
    }
}
