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
    /// The largest commit taken (an `MLSMessage`). A commit at 1,000 members is about 2 KB
    /// (docs/E2EE.md, Cost); the frame limit (65,536) bounds a commit and its Welcomes together.
    public static let maxCommitBytes = 16_384
    /// The largest Welcome taken.
    public static let maxWelcomeBytes = 16_384
    /// Welcomes in one `SubmitCommit`.
    public static let maxWelcomes = 32
    /// Bytes a `SubmitCommit` may give its commit and Welcomes together, with each Welcome's
    /// user and device: as a history page, the frame limit (65,536) less 4,096.
    public static let submitBudget = 61_440
    /// Bytes counted for a Welcome's user, device and framing in `submitBudget`.
    static let perWelcomeOverhead = 96

    /// Whether a commit of `commit` bytes with `welcomes` Welcomes of `welcome` bytes each goes
    /// in one `SubmitCommit`: within each limit, and within one frame.
    public static func submitFits(commit: Int, welcome: Int, welcomes: Int) -> Bool {
        commit <= maxCommitBytes && welcome <= maxWelcomeBytes && welcomes <= maxWelcomes
            && commit + welcomes * (welcome + perWelcomeOverhead) <= submitBudget
    }
    /// Commits a conversation keeps: a device further behind than that cannot catch up
    /// through commits and must be added again (a new Welcome).
    public static let keptCommits = 1_000
    /// Commits in one `CommitPage`, and the bytes of its commits and Welcome together (as a
    /// history page: the frame limit less 4,096).
    public static let maxCommitsPerPage = 64
    public static let pageBudget = 61_440
    /// The highest epoch a conversation reaches (2^53 - 1): a commit is made on an epoch below
    /// it, a fetch starts at most at it (`BAD_REQUEST`). The store's scripts count epochs in Lua
    /// numbers (doubles), exact to 2^53, and the server adds 1 to a commit's epoch.
    public static let maxEpoch: UInt64 = (1 << 53) - 1

    /// Welcomes a conversation keeps (one per device): past it the oldest goes, and its device,
    /// if it had not joined yet, must be added again. A Welcome into an epoch whose commits are
    /// no longer kept goes anyway (its device could not catch up).
    public static let maxKeptWelcomes = 2_048

    /// The field a device's Welcome is kept under: "USER/DEVICE".
    public static func welcomeField(user: String, device: String) -> String { "\(user)/\(device)" }
}
