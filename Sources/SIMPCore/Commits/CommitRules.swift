/// Which conversation a commit belongs to (docs/E2EE.md, Part 3): a group, or the one-to-one
/// conversation of two users. On the wire a conversation is named as a message's `toUser` names
/// it, from the asker's side: "#GROUP", or the other user's name.
public enum CommitConversation: Sendable, Hashable {
    case group(String)
    /// The one-to-one conversation of `user` with `peer`.
    case direct(user: String, peer: String)

    /// The conversation `name` means when `user` names it; nil for a name that is neither a
    /// group's address nor a user's name.
    public init?(_ name: String, asker user: String) {
        if let group = GroupName.addressed(by: name) {
            self = .group(group)
        } else if name.first != GroupName.marker, UserName.isValid(name) {
            self = .direct(user: user, peer: name)
        } else {
            return nil
        }
    }

    /// How the asker names it on the wire.
    public var name: String {
        switch self {
        case .group(let group): GroupName.address(group)
        case .direct(_, let peer): peer
        }
    }

    /// The hash tag of its Redis keys: the group's ("#NAME", as the group's other keys), or
    /// "@A+B" for two users, A before B (no user or group name holds '@' or '+'), the same
    /// from either side.
    public var tag: String {
        switch self {
        case .group(let group): GroupName.address(group)
        case .direct(let user, let peer): "@" + [user, peer].sorted().joined(separator: "+")
        }
    }
}

/// The bounds of commits and Welcomes (docs/PROTOCOL.md, Commits).
public enum CommitRules {
    /// The largest commit taken (an `MLSMessage`). Each device it adds takes a KeyPackage in it
    /// (an Add proposal by value, RFC 9420 section 12.1.1), about 205 bytes; its path encrypts
    /// to the resolution of its copath (section 7.6), which in a group whose members have not
    /// committed yet is every member, about 82 bytes each (docs/E2EE.md, Part 6).
    public static let maxCommitBytes = 16_384
    /// The largest Welcome taken: the commit's one Welcome (RFC 9420 section 12.4.3.1), which
    /// carries the ratchet tree (about 185 bytes a device) and a secret per added device (about
    /// 150). With the largest commit it is `submitBudget`, so a commit and its Welcome go in
    /// one request, and a joiner's Welcome with the largest commit after it in one page
    /// (`pageBudget`): about 240 devices (docs/E2EE.md, Part 6).
    public static let maxWelcomeBytes = 45_056
    /// Devices one commit adds (one `SubmitCommit`'s `added`); each also takes an Add proposal
    /// in the commit, so fewer than this fit in `maxCommitBytes` anyway.
    public static let maxAddedDevices = 128
    /// Bytes a `SubmitCommit` may give its commit, its Welcome and the devices it adds
    /// together: as a history page, the frame limit (65,536) less 4,096.
    public static let submitBudget = 61_440
    /// Bytes counted in `submitBudget` for an added device: its `AddedDevice` (a user of 32
    /// bytes, a device of 16) and framing.
    static let perAddedDeviceBytes = 56

    /// The largest GroupInfo a commit carries (RFC 9420 section 12.4.3, with the ratchet tree:
    /// about 185 bytes a device), as large as a Welcome, which holds the same tree.
    public static let maxGroupInfoBytes = 45_056

    /// Whether a commit of `commit` bytes with a Welcome of `welcome` bytes (0: none) for
    /// `added` devices, and a GroupInfo of `groupInfo` bytes (0: none), goes in one
    /// `SubmitCommit`: within each limit, and within one frame.
    public static func submitFits(commit: Int, welcome: Int, added: Int, groupInfo: Int = 0) -> Bool {
        commit <= maxCommitBytes && welcome <= maxWelcomeBytes && added <= maxAddedDevices && groupInfo <= maxGroupInfoBytes
            && commit + welcome + groupInfo + added * perAddedDeviceBytes <= submitBudget
    }
    /// Commits a conversation keeps: a device further behind than that cannot catch up
    /// through commits and must be added again (a new Welcome).
    public static let keptCommits = 1_000
    /// Commits in one `CommitPage`, and the bytes of its commits and Welcome together (as a
    /// history page: the frame limit less 4,096; a page holds one commit however large, and the
    /// largest commit with the largest Welcome is this much).
    public static let maxCommitsPerPage = 64
    public static let pageBudget = 61_440
    /// The highest epoch a conversation reaches (2^53 - 1): a commit is made on an epoch below
    /// it, a fetch starts at most at it (`BAD_REQUEST`). The store's scripts count epochs in Lua
    /// numbers (doubles), exact to 2^53, and the server adds 1 to a commit's epoch.
    public static let maxEpoch: UInt64 = (1 << 53) - 1

    /// Devices a conversation keeps a Welcome for (one each, the latest; a Welcome is stored
    /// once for all the devices its commit added): past it the oldest device's goes, and that
    /// device, if it had not joined yet, must be added again. A Welcome into an epoch whose
    /// commits are no longer kept goes anyway (its devices could not catch up), and a Welcome
    /// goes once no device is left that it is for.
    public static let maxKeptWelcomes = 2_048
    /// The peers of a user's encrypted one-to-one conversations the server remembers, to tell
    /// them of the user's key changes (a hint, as the KEYS datagram is; past it, one at random
    /// is forgotten).
    public static let maxRememberedPeers = 2_000

    /// The field that names a device's Welcome: "USER/DEVICE" (with a '/', never an epoch).
    public static func welcomeField(user: String, device: String) -> String { "\(user)/\(device)" }
}
