import Foundation
import SIMPCore

/// A commit request, step by step (docs/E2EE.md, Part 3: commits and their order): what to
/// read, what to store, what the asker is answered. Pure: the worker carries each step out and
/// feeds its result back; the time is the request's, passed in. The order itself is the store
/// script's: it stores a commit only if the conversation is still at the commit's epoch, and
/// its Welcome in the same script, so a Welcome of a commit that lost is never handed out.
///
/// Who may submit: a device of a member of the conversation (checked by the script, with the
/// group's members in the same slot) whose user's directory holds a certificate for it, by
/// name (read first: a device revoked between the read and the store still gets its commit in),
/// and, when the commit has a path, whose new leaf is that device's under the certified key.
/// Members check every new leaf against the certificates themselves, current and revoked
/// (docs/E2EE.md, Part 2, "Revoked devices"), and remove a revoked device's leaf by their next
/// commit.
///
/// What is submitted: a commit framed (RFC 9420 section 6) as a member's public commit on the
/// epoch it is submitted for, with a Welcome that decodes and holds one secret per added device
/// (`UncheckedCommit`, decoded off the event loop before any read), and framed for the
/// conversation's MLS group: the group id of its first commit stored, which the store script
/// records and compares (`INVALID_COMMIT` otherwise, nothing stored).
struct CommitFlow: Sendable {
    /// The request, checked (`CommitRequest.checking`).
    typealias Request = CommitRequest
    typealias AddedDevice = CommitRequest.AddedDevice

    /// A commit's Welcome as the store keeps it: once, the `StoredWelcome` under the epoch it
    /// joins at, and for each device it is for that epoch under the device's field
    /// "USER/DEVICE" (the script reads the epoch without decoding anything). The script takes
    /// that epoch from its own count (the conversation's new epoch), never from here: the
    /// Welcome's field and the score its count of devices uses are one number.
    struct KeptWelcome: Sendable, Equatable {
        /// The `StoredWelcome`.
        var value: [UInt8]
        /// The devices it is for: at least one (`CommitRequest` takes no Welcome without them;
        /// the script stores none without them).
        var devices: [Device]

        /// A device a kept Welcome is for: its user (a group's script checks it is a member) and
        /// its field, "USER/DEVICE" (`CommitRules.welcomeField`).
        struct Device: Sendable, Equatable {
            var user: String
            var field: String
        }
    }

    /// What the read before a submit found.
    struct Submitter: Sendable, Equatable {
        /// The key the submitting device's certificate in its user's directory certifies; nil
        /// when it has none.
        var certifiedKey: [UInt8]?
        /// For a one-to-one conversation, the other user exists.
        var peerExists: Bool
        /// The first added device that has no device certificate in its user's directory.
        var uncertifiedAdded: AddedDevice? = nil
    }

    enum Next: Sendable, Equatable {
        /// Decode the commit's framing and its Welcome (`UncheckedCommit.checking`) off the
        /// event loop (a frame's worth of small MLS vectors takes milliseconds); comes back as
        /// `framed(_:)`.
        case checkFraming(UncheckedCommit, epoch: UInt64)
        /// Whether `device` of `user` is certified, whether `peer` (when set) exists, and whether
        /// each added device is certified; comes back, with `framing`, as `checked(_:framing:)`.
        case readSubmitter(user: String, device: String, peer: String?, added: [AddedDevice], framing: CommitFraming)
        /// Store `entry` as the commit made on `epoch` if that is still the conversation's
        /// epoch, with its Welcome, keeping the last `kept` commits; comes back as `stored(_:)`.
        /// `group`: the commit's framed MLS group id, which must be the conversation's recorded
        /// one (recorded now when none is).
        /// `groupInfo`: the `StoredGroupInfo` of the epoch the commit leads to, kept in place of
        /// the last (nil: none is kept until a commit has one).
        case store(CommitConversation, user: String, epoch: UInt64, entry: [UInt8], welcome: KeptWelcome?, kept: Int, group: [UInt8],
                   groupInfo: [UInt8]?)
        /// Read the commits from `fromEpoch` among the last `kept`, or (a join: `welcomeField`
        /// set) the Welcome under `welcomeField` and the commits from its epoch, or (`external`)
        /// the latest GroupInfo and the commits from its epoch; comes back as `fetched(_:)`.
        case fetch(CommitConversation, user: String, welcomeField: String?, external: Bool, fromEpoch: UInt64, maxCommits: Int, budget: Int,
                   kept: Int)
        case answer(Simp_Envelope.OneOf_Body)
        case refuse(Simp_ErrorCode, String)
    }

