import Foundation
import NIOCore
import SIMPCore

/// The client's requests that are asked and answered on the control connection: history,
/// devices, groups. Each is one request and its answer (`ask`).
extension SIMPClient {
    /// Sends a request on the control connection and waits for its answer; `expected` takes
    /// the answer's body apart (nil: an answer of another kind). When the caller's task is
    /// cancelled it throws `ClientError.cancelled` at once and the request is forgotten.
    func ask<Answer>(_ body: Simp_Envelope.OneOf_Body, _ what: String,
                     _ expected: @escaping @Sendable (Simp_Envelope.OneOf_Body?) -> Answer?) async throws(ClientError) -> Answer {
        do {
            let answer = loop.makePromise(of: Simp_Envelope.self)
            let id = newRequestID()
            loop.execute { [self] in request(body, id: id, answering: answer) }
            let reply = try await untilCancelled(answer) { [self] in loop.execute { [self] in handle(.requestCancelled(id)) } }
            guard let answer = expected(reply.body) else { throw ClientError("unexpected reply to \(what)") }
            return answer
        } catch {
            throw Self.clientError(error)
        }
    }

    /// The last `limit` messages (1-1000) between the logged-in user and `peer`, oldest first,
    /// fetched page by page until there are that many or no older ones. A long message whose
    /// parts span pages is put together across them. With `endToEnd` they come from the data
    /// directory: the server's history holds only ciphertext (docs/E2EE.md, Part 4).
    public func history(with peer: String, limit: Int = 20) async throws(ClientError) -> [IncomingMessage] {
        let wanted = max(1, min(limit, 1000))
        if configuration.endToEnd { return try await decryptedHistory(with: peer, limit: wanted) }
        var pages: [[IncomingMessage]] = []
        var seen = Set<MessageKey>()
        var messages: [IncomingMessage] = []
        var before: UInt64 = 0
        while messages.count < wanted {
            let page = try await storedPage(with: peer, before: before, limit: wanted - messages.count)
            // A message that arrived meanwhile moves older ones back a position, so this page
            // may repeat some of the newer page's messages.
            pages.append(page.messages.filter { seen.insert(MessageKey(from: $0.from, id: $0.id)).inserted })
            messages = Reassembly.joined(Array(pages.reversed().joined()))
            guard page.more, page.nextBefore > before else { break }
            before = page.nextBefore
        }
        return Array(messages.suffix(wanted))
    }

    /// `history(with:)` of an encrypting device: what its own store kept, as it decrypted and
    /// sent it.
    private func decryptedHistory(with peer: String, limit: Int) async throws(ClientError) -> [IncomingMessage] {
        let user = try await identityStore().user
        return try await messages(in: peer, limit: limit).map { kept in
            let group = GroupName.addressed(by: kept.conversation)
            var message = IncomingMessage(id: kept.id, from: kept.from,
                                          to: kept.isOutgoing || group != nil ? kept.conversation : user,
                                          text: kept.text, imageURL: kept.imageURL, seq: kept.seq, sentAt: kept.sentAt)
            message.group = group
            message.groupSeq = kept.groupSeq
            message.parts = kept.parts
            return message
        }
    }

    /// One page of the conversation with `peer`, oldest first: at most `limit` (1-1000)
    /// messages, fewer when more would not fit one frame, starting `before` messages back
    /// from the newest (0: the newest page). Pass its `nextBefore` for the next older page.
    /// A long message is in it when all its parts are (each part counts towards `limit`).
    public func historyPage(with peer: String, before: UInt64 = 0, limit: Int = 20) async throws(ClientError) -> HistoryPage {
        var page = try await storedPage(with: peer, before: before, limit: limit)
        page.messages = Reassembly.joined(page.messages)
        return page
    }

    /// The parts before `part` of `message`'s long message, read back from the conversation's
    /// history (at most `Reassembly.recoveryPages` pages); what was found when a read fails.
    func earlierParts(before part: LongText.PartID, of message: IncomingMessage, with peer: String) async -> [IncomingMessage] {
        var found: [IncomingMessage] = []
        var before: UInt64 = 0
        for _ in 0..<Reassembly.recoveryPages {
            guard let page = try? await storedPage(with: peer, before: before, limit: 1000) else { break }
            found += page.messages.filter {
                $0.from == message.from && $0.part?.base == part.base && ($0.part?.index ?? 0) < part.index
            }
            guard found.count < part.index - 1, page.more, page.nextBefore > before else { break }
            before = page.nextBefore
        }
        return found
    }

    /// A page of the entries as stored, parts of long messages as they are.
    func storedPage(with peer: String, before: UInt64, limit: Int) async throws(ClientError) -> HistoryPage {
        guard UserName.isValid(peer) || GroupName.addressed(by: peer) != nil else {
            throw ClientError("not a valid user name or #group: \(peer)", code: .badRequest)
        }
        var request = Simp_HistoryRequest()
        request.peer = peer
        request.before = before
        request.limit = UInt32(max(1, min(limit, 1000)))
        return try await ask(.history(request), "history") { body in
            guard case .historyResult(let result)? = body else { return nil }
            return HistoryPage(messages: result.messages.map(IncomingMessage.init), more: result.more, nextBefore: result.nextBefore)
        }
    }

