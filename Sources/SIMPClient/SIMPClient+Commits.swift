import Foundation
import SIMPCore

/// A commit's Welcome to send with it (RFC 9420 section 12.4.3.1): one for every device the
/// commit adds, each finding its own secrets in it by its KeyPackageRef. The server stores it
/// once and hands it to those devices only once the commit is stored.
public struct CommitWelcome: Sendable, Equatable {
    /// An `MLSMessage` of wire format `mls_welcome`: opaque to the server.
    public var welcome: [UInt8]
    /// The devices the commit adds: at least one, each once.
    public var added: [AddedDevice]

    public init(_ welcome: [UInt8], for added: [AddedDevice]) {
        self.welcome = welcome
        self.added = added
    }
}

/// A device a commit adds: the one the server's rules check (`CommitRequest`).
public typealias AddedDevice = CommitRequest.AddedDevice

/// A commit in a conversation's order, as the server stored it.
public struct StoredCommit: Sendable, Equatable {
    /// The epoch it was made on (it led to `epoch + 1`).
    public var epoch: UInt64
    /// The commit's `MLSMessage`, as submitted.
    public var commit: [UInt8]
    /// Who submitted it, as the server saw the session (the committer's leaf in the commit is
    /// what a member checks).
    public var fromUser: String
    public var fromDevice: String
    /// When the server stored it (ms since the epoch, by the server's clock).
    public var serverTime: Int64
}

/// A Welcome that joins this device to a conversation at `epoch`.
public struct StoredWelcome: Sendable, Equatable {
    public var epoch: UInt64
    public var welcome: [UInt8]
    public var fromUser: String
    public var fromDevice: String
    public var serverTime: Int64
}

/// The GroupInfo of a conversation's epoch, kept with the commit that led to it: a device with no
/// state joins that epoch from it by an external commit (RFC 9420 section 12.4.3.2).
public struct StoredGroupInfo: Sendable, Equatable {
    /// The epoch it describes.
    public var epoch: UInt64
    /// An `MLSMessage` of wire format `mls_group_info`, as its committer submitted it.
    public var groupInfo: [UInt8]
    public var fromUser: String
    public var fromDevice: String
    public var serverTime: Int64
}

/// A page of a conversation's commits (`fetchCommits`).
public struct CommitPage: Sendable, Equatable {
    /// The conversation as asked for: "#GROUP" or the other user's name.
    public var conversation: String
    /// The conversation's epoch now: the commits stored in its order.
    public var epoch: UInt64
    /// Consecutive epochs, oldest first.
    public var commits: [StoredCommit]
    /// This device's Welcome, for a fetch with `join` when the device has one (the page then
    /// starts at its epoch): join with it, then process `commits`.
    public var welcome: StoredWelcome?
    /// The conversation's latest GroupInfo, for a fetch with `external` when it keeps one (the
    /// page then starts at its epoch).
    public var groupInfo: StoredGroupInfo? = nil
    /// More commits follow: fetch again from the epoch after the last one here.
    public var more: Bool
}

/// A conversation's MLS commits (docs/PROTOCOL.md, "Commits"; docs/E2EE.md, Part 3): one order
/// per conversation, the first commit for an epoch wins.
extension SIMPClient {
    /// Submits a commit made on `epoch` to `conversation` ("#GROUP", or the other user's name of
    /// a one-to-one conversation), with its Welcome for the devices it adds, if it adds any. Returns the
    /// conversation's new epoch (`epoch + 1`). When another commit won `epoch`, throws a
    /// `ClientError` of code `.commitConflict` and nothing was stored: fetch the commits from
    /// `epoch`, process them, and make the commit again on the new epoch. A commit that is not an
    /// MLS public commit from a member framed on `epoch` for the conversation's MLS group, or a
    /// Welcome that does not decode or does not hold one secret per device in `added`, is
    /// `.invalidCommit` (nothing stored). `groupInfo`: the GroupInfo of the epoch the commit
    /// leads to (an `MLSMessage` `mls_group_info` with `external_pub` and the ratchet tree), kept
    /// for devices that rejoin by external commit.
    public func submitCommit(_ commit: [UInt8], to conversation: String, epoch: UInt64,
                             welcome: CommitWelcome? = nil, groupInfo: [UInt8]? = nil) async throws(ClientError) -> UInt64 {
        var submit = Simp_SubmitCommit()
        submit.conversation = conversation
        submit.epoch = epoch
        submit.commit = Data(commit)
        if let groupInfo { submit.groupInfo = Data(groupInfo) }
        if let welcome {
            submit.welcome = Data(welcome.welcome)
            submit.added = welcome.added.map { device in
                var wire = Simp_AddedDevice()
                wire.user = device.user
                wire.device = device.device
                return wire
            }
        }
        return try await ask(.submitCommit(submit), "a commit") { body in
            if case .commitStored(let stored)? = body { stored.epoch } else { nil }
        }
    }

    /// `conversation`'s commits from `fromEpoch` on, in order (a page: `more` says whether to
    /// ask again). `join`: this device has no state for the conversation yet: the page carries
    /// its Welcome, when it has one, and starts at the Welcome's epoch (`fromEpoch` is then not
    /// read). Without it no commit is skipped and no Welcome given. `external`: this device has
    /// no state and rejoins by an external commit: the page carries the conversation's latest
    /// GroupInfo, when it keeps one, and starts at its epoch.
    public func fetchCommits(in conversation: String, fromEpoch: UInt64, join: Bool = false,
                             external: Bool = false) async throws(ClientError) -> CommitPage {
        var fetch = Simp_FetchCommits()
        fetch.conversation = conversation
        fetch.fromEpoch = fromEpoch
        fetch.join = join
        fetch.external = external
        return try await ask(.fetchCommits(fetch), "a commit fetch") { body in
            guard case .commitPage(let page)? = body else { return nil }
            return CommitPage(
                conversation: page.conversation, epoch: page.epoch,
                commits: page.commits.map {
                    StoredCommit(epoch: $0.epoch, commit: Array($0.commit), fromUser: $0.fromUser, fromDevice: $0.fromDevice,
                                 serverTime: $0.serverTime)
                },
                welcome: page.hasWelcome
                    ? StoredWelcome(epoch: page.welcome.epoch, welcome: Array(page.welcome.welcome), fromUser: page.welcome.fromUser,
                                    fromDevice: page.welcome.fromDevice, serverTime: page.welcome.serverTime)
                    : nil,
                groupInfo: page.hasGroupInfo
                    ? StoredGroupInfo(epoch: page.groupInfo.epoch, groupInfo: Array(page.groupInfo.groupInfo), fromUser: page.groupInfo.fromUser,
                                      fromDevice: page.groupInfo.fromDevice, serverTime: page.groupInfo.serverTime)
                    : nil,
                more: page.more)
        }
    }
}