    /// What the store script answered.
    enum Stored: Sendable, Equatable {
        /// Stored: the conversation is at `epoch` now.
        case stored(epoch: UInt64)
        /// Stored on the master, but fewer replicas than asked for (`--redis-min-replicas`)
        /// confirmed it in time: a failover may lose it.
        case unreplicated(epoch: UInt64, confirmed: Int64)
        /// Not stored: the conversation is at `current`, not at the commit's epoch.
        case conflict(current: UInt64)
        case notAMember
        case noSuchGroup
        /// An added device's user is not a member.
        case welcomeToNonMember(String)
        /// The commit is framed for another MLS group than the conversation's recorded one.
        case otherGroup
    }

    /// What the fetch script answered.
    enum Fetched: Sendable, Equatable {
        /// `welcome`, when set (only for a join), is the device's `StoredWelcome`; `groupInfo`
        /// (only for an external fetch) the latest `StoredGroupInfo`; `commits` the stored
        /// `StoredCommit`s, consecutive, oldest first.
        case page(current: UInt64, welcome: [UInt8]?, groupInfo: [UInt8]? = nil, commits: [[UInt8]], more: Bool)
        case notAMember
        case noSuchGroup
    }

    let request: Request
    let user: String
    let device: String
    let nowMillis: Int64

    init(_ request: Request, user: String, device: String, nowMillis: Int64) {
        self.request = request
        self.user = user
        self.device = device
        self.nowMillis = nowMillis
    }

    /// The request as the flow takes it, or why it is refused before anything runs
    /// (`CommitRequest.checking`, which the fuzz target runs too).
    static func request(from body: Simp_Envelope.OneOf_Body, user: String) -> Result<Request, FlowRefusal>? {
        CommitRequest.checking(body, asker: user)?.mapError { FlowRefusal($0.code, $0.reason) }
    }

    /// How much of a stored `StoredCommit` names the commit, its epoch and its submitter: all
    /// but the server time (field 5, serialized last), so a retry of the same commit is found
    /// stored. Bytes that are no `StoredCommit` are all of it.
    static func sameCommitLength(_ entry: [UInt8]) -> Int {
        guard var commit = try? Simp_StoredCommit(serializedBytes: entry) else { return entry.count }
        commit.serverTime = 0
        guard let named: [UInt8] = try? commit.serializedBytes(), entry.starts(with: named) else { return entry.count }
        return named.count
    }

    /// The first step.
    func start() -> Next {
        switch request {
        case .submit(_, let epoch, let commit, let welcome, let groupInfo):
            return .checkFraming(UncheckedCommit(commit: commit, welcome: welcome?.bytes, added: welcome?.added.count ?? 0, groupInfo: groupInfo),
                                 epoch: epoch)
        case .fetch(let conversation, let from, let join, let external):
            return .fetch(conversation, user: user, welcomeField: join ? CommitRules.welcomeField(user: user, device: device) : nil,
                          external: external, fromEpoch: from, maxCommits: CommitRules.maxCommitsPerPage, budget: CommitRules.pageBudget,
                          kept: CommitRules.keptCommits)
        }
    }

    /// The commit's framing, or why every member would refuse it: then refused before anything
    /// is read.
    func framed(_ result: Result<CommitFraming, UncheckedCommit.Problem>) -> Next {
        guard case .submit(let conversation, _, _, let welcome, _) = request else { return .refuse(.internal, "commit framing for no submit") }
        let framing: CommitFraming
        switch result {
        case .success(let checked): framing = checked
        case .failure(let problem): return .refuse(problem.code, problem.reason)
        }
        let added = welcome?.added ?? []
        if case .direct(_, let peer) = conversation {
            return .readSubmitter(user: user, device: device, peer: peer, added: added, framing: framing)
        }
        return .readSubmitter(user: user, device: device, peer: nil, added: added, framing: framing)
    }

