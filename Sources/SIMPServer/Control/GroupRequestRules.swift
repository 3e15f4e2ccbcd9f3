import SIMPCore

/// What a group request must be before anything is read or written, and the reasons for the
/// refusals the group's script decides. Pure.
enum GroupRequestRules {
    static func action(of request: Simp_GroupRequest) -> MessageStore.GroupChangeAction {
        switch request.action {
        case .create: .create
        case .add: .add
        case .remove: .remove
        case .leave: .leave
        case .admin: .admin
        case .accept: .accept
        case .decline: .decline
        case .list, .members, .UNRECOGNIZED: .add
        }
    }

    static func problem(in request: Simp_GroupRequest, from user: String, maxMembers: Int) -> (code: Simp_ErrorCode, reason: String)? {
        if case .UNRECOGNIZED(let value) = request.action { return (.badRequest, "unknown group action \(value)") }
        if request.action == .list { return nil }
        guard GroupName.isValid(request.group) else {
            return (.invalidName, "a group name is 1-32 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
        }
        if let bad = request.users.first(where: { !UserName.isValid($0) }) { return (.unknownUser, "no such user: \(bad)") }
        switch request.action {
        case .create:
            if Set(request.users + [user]).count > maxMembers {
                return (.groupFull, "a group has at most \(maxMembers) members")
            }
        case .add, .remove, .admin:
            if request.users.isEmpty { return (.badRequest, "name at least one user") }
            if request.users.count > maxMembers { return (.groupFull, "a group has at most \(maxMembers) members") }
            if request.action == .remove, request.users.contains(user) { return (.badRequest, "to remove yourself, leave the group") }
        case .leave, .members, .accept, .decline, .list, .UNRECOGNIZED:
            break
        }
        return nil
    }

    static func reason(_ code: Simp_ErrorCode, group: String, max: Int) -> String {
        switch code {
        case .noSuchGroup: "no such group: #\(group)"
        case .notAMember: "not a member of #\(group)"
        case .notGroupAdmin: "only the owner or an admin of #\(group) may do that (the owner alone names admins and removes them)"
        case .groupExists: "#\(group) exists already"
        case .groupFull: "#\(group) would have more than \(max) members"
        case .notInvited: "no invitation to #\(group) is waiting for you (none was made, it lapsed after 7 days, or it was answered)"
        default: "group request refused: \(code.name)"
        }
    }
}
