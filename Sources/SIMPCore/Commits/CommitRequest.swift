import Foundation

/// A commit request as the server takes it (docs/PROTOCOL.md, Commits), or why it is refused
/// before anything runs: the conversation's name, the epochs, sizes, counts, and (one-to-one)
/// whom a Welcome may go to. Pure, so the fuzz target checks the very function the server runs.
public enum CommitRequest: Sendable, Equatable {
    /// `welcome`: the commit's one Welcome and the devices it adds, if it adds any. `groupInfo`:
    /// the GroupInfo of the epoch the commit leads to, if given (kept for external rejoins).
    case submit(CommitConversation, epoch: UInt64, commit: [UInt8], welcome: Welcome?, groupInfo: [UInt8]? = nil)
    /// `join`: the device has no state for the conversation and asks for its Welcome;
    /// `external`: it has none and asks for the conversation's latest GroupInfo.
    case fetch(CommitConversation, fromEpoch: UInt64, join: Bool, external: Bool = false)

    /// A commit's Welcome (RFC 9420 section 12.4.3.1), one for every device the commit adds:
    /// each finds its own secrets in it by its KeyPackageRef.
    public struct Welcome: Sendable, Equatable {
        public var bytes: [UInt8]
        /// The devices it is for, each once, at least one.
        public var added: [AddedDevice]

        public init(bytes: [UInt8], added: [AddedDevice]) {
            self.bytes = bytes
            self.added = added
        }
    }

    /// A device a commit adds.
    public struct AddedDevice: Sendable, Hashable {
        public var user: String
        public var device: String

        public init(user: String, device: String) {
            self.user = user
            self.device = device
        }
    }

    /// Why a request is refused before it runs.
    public struct Refusal: Error, Sendable, Equatable {
        public var code: Simp_ErrorCode
        public var reason: String

        public init(_ code: Simp_ErrorCode, _ reason: String) {
            self.code = code
            self.reason = reason
        }
    }

    /// The request `body` is when `user` asks it; nil for a body that is no commit request.
    /// A checked submit's `epoch` is below `CommitRules.maxEpoch` (so `epoch + 1` is one), a
    /// fetch's `fromEpoch` at most that.
    public static func checking(_ body: Simp_Envelope.OneOf_Body, asker user: String) -> Result<CommitRequest, Refusal>? {
        switch body {
        case .submitCommit(let submit):
            guard let conversation = CommitConversation(submit.conversation, asker: user) else {
                return .failure(.init(.badRequest, "not a conversation: \(submit.conversation.prefix(34))"))
            }
            if case .direct(_, let peer) = conversation, peer == user {
                return .failure(.init(.badRequest, "a one-to-one conversation is with another user"))
            }
            guard submit.epoch < CommitRules.maxEpoch else {
                return .failure(.init(.badRequest, "a commit is made on an epoch below \(CommitRules.maxEpoch)"))
            }
            guard (1...CommitRules.maxCommitBytes).contains(submit.commit.count) else {
                return .failure(.init(.badRequest, "a commit is 1-\(CommitRules.maxCommitBytes) bytes"))
            }
            let welcome: Welcome?
            switch Self.welcome(of: submit) {
            case .success(let taken): welcome = taken
            case .failure(let refusal): return .failure(refusal)
            }
            if let welcome, case .direct(_, let peer) = conversation,
               let outsider = welcome.added.first(where: { $0.user != user && $0.user != peer }) {
                return .failure(.init(.notAMember, "\(outsider.user) is not in the conversation of \(user) and \(peer)"))
            }
            guard submit.groupInfo.count <= CommitRules.maxGroupInfoBytes else {
                return .failure(.init(.badRequest, "a GroupInfo is at most \(CommitRules.maxGroupInfoBytes) bytes"))
            }
            return .success(.submit(conversation, epoch: submit.epoch, commit: Array(submit.commit), welcome: welcome,
                                    groupInfo: submit.groupInfo.isEmpty ? nil : Array(submit.groupInfo)))
        case .fetchCommits(let fetch):
            guard let conversation = CommitConversation(fetch.conversation, asker: user) else {
                return .failure(.init(.badRequest, "not a conversation: \(fetch.conversation.prefix(34))"))
            }
            guard fetch.fromEpoch <= CommitRules.maxEpoch else {
                return .failure(.init(.badRequest, "no conversation reaches an epoch above \(CommitRules.maxEpoch)"))
            }
            guard !(fetch.join && fetch.external) else {
                return .failure(.init(.badRequest, "a fetch asks for a Welcome (`join`) or a GroupInfo (`external`), not both"))
            }
            return .success(.fetch(conversation, fromEpoch: fetch.fromEpoch, join: fetch.join, external: fetch.external))
        default: return nil
        }
    }

    /// The submit's Welcome and the devices it adds: `welcome` with `added`, or (the migration
    /// window, docs/PROTOCOL.md, Commits) the per-device `welcomes` of older clients when every
    /// copy is the same Welcome; nil when it adds no device.
    private static func welcome(of submit: Simp_SubmitCommit) -> Result<Welcome?, Refusal> {
        let bytes: Data
        let added: [(user: String, device: String)]
        if submit.welcomes.isEmpty {
            guard submit.welcome.isEmpty == submit.added.isEmpty else {
                return .failure(.init(.badRequest, "a Welcome goes with the devices it adds (`welcome` with `added`)"))
            }
            if submit.added.isEmpty { return .success(nil) }
            bytes = submit.welcome
            added = submit.added.map { ($0.user, $0.device) }
        } else {
            guard submit.welcome.isEmpty, submit.added.isEmpty else {
                return .failure(.init(.badRequest, "per-device `welcomes` or `welcome` with `added`, not both"))
            }
            bytes = submit.welcomes[0].welcome
            // An MLS commit has one Welcome for all it adds: copies that differ are no such commit's.
            guard submit.welcomes.allSatisfy({ $0.welcome == bytes }) else {
                return .failure(.init(.badRequest, "per-device Welcomes that differ: send the commit's one Welcome (`welcome`) with the devices it adds (`added`)"))
            }
            added = submit.welcomes.map { ($0.user, $0.device) }
        }
        guard added.count <= CommitRules.maxAddedDevices else {
            return .failure(.init(.badRequest, "at most \(CommitRules.maxAddedDevices) devices added by one commit"))
        }
        guard (1...CommitRules.maxWelcomeBytes).contains(bytes.count) else {
            return .failure(.init(.badRequest, "a Welcome is 1-\(CommitRules.maxWelcomeBytes) bytes"))
        }
        var seen = Set<AddedDevice>()
        for device in added {
            guard UserName.isValid(device.user), DeviceName.isValid(device.device) else {
                return .failure(.init(.badRequest, "an added device names a user and a device"))
            }
            guard seen.insert(AddedDevice(user: device.user, device: device.device)).inserted else {
                return .failure(.init(.badRequest, "\(device.user)/\(device.device) added twice"))
            }
        }
        return .success(Welcome(bytes: Array(bytes), added: added.map { AddedDevice(user: $0.user, device: $0.device) }))
    }
}
