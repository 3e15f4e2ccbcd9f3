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
        }
    }

    private static func members(_ info: GroupInfo, _ title: String) -> RequestResult {
        let list = info.members.map { $0.role == "member" ? $0.name : "\($0.name) (\($0.role))" }
        return RequestResult(human: "\(title): " + list.joined(separator: ", "),
                           json: ["event": "members", "group": info.name, "members": info.members.map { ["name": $0.name, "role": $0.role] }])
    }
}

enum GroupListing {
    static func run(on client: SIMPClient) async throws(ClientError) -> RequestResult {
        result(try await client.groups())
    }

    static func result(_ groups: [String]) -> RequestResult {
        RequestResult(human: groups.isEmpty ? "you are in no group" : groups.map { "#" + $0 }.joined(separator: "  "),
                           json: ["event": "groups", "groups": groups])
    }
}