    /// The user's devices, by name: online, when last seen, how far each has confirmed.
    public func devices() async throws(ClientError) -> [DeviceInfo] {
        let list = try await ask(.devices(Simp_DevicesRequest()), "a device list request") { body in
            if case .deviceList(let list)? = body { list } else { nil }
        }
        let current = await deviceName()
        return list.devices.map { DeviceInfo($0, current: current) }
    }

    /// Ends one of the user's devices (this one too, if named): its session closes, its login
    /// tokens stop working for it, and it no longer counts against the user's devices.
    public func revokeDevice(_ name: String) async throws(ClientError) {
        var revoke = Simp_RevokeDevice()
        revoke.name = name
        _ = try await ask(.revokeDevice(revoke), "revoke") { body in
            if case .ok? = body { () } else { nil }
        }
        // Encrypted: the revoked device leaves every conversation this device has, by commit, now.
        if configuration.endToEnd, let keys = try? await conversationKeys() {
            await keys.deviceRevoked(client: self)
        }
    }

    /// Changes the password: every other login of the user ends (its tokens stop working and
    /// its connections close, on every device), and this client keeps going with a new token,
    /// and the new password for its reconnects.
    public func changePassword(from old: String, to new: String) async throws(ClientError) {
        var change = Simp_ChangePassword()
        change.oldPassword = old
        change.newPassword = new
        let answer = try await ask(.changePassword(change), "password change") { body in
            if case .loginOk(let ok)? = body { ok } else { nil }
        }
        try? await loop.submit { [self] in passwordChanged(to: new, token: answer.token, expiresAt: answer.expiresAt) }.get()
    }

    // MARK: groups

    /// The groups the user is a member of.
    public func groups() async throws(ClientError) -> [String] {
        try await groupRequest(.list, "", []).groups
    }

    /// The invitations to groups waiting for the user's answer.
    public func groupInvitations() async throws(ClientError) -> [GroupInvitation] {
        try await groupRequest(.list, "", []).invitations.map { GroupInvitation(group: $0.group, by: $0.by, expires: Date(millis: $0.expires)) }
    }

    /// Joins a group the user was invited to; its members and roles.
    @discardableResult
    public func acceptGroup(_ name: String) async throws(ClientError) -> GroupInfo {
        Self.groupInfo(try await groupRequest(.accept, name, []))
    }

    /// Turns down an invitation to a group.
    public func declineGroup(_ name: String) async throws(ClientError) {
        _ = try await groupRequest(.decline, name, [])
    }

    /// A new group owned by the user, with these members; its members and roles. Those whose
    /// `group-adds` setting does not let the user add them are invited (`GroupInfo.invited`).
    @discardableResult
    public func createGroup(_ name: String, members: [String] = []) async throws(ClientError) -> GroupInfo {
        Self.groupInfo(try await groupRequest(.create, name, members))
    }

    /// Adds members (the owner or an admin); every member's devices see the change in the
    /// group's order. Those whose `group-adds` setting asks for it are invited instead.
    @discardableResult
    public func addToGroup(_ name: String, _ users: [String]) async throws(ClientError) -> GroupInfo {
        Self.groupInfo(try await groupRequest(.add, name, users))
    }

    /// Removes members (the owner or an admin): they get nothing sent after the removal.
    @discardableResult
    public func removeFromGroup(_ name: String, _ users: [String]) async throws(ClientError) -> GroupInfo {
        Self.groupInfo(try await groupRequest(.remove, name, users))
    }

    /// Makes members admins (the owner only).
    @discardableResult
    public func makeGroupAdmins(_ name: String, _ users: [String]) async throws(ClientError) -> GroupInfo {
        Self.groupInfo(try await groupRequest(.admin, name, users))
    }

    /// Leaves the group; an owner who leaves hands it to an admin (or another member).
    public func leaveGroup(_ name: String) async throws(ClientError) {
        _ = try await groupRequest(.leave, name, [])
    }

    /// The group's members and their roles (members only).
    public func groupMembers(_ name: String) async throws(ClientError) -> GroupInfo {
        Self.groupInfo(try await groupRequest(.members, name, []))
    }

    private func groupRequest(_ action: Simp_GroupRequest.Action, _ name: String, _ users: [String]) async throws(ClientError) -> Simp_GroupAnswer {
        let answer = try await groupRequestOnly(action, name, users)
        // Encrypted: a change this device made is committed to the group's MLS group at once
        // (added members' devices can read at once; removed ones stop at once).
        if configuration.endToEnd, [.create, .add, .remove, .accept].contains(action), let keys = keyring.withLock({ $0 }) {
            await keys.membersChanged(GroupName.address(name), client: self, commit: action != .accept)
        }
        return answer
    }

    private func groupRequestOnly(_ action: Simp_GroupRequest.Action, _ name: String, _ users: [String]) async throws(ClientError) -> Simp_GroupAnswer {
        var request = Simp_GroupRequest()
        request.action = action
        request.group = name.first == GroupName.marker ? String(name.dropFirst()) : name
        request.users = users
        return try await ask(.groupRequest(request), "a group request") { body in
            if case .groupAnswer(let answer)? = body { answer } else { nil }
        }
    }

    private static func groupInfo(_ answer: Simp_GroupAnswer) -> GroupInfo {
        GroupInfo(name: answer.group, members: answer.members.map { GroupMember(name: $0.name, role: GroupMember.Role(rawValue: $0.role) ?? .member) }, seq: answer.groupSeq, invited: answer.invited)
    }

    /// A stored message's identity: message ids are unique per sender.
    private struct MessageKey: Hashable {
        var from: String
        var id: String
    }
}
