import SIMPClient
import SIMPTerminal

/// What a request command (`/group ...`, `/contact ...`, and their one-shot forms) printed: a line for
/// people and an object for --json.
struct RequestResult {
    var human: String
    var json: [String: Any]
}

extension REPLCommand.GroupCommand {
    func run(on client: SIMPClient) async throws(ClientError) -> RequestResult {
        switch self {
        case .create(let name, let members):
            return Self.members(try await client.createGroup(name, members: members), "created #\(name)")
        case .add(let name, let users):
            return Self.members(try await client.addToGroup(name, users), "added to #\(name)")
        case .remove(let name, let users):
            return Self.members(try await client.removeFromGroup(name, users), "removed from #\(name)")
        case .admin(let name, let users):
            return Self.members(try await client.makeGroupAdmins(name, users), "#\(name)")
        case .leave(let name):
            try await client.leaveGroup(name)
            return RequestResult(human: "you left #\(name)", json: ["event": "group", "group": name, "change": "left"])
        case .members(let name):
            return Self.members(try await client.groupMembers(name), "#\(name)")
        case .accept(let name):
            return Self.members(try await client.acceptGroup(name), "you joined #\(name)")
        case .decline(let name):
            try await client.declineGroup(name)
            return RequestResult(human: "you declined #\(name)", json: ["event": "group", "group": name, "change": "declined"])
        }
    }

    private static func members(_ info: GroupInfo, _ title: String) -> RequestResult {
        let list = info.members.map { $0.role == .member ? $0.name : "\($0.name) (\($0.role.rawValue))" }
        let invited = info.invited.isEmpty ? "" : "; invited: " + info.invited.joined(separator: ", ")
        return RequestResult(human: "\(title): " + list.joined(separator: ", ") + invited,
                           json: ["event": "members", "group": info.name, "members": info.members.map { ["name": $0.name, "role": $0.role.rawValue] },
                                  "invited": info.invited])
    }
}

enum GroupListing {
    static func run(on client: SIMPClient) async throws(ClientError) -> RequestResult {
        result(try await client.groups(), invitations: try await client.groupInvitations())
    }

    static func result(_ groups: [String], invitations: [GroupInvitation] = []) -> RequestResult {
        var human = groups.isEmpty ? "you are in no group" : groups.map { "#" + $0 }.joined(separator: "  ")
        if !invitations.isEmpty {
            // One line: the REPL shows a result as one line, control characters escaped.
            human += "; invited to " + invitations.map { "#\($0.group) (by \($0.by))" }.joined(separator: ", ")
                + ": /group accept NAME or /group decline NAME"
        }
        return RequestResult(human: human, json: ["event": "groups", "groups": groups,
                                                  "invitations": invitations.map { ["group": $0.group, "by": $0.by, "expires": Int($0.expires.millisSince1970)] }])
    }
}
