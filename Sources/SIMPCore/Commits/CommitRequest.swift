/// A commit request as the server takes it (docs/PROTOCOL.md, Commits), or why it is refused
/// before anything runs: the conversation's name, the epochs, sizes, counts, and (one-to-one)
/// whom a Welcome may go to. Pure, so the fuzz target checks the very function the server runs.
public enum CommitRequest: Sendable, Equatable {
    case submit(CommitConversation, epoch: UInt64, commit: [UInt8], welcomes: [Welcome])
    /// `join`: the device has no state for the conversation and asks for its Welcome.
    case fetch(CommitConversation, fromEpoch: UInt64, join: Bool)

    /// A Welcome as submitted, for one device.
    public struct Welcome: Sendable, Equatable {
        public var user: String
        public var device: String
        public var bytes: [UInt8]

        public init(user: String, device: String, bytes: [UInt8]) {
            self.user = user
            self.device = device
            self.bytes = bytes
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
            guard submit.welcomes.count <= CommitRules.maxWelcomes else {
                return .failure(.init(.badRequest, "at most \(CommitRules.maxWelcomes) Welcomes with one commit"))
            }
            var seen = Set<String>()
            var welcomes: [Welcome] = []
            for welcome in submit.welcomes {
                guard UserName.isValid(welcome.user), DeviceName.isValid(welcome.device) else {
                    return .failure(.init(.badRequest, "a Welcome names a user and a device"))
                }
                guard (1...CommitRules.maxWelcomeBytes).contains(welcome.welcome.count) else {
                    return .failure(.init(.badRequest, "a Welcome is 1-\(CommitRules.maxWelcomeBytes) bytes"))
                }
                guard seen.insert(CommitRules.welcomeField(user: welcome.user, device: welcome.device)).inserted else {
                    return .failure(.init(.badRequest, "two Welcomes for \(welcome.user)/\(welcome.device)"))
                }
                if case .direct(_, let peer) = conversation, welcome.user != user, welcome.user != peer {
                    return .failure(.init(.notAMember, "\(welcome.user) is not in the conversation of \(user) and \(peer)"))
                }
                welcomes.append(Welcome(user: welcome.user, device: welcome.device, bytes: Array(welcome.welcome)))
            }
            return .success(.submit(conversation, epoch: submit.epoch, commit: Array(submit.commit), welcomes: welcomes))
        case .fetchCommits(let fetch):
            guard let conversation = CommitConversation(fetch.conversation, asker: user) else {
                return .failure(.init(.badRequest, "not a conversation: \(fetch.conversation.prefix(34))"))
            }
            guard fetch.fromEpoch <= CommitRules.maxEpoch else {
                return .failure(.init(.badRequest, "no conversation reaches an epoch above \(CommitRules.maxEpoch)"))
            }
            return .success(.fetch(conversation, fromEpoch: fetch.fromEpoch, join: fetch.join))
        default: return nil
        }
    }
}
