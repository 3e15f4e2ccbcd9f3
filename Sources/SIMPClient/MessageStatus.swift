import SIMPCore

/// Why something failed, in the library's own terms: the server's refusals (docs/PROTOCOL.md,
/// Errors) and the client's own failures. Every failure the library reports carries one
/// (`ClientError.errorCode`, `MessageStatus.failure`); the wire's `Simp_ErrorCode` stays inside.
public enum ErrorCode: String, Sendable, Equatable, CaseIterable {
    // The server's.
    case frameTooLarge = "frame-too-large", malformedFrame = "malformed-frame", badRequest = "bad-request"
    case notAuthenticated = "not-authenticated", userExists = "user-exists", invalidCredentials = "invalid-credentials"
    case unknownUser = "unknown-user", invalidToken = "invalid-token", messageTooLarge = "message-too-large"
    case storeUnavailable = "store-unavailable", invalidName = "invalid-name", notConnected = "not-connected"
    case internalError = "internal", inboxFull = "inbox-full", sessionReplaced = "session-replaced", withdrawn
    case rateLimited = "rate-limited", tooManyConnections = "too-many-connections", tooManySessions = "too-many-sessions"
    case loginThrottled = "login-throttled", inboxShareFull = "inbox-share-full", sessionClosed = "session-closed"
    case replicasUnavailable = "replicas-unavailable", outOfOrder = "out-of-order", tooManyDevices = "too-many-devices"
    case deviceRevoked = "device-revoked", noSuchGroup = "no-such-group", notAMember = "not-a-member"
    case notGroupAdmin = "not-group-admin", groupExists = "group-exists", groupFull = "group-full"
    case notAContact = "not-a-contact", notInvited = "not-invited", tooManyGroups = "too-many-groups"
    case identityExists = "identity-exists", noIdentity = "no-identity", badSignature = "bad-signature"
    case invalidKeyPackage = "invalid-key-package", deviceNotCertified = "device-not-certified"
    case keyPackagesFull = "key-packages-full", keysChanged = "keys-changed"
    // The client's own.
    /// The client gave up on it: disconnected (by the user) before the server confirmed it.
    case gaveUp = "gave-up"
    /// The caller's task was cancelled: the request returned at once (`ClientError.cancelled`).
    case cancelled
    /// A failure with no code of its own (a disk write, a reconnect, a code this version does not know).
    case unspecified
    /// End-to-end encryption could not be set up or used for the conversation (docs/E2EE.md, Part 4).
    case endToEnd = "end-to-end"
    /// A verified peer's identity changed: nothing more is sent to them until the user verifies
    /// the new safety number (`markVerified`).
    case identityChanged = "identity-changed"
    // The server's, from issue 44's commits (docs/PROTOCOL.md, Commits).
    /// A commit made on an epoch another commit won: fetch the commits, process them, commit again.
    case commitConflict = "commit-conflict"
    /// A commit whose framing every member would refuse (not a member's public commit on the
    /// epoch and MLS group it was submitted for), or a Welcome that does not decode or does not
    /// hold one secret per added device: nothing stored.
    case invalidCommit = "invalid-commit"
    /// The server takes only end-to-end encrypted messages to users (`--e2e required`).
    case e2eRequired = "e2e-required"
    /// The server carries no datagrams inside the control connection
    /// (`--datagrams-over-stream never`): UDP only.
    case streamPathOff = "stream-path-off"
    /// A device link's step out of order, or by a device that may not take it (docs/E2EE.md,
    /// "Linking a device").
    case linkStep = "link-step"

    /// The name docs/PROTOCOL.md gives a server's code (e.g. "UNKNOWN_USER", what `simp --json`
    /// prints); nil for the client's own.
    public var protocolName: String? {
        guard ![.gaveUp, .unspecified, .cancelled, .endToEnd, .identityChanged].contains(self) else { return nil }
        return rawValue.split(separator: "-").joined(separator: "_").uppercased()
    }

