extension Simp_Envelope {
    public init(requestID: UInt64 = 0, _ body: Simp_Envelope.OneOf_Body) {
        self.init()
        self.requestID = requestID
        self.body = body
    }

    public static func error(_ code: Simp_ErrorCode, _ reason: String, requestID: UInt64 = 0) -> Simp_Envelope {
        var error = Simp_Error()
        error.code = code
        error.reason = reason
        return Simp_Envelope(requestID: requestID, .error(error))
    }
}

extension Simp_Failed {
    public init(messageID: String, to: String, code: Simp_ErrorCode, reason: String) {
        self.init()
        self.messageID = messageID
        self.toUser = to
        self.code = code
        self.reason = reason
    }
}

extension Simp_Message {
    /// The entry of a group's membership change (`content` names the member).
    public var isGroupChange: Bool {
        switch type {
        case .groupAdded, .groupRemoved, .groupLeft: true
        default: false
        }
    }
}

extension Simp_Message {
    /// A notice the server stored (contacts, group invitations, read receipts, key changes):
    /// nobody hears it was confirmed.
    public var isNotice: Bool {
        switch type {
        case .contactRequest, .contactAccepted, .groupInvited, .read, .keysChanged: true
        default: false
        }
    }
}

extension Simp_ErrorCode {
    /// The name docs/PROTOCOL.md and the schema give it, e.g. "UNKNOWN_USER": what `simp
    /// --json` prints as `code`, for scripts.
    public var protocolName: String {
        self == .errorUnspecified ? "ERROR_UNSPECIFIED" : name.uppercased()
    }

    /// The snake-case name used in docs and JSON output, e.g. "unknown_user".
    public var name: String {
        switch self {
        case .errorUnspecified: return "unspecified"
        case .frameTooLarge: return "frame_too_large"
        case .malformedFrame: return "malformed_frame"
        case .badRequest: return "bad_request"
        case .notAuthenticated: return "not_authenticated"
        case .userExists: return "user_exists"
        case .invalidCredentials: return "invalid_credentials"
        case .unknownUser: return "unknown_user"
        case .invalidToken: return "invalid_token"
        case .messageTooLarge: return "message_too_large"
        case .storeUnavailable: return "store_unavailable"
        case .invalidName: return "invalid_name"
        case .notConnected: return "not_connected"
        case .internal: return "internal"
        case .inboxFull: return "inbox_full"
        case .sessionReplaced: return "session_replaced"
        case .withdrawn: return "withdrawn"
        case .rateLimited: return "rate_limited"
        case .tooManyConnections: return "too_many_connections"
        case .tooManySessions: return "too_many_sessions"
        case .loginThrottled: return "login_throttled"
        case .inboxShareFull: return "inbox_share_full"
        case .sessionClosed: return "session_closed"
        case .replicasUnavailable: return "replicas_unavailable"
        case .outOfOrder: return "out_of_order"
        case .tooManyDevices: return "too_many_devices"
        case .deviceRevoked: return "device_revoked"
        case .noSuchGroup: return "no_such_group"
        case .notAMember: return "not_a_member"
        case .notGroupAdmin: return "not_group_admin"
        case .groupExists: return "group_exists"
        case .groupFull: return "group_full"
        case .notAContact: return "not_a_contact"
        case .notInvited: return "not_invited"
        case .tooManyGroups: return "too_many_groups"
        case .identityExists: return "identity_exists"
        case .noIdentity: return "no_identity"
        case .badSignature: return "bad_signature"
        case .invalidKeyPackage: return "invalid_key_package"
        case .deviceNotCertified: return "device_not_certified"
        case .keyPackagesFull: return "key_packages_full"
        case .keysChanged: return "keys_changed"
        case .commitConflict: return "commit_conflict"
        case .invalidCommit: return "invalid_commit"
        case .e2ERequired: return "e2e_required"
        case .streamPathOff: return "stream_path_off"
        case .linkStep: return "link_step"
        case .UNRECOGNIZED(let n): return "code_\(n)"
        }
    }
}