    /// The submitter read's result, with the framing `framed(_:)` found.
    func checked(_ submitter: Submitter, framing: CommitFraming) -> Next {
        guard case .submit(let conversation, let epoch, let commit, let welcome, let groupInfo) = request else {
            return .refuse(.internal, "commit read for no submit")
        }
        // Checked with the request already; a flow made from an unchecked one must not trap either.
        guard epoch < CommitRules.maxEpoch else { return .refuse(.badRequest, "a commit is made on an epoch below \(CommitRules.maxEpoch)") }
        guard submitter.peerExists else { return .refuse(.unknownUser, "no such user: \(conversation.name)") }
        guard let certifiedKey = submitter.certifiedKey else {
            return .refuse(.deviceNotCertified, "\(device) has no device certificate stored: publish one before committing")
        }
        // The committer's new leaf is checked by every member against the device's certificate;
        // one they would all refuse, stored, would stop the conversation's order (docs/E2EE.md,
        // Part 3, "What the server reads of a commit"): the old holder of a device name now
        // certified under another key, its token still valid, gets none in.
        if let leaf = framing.pathLeaf {
            guard leaf.identity == KeyDirectoryRules.credentialIdentity(user: user, device: device) else {
                return .refuse(.invalidCommit, "the commit's path leaf is not \(user)/\(device)'s: its credential names another device")
            }
            guard leaf.signatureKey == certifiedKey else {
                return .refuse(.deviceNotCertified, "the commit's path leaf is not under the key \(device)'s certificate certifies")
            }
        }
        // A device is added with a KeyPackage its certified key signed: naming any other device
        // would only take room in the conversation's Welcomes.
        if let added = submitter.uncertifiedAdded {
            return .refuse(.deviceNotCertified, "a Welcome for \(added.user)/\(added.device), which has no device certificate stored")
        }
        var stored = Simp_StoredCommit()
        stored.epoch = epoch
        stored.commit = Data(commit)
        stored.fromUser = user
        stored.fromDevice = device
        stored.serverTime = nowMillis
        var kept: KeptWelcome?
        if let welcome {
            var entry = Simp_StoredWelcome()
            entry.epoch = epoch + 1
            entry.welcome = Data(welcome.bytes)
            entry.fromUser = user
            entry.fromDevice = device
            entry.serverTime = nowMillis
            guard let bytes: [UInt8] = try? entry.serializedBytes() else { return .refuse(.internal, "a Welcome did not encode") }
            kept = KeptWelcome(value: bytes,
                               devices: welcome.added.map { .init(user: $0.user, field: CommitRules.welcomeField(user: $0.user, device: $0.device)) })
        }
        guard let entry: [UInt8] = try? stored.serializedBytes() else { return .refuse(.internal, "a commit did not encode") }
        var keptInfo: [UInt8]?
        if let groupInfo {
            var info = Simp_StoredGroupInfo()
            info.epoch = epoch + 1
            info.groupInfo = Data(groupInfo)
            info.fromUser = user
            info.fromDevice = device
            info.serverTime = nowMillis
            guard let bytes: [UInt8] = try? info.serializedBytes() else { return .refuse(.internal, "a GroupInfo did not encode") }
            keptInfo = bytes
        }
        return .store(conversation, user: user, epoch: epoch, entry: entry, welcome: kept, kept: CommitRules.keptCommits, group: framing.groupID,
                      groupInfo: keptInfo)
    }

    /// The store script's result.
    func stored(_ result: Stored) -> Next {
        guard case .submit(let conversation, let epoch, _, _, _) = request else { return .refuse(.internal, "commit stored for no submit") }
        switch result {
        case .stored(let now):
            var answer = Simp_CommitStored()
            answer.conversation = conversation.name
            answer.epoch = now
            return .answer(.commitStored(answer))
        case .unreplicated(_, let confirmed):
            return .refuse(.replicasUnavailable, "stored, but only \(confirmed) Redis replicas confirmed it in time, and a failover may lose it: "
                + "submit it again (answered as stored if it held) or fetch \(conversation.name)'s commits from epoch \(epoch)")
        case .conflict(let current):
            let why = current > epoch ? "epoch \(epoch) is committed already" : "epoch \(epoch) is not reached yet"
            return .refuse(.commitConflict, "\(why): \(conversation.name) is at epoch \(current); fetch its commits and commit again on it")
        case .notAMember: return .refuse(.notAMember, "you are not a member of \(conversation.name)")
        case .noSuchGroup: return .refuse(.noSuchGroup, "no such group: \(conversation.name)")
        case .welcomeToNonMember(let name): return .refuse(.notAMember, "a Welcome for \(name), who is not a member of \(conversation.name)")
        case .otherGroup:
            return .refuse(.invalidCommit, "the commit is framed for another MLS group than \(conversation.name)'s (the group id of its first commit stored)")
        }
    }

    /// The fetch script's result.
    func fetched(_ result: Fetched) -> Next {
        guard case .fetch(let conversation, _, _, _) = request else { return .refuse(.internal, "commits fetched for no fetch") }
        switch result {
        case .notAMember: return .refuse(.notAMember, "you are not a member of \(conversation.name)")
        case .noSuchGroup: return .refuse(.noSuchGroup, "no such group: \(conversation.name)")
        case .page(let current, let welcome, let groupInfo, let commits, let more):
            var page = Simp_CommitPage()
            page.conversation = conversation.name
            page.epoch = current
            // A stored entry that does not decode is the store's fault: never a page with a gap.
            for bytes in commits {
                guard let commit = try? Simp_StoredCommit(serializedBytes: bytes) else {
                    return .refuse(.internal, "a stored commit of \(conversation.name) does not decode")
                }
                page.commits.append(commit)
            }
            if let welcome {
                guard let entry = try? Simp_StoredWelcome(serializedBytes: welcome) else {
                    return .refuse(.internal, "a stored Welcome of \(conversation.name) does not decode")
                }
                page.welcome = entry
            }
            if let groupInfo {
                guard let entry = try? Simp_StoredGroupInfo(serializedBytes: groupInfo) else {
                    return .refuse(.internal, "a stored GroupInfo of \(conversation.name) does not decode")
                }
                page.groupInfo = entry
            }
            page.more = more
            return .answer(.commitPage(page))
        }
    }
}