    /// The library's code for the wire's; nil (a failure of the client's own) is `.unspecified`.
    init(_ code: Simp_ErrorCode?) {
        guard let code else {
            self = .unspecified
            return
        }
        self = switch code {
        case .frameTooLarge: .frameTooLarge
        case .malformedFrame: .malformedFrame
        case .badRequest: .badRequest
        case .notAuthenticated: .notAuthenticated
        case .userExists: .userExists
        case .invalidCredentials: .invalidCredentials
        case .unknownUser: .unknownUser
        case .invalidToken: .invalidToken
        case .messageTooLarge: .messageTooLarge
        case .storeUnavailable: .storeUnavailable
        case .invalidName: .invalidName
        case .notConnected: .notConnected
        case .internal: .internalError
        case .inboxFull: .inboxFull
        case .sessionReplaced: .sessionReplaced
        case .withdrawn: .withdrawn
        case .rateLimited: .rateLimited
        case .tooManyConnections: .tooManyConnections
        case .tooManySessions: .tooManySessions
        case .loginThrottled: .loginThrottled
        case .inboxShareFull: .inboxShareFull
        case .sessionClosed: .sessionClosed
        case .replicasUnavailable: .replicasUnavailable
        case .outOfOrder: .outOfOrder
        case .tooManyDevices: .tooManyDevices
        case .deviceRevoked: .deviceRevoked
        case .noSuchGroup: .noSuchGroup
        case .notAMember: .notAMember
        case .notGroupAdmin: .notGroupAdmin
        case .groupExists: .groupExists
        case .groupFull: .groupFull
        case .notAContact: .notAContact
        case .notInvited: .notInvited
        case .tooManyGroups: .tooManyGroups
        case .identityExists: .identityExists
        case .noIdentity: .noIdentity
        case .badSignature: .badSignature
        case .invalidKeyPackage: .invalidKeyPackage
        case .deviceNotCertified: .deviceNotCertified
        case .keyPackagesFull: .keyPackagesFull
        case .keysChanged: .keysChanged
        case .commitConflict: .commitConflict
        case .invalidCommit: .invalidCommit
        case .e2ERequired: .e2eRequired
        case .streamPathOff: .streamPathOff
        case .linkStep: .linkStep
        default: .unspecified
        }
    }
}

extension ClientError {
    /// The library's code for this failure: the server's (`code`), or the client's own
    /// (`.cancelled`, else `.unspecified`).
    public var errorCode: ErrorCode { localCode ?? code ?? .unspecified }
}

/// Where one message the user sent stands: what the server and its recipients confirmed. For a
/// group, each member's receipts combine into one stage: delivered when every member the
/// server counted confirmed it, read when every one read it.
public struct MessageStatus: Sendable, Equatable {
    /// In the order a message goes through them; `failed` ends it instead.
    public enum Stage: Int, Sendable, Comparable, CaseIterable {
        /// Handed to `send`, not yet confirmed by the server.
        case sending
        /// Stored by the server (for a group: in every member's inbox).
        case accepted
        /// Confirmed by its recipient (every member of a group).
        case delivered
        /// Read by its recipient (every member of a group), as far as they tell reads.
        case read
        case failed

        public static func < (a: Stage, b: Stage) -> Bool { a.rawValue < b.rawValue }

        /// Its name on disk.
        var name: String {
            switch self {
            case .sending: "sending"
            case .accepted: "accepted"
            case .delivered: "delivered"
            case .read: "read"
            case .failed: "failed"
            }
        }

        init?(name: String) {
            guard let stage = Stage.allCases.first(where: { $0.name == name }) else { return nil }
            self = stage
        }
    }

    /// Why it failed.
    public struct Failure: Sendable, Equatable {
        public var code: ErrorCode
        public var reason: String

        public init(code: ErrorCode, reason: String) {
            self.code = code
            self.reason = reason
        }
    }

    public var id: String
    /// The recipient, or `#NAME` for a group.
    public var to: String
    public var stage: Stage
    /// Its place in the recipient's inbox (a group's order for a group); 0 before `accepted`.
    public var seq: UInt64 = 0
    public var failure: Failure?
    /// A group message: how many members (besides the sender) are to confirm it; 0 until known.
    public var recipients = 0
    /// A group message: each member that confirmed it, `.delivered` or `.read`.
    public var members: [String: Stage] = [:]

    public init(id: String, to: String, stage: Stage = .sending) {
        self.id = id
        self.to = to
        self.stage = stage
    }

    public var isGroup: Bool { to.first == GroupName.marker }
    /// Nothing more is waited for: it failed, or its recipient (every member) has it.
    /// A read may still follow a delivery.
    public var isSettled: Bool { stage >= .delivered }
    /// No change can follow: failed, or read (by every member).
    public var isFinal: Bool { stage >= .read }

    /// The members as stored: `name=stage` joined by spaces, by name.
    var storedMembers: String {
        members.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.name)" }.joined(separator: " ")
    }

    mutating func restoreMembers(_ stored: String) {
        for item in stored.split(separator: " ") {
            let pair = item.split(separator: "=", maxSplits: 1)
            if pair.count == 2, let stage = Stage(name: String(pair[1])) { members[String(pair[0])] = stage }
        }
    }
}

