import SIMPClient
import SIMPTerminal

/// What `/group ...` and `/groups` (and `simp group ...`) do, and what they print: a line for
/// people and an object for --json.
struct GroupResult {
    var human: String
    var json: [String: Any]
}

extension REPLCommand.GroupCommand {
    func run(on client: SIMPClient) async throws(ClientError) -> GroupResult {
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
            return GroupResult(human: "you left #\(name)", json: ["event": "group", "group": name, "change": "left"])
        case .members(let name):
            return Self.members(try await client.groupMembers(name), "#\(name)")
        }
    }

    private static func members(_ info: GroupInfo, _ title: String) -> GroupResult {
        let list = info.members.map { $0.role == "member" ? $0.name : "\($0.name) (\($0.role))" }
        return GroupResult(human: "\(title): " + list.joined(separator: ", "),
                           json: ["event": "members", "group": info.name, "members": info.members.map { ["name": $0.name, "role": $0.role] }])
    }
}

enum GroupListing {
    static func run(on client: SIMPClient) async throws(ClientError) -> GroupResult {
        result(try await client.groups())
    }

    static func result(_ groups: [String]) -> GroupResult {
        GroupResult(human: groups.isEmpty ? "you are in no group" : groups.map { "#" + $0 }.joined(separator: "  "),
                           json: ["event": "groups", "groups": groups])
    }
}