/// Each sent message's status from the events about it, pure: a group's member receipts
/// combined, stages never backwards, an accepted message never failed. Remembers the latest
/// `capacity` messages (a message it forgot starts again from the next event about it).
struct StatusBook: Sendable {
    private var statuses: [String: MessageStatus] = [:]
    private var order: [String] = []
    /// The messages a handle follows (until their status is final), when not every one is kept.
    private var tracked: Set<String> = []
    let capacity: Int

    init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    func status(of id: String) -> MessageStatus? { statuses[id] }

    /// What the history recorded (oldest first): later events go on from there, never back.
    mutating func restore(_ recorded: [MessageStatus]) {
        for status in recorded where statuses[status.id] == nil {
            remember(status.id)
            statuses[status.id] = status
        }
    }

    /// From now on `id`'s status is kept, whatever `apply` is told of every message.
    mutating func track(_ id: String) {
        guard statuses[id]?.isFinal != true else { return }
        tracked.insert(id)
    }

    /// The status `event` changes, after the change; nil when it says nothing new about a
    /// message `user` sent (a received message, a repeated receipt), or about one not kept:
    /// only tracked messages are, unless `everyMessage`.
    mutating func apply(_ event: ClientEvent, user: String?, everyMessage: Bool = true) -> MessageStatus? {
        guard everyMessage || (!tracked.isEmpty && Self.messageID(of: event).map(tracked.contains) == true) else { return nil }
        let status = change(for: event, user: user)
        if let status, status.isFinal { tracked.remove(status.id) }
        return status
    }

    /// The message a sender's event is about.
    private static func messageID(of event: ClientEvent) -> String? {
        switch event {
        case .accepted(let id, _, _), .groupAccepted(let id, _, _, _), .memberDelivered(let id, _, _, _),
             .delivered(let id, _, _), .read(let id, _, _), .failed(let id, _, _, _):
            id
        default:
            nil
        }
    }

    private mutating func change(for event: ClientEvent, user: String?) -> MessageStatus? {
        switch event {
        case .accepted(let id, let to, let seq):
            return change(id, to: to) { status in
                status.seq = seq
                status.stage = max(status.stage, .accepted)
            }
        case .groupAccepted(let id, let to, let seq, let recipients):
            return change(id, to: to) { status in
                status.seq = seq
                status.recipients = recipients
                status.stage = max(status.stage, .accepted)
                Self.combine(&status)
            }
        case .memberDelivered(let id, let to, let member, _):
            return change(id, to: to) { status in
                status.members[member] = max(status.members[member] ?? .delivered, .delivered)
                Self.combine(&status)
            }
        case .delivered(let id, let to, let seq):
            return change(id, to: to) { status in
                if status.seq == 0 { status.seq = seq }
                status.stage = max(status.stage, .delivered)
            }
        case .read(let id, let from, let by):
            // `from` is the sender: the user's own message, read by `by` (not the user's read on another device).
            guard let user, from == user, by != user else { return nil }
            return change(id, to: statuses[id]?.to ?? by) { status in
                if status.isGroup {
                    status.members[by] = .read
                    Self.combine(&status)
                } else {
                    status.stage = max(status.stage, .read)
                }
            }
        case .failed(let id, let to, let reason, let code):
            return change(id, to: to) { status in
                guard status.stage == .sending else { return }
                status.stage = .failed
                status.failure = .init(code: code ?? .gaveUp, reason: reason)
            }
        default:
            return nil
        }
    }

    /// A group's stage from its members': delivered once every counted member confirmed it,
    /// read once every one read it. Before the server's count (`groupAccepted`) nothing combines.
    private static func combine(_ status: inout MessageStatus) {
        guard status.stage != .failed, status.stage >= .accepted, status.recipients > 0 else { return }
        let delivered = status.members.values.filter { $0 >= .delivered }.count
        let read = status.members.values.filter { $0 == .read }.count
        if read >= status.recipients {
            status.stage = max(status.stage, .read)
        } else if delivered >= status.recipients {
            status.stage = max(status.stage, .delivered)
        }
    }

    private mutating func change(_ id: String, to: String, _ body: (inout MessageStatus) -> Void) -> MessageStatus? {
        let before = statuses[id]
        var status = before ?? MessageStatus(id: id, to: to)
        body(&status)
        guard status != before else { return nil }
        if before == nil { remember(id) }
        statuses[id] = status
        return status
    }

    private mutating func remember(_ id: String) {
        order.append(id)
        guard order.count > 2 * capacity else { return }
        let dropped = order.prefix(order.count - capacity)
        order.removeFirst(dropped.count)
        for old in dropped {
            statuses[old] = nil
            tracked.remove(old)
        }
    }
}
