import NIOCore
import SIMPCore
import SIMPRedis

/// A group's Redis operations: its order and members in its slot, the copies of its entries
/// in each member's slot (`GroupScripts.swift`).
extension MessageStore {
    /// What one copy into a member's inbox did (`Scripts.groupDeliver`).
    struct MemberCopy: Equatable, Sendable {
        /// It stopped at a gap: the log after `mark` is read and copied again.
        var gap: Bool
        var mark: UInt64
        var isMember: Bool
        /// Per entry sent, the inbox seq it got (0: skipped or not reached).
        var seqs: [UInt64]
        /// Where the member's devices are, other than this node.
        var nodes: [String]
        /// The member's unconfirmed group copies reached their bound: the copy stopped, the
        /// rest comes from the log once it confirms (`resume`).
        var held = false
    }

    enum GroupChangeAction: String, Sendable {
        case create, add, remove, leave, admin, accept, decline
    }

    enum GroupChangeResult: Sendable {
        case refused(Simp_ErrorCode)
        /// The changes made, the members after them, and the users invited (not added).
        case changed([GroupChangeMade], members: [Simp_GroupMember], invited: [String])
    }

    /// Stores one group's messages in its order, in one script call (`Scripts.groupStore`).
    /// Outcomes in batch order, and the members after the batch.
    func storeInGroup(_ group: String, _ batch: [StoreRequest], on loop: any EventLoop)
        -> EventLoopFuture<(outcomes: [GroupStoreOutcome], members: [String])> {
        let keys = [self.keys.groupMembers(group), self.keys.groupSeq(group), self.keys.groupLog(group)]
            + batch.map { self.keys.groupIDs(group, from: $0.from) }
        var args: [any RedisArgument] = [settings.messageIDTTLSeconds, settings.historyCap, settings.idsPerSender]
        for request in batch {
            args.append(request.from)
            args.append(request.id)
            args.append(request.answerOnly ? [] : request.bytes)
        }
        let command = RedisCommand.script(Scripts.groupStore, keys: keys, args: args)
        return redis.run([command], on: loop).map { replies in
            do throws(RedisError) {
                let parts = try replies[0].checked().array ?? []
                guard parts.count == 2, let answers = parts[0].array, answers.count == batch.count else {
                    throw RedisError(.protocolViolation, "group store script returned \(replies[0])")
                }
                return (answers.map(Self.groupOutcome), (parts[1].array ?? []).compactMap(\.string))
            } catch {
                return (batch.map { _ in .unavailable(error) }, [])
            }
        }.recover { error in
            let failure = error as? RedisError ?? RedisError(.io, "\(error)")
            return (batch.map { _ in .unavailable(failure) }, [])
        }
    }

    private static func groupOutcome(_ reply: RedisValue) -> GroupStoreOutcome {
        guard let parts = reply.array, let status = parts.first?.int else {
            return .unavailable(RedisError(.protocolViolation, "group store script returned \(reply)"))
        }
        switch status {
        case 1: if let seq = parts.dropFirst().first?.int { return .stored(seq: UInt64(seq), entry: []) }
        case 0:
            if parts.count == 3, let seq = parts[1].int { return .duplicate(seq: UInt64(seq), entry: parts[2].bytes ?? []) }
        case -1: return .noSuchGroup
        case -2: return .notAMember
        case -4: return .notStored
        default: break
        }
        return .unavailable(RedisError(.protocolViolation, "group store script returned \(reply)"))
    }

    /// Copies entries into members' inboxes, one script call per member, in one round trip.
    /// `floors`: a member's highest seq a session of theirs here has seen (numbering never runs
    /// below it; absent: no session here).
    func deliver(group: String, _ plan: [(member: String, entries: [GroupEntry])], floors: [String: UInt64],
                 on loop: any EventLoop) -> EventLoopFuture<[Result<MemberCopy, RedisError>]> {
        guard !plan.isEmpty else { return loop.makeSucceededFuture([]) }
        let commands = plan.map { item in
            let keys = [keys.user(item.member), keys.seq(item.member), keys.inbox(item.member), keys.presence(item.member),
                        keys.groups(item.member), keys.numbering(item.member), keys.blocked(item.member), keys.deliveredMark(item.member),
                        keys.groupCopies(item.member), keys.heldGroups(item.member), keys.blocking(item.member),
                        keys.groupCopiesSince(item.member)]
            var args: [any RedisArgument] = [group, settings.nodeID, floors[item.member].map { Int64($0) } ?? -1, "run id", bounds.limit]
            for entry in item.entries {
                args.append(entry.seq)
                args.append(entry.scriptKind)
                args.append(entry.sender)
                args.append(entry.bytes)
            }
            var command = RedisCommand.script(Scripts.groupDeliver, keys: keys, args: args)
            // ARGV[4], after numkeys and the keys.
            command.runIDArgument = 1 + keys.count + 3
            return command
        }
        return redis.run(commands, on: loop).map { replies in
            replies.map { reply in Result { () throws(RedisError) in try Self.memberCopy(reply) } }
        }.recover { error in
            let failure = error as? RedisError ?? RedisError(.io, "\(error)")
            return plan.map { _ in .failure(failure) }
        }
    }

    private static func memberCopy(_ reply: RedisValue) throws(RedisError) -> MemberCopy {
        let parts = try reply.checked().array ?? []
        if parts.count == 1, parts[0].int == -1 { return MemberCopy(gap: false, mark: 0, isMember: false, seqs: [], nodes: []) }
        guard parts.count == 6, let gap = parts[0].int, let mark = parts[1].int, let member = parts[2].int else {
            throw RedisError(.protocolViolation, "group deliver script returned \(reply)")
        }
        return MemberCopy(gap: gap == 1, mark: UInt64(mark), isMember: member == 1,
                          seqs: (parts[3].array ?? []).map { UInt64($0.int ?? 0) }, nodes: (parts[4].array ?? []).compactMap(\.string),
                          held: parts[5].int == 1)
    }

    /// Where a member's copies of the group stand: the last place copied, and whether it was a
    /// member there (nothing copied yet: 0, false).
    func groupMark(of member: String, in group: String, on loop: any EventLoop) -> EventLoopFuture<(mark: UInt64, isMember: Bool)> {
        redis.run([RedisCommand("HGET", [keys.groups(member), group])], on: loop).flatMapThrowing { replies in
            let words = (try replies[0].checked().string ?? "0 0").split(separator: " ")
            guard words.count == 2, let mark = UInt64(words[0]) else { return (0, false) }
            return (mark, words[1] == "1")
        }
    }

    /// Whether `user` is a member of `group` now, by the group's own members record (what
    /// refuses a non-member's message to the group), not by how far the group's copies to
    /// `user` have reached.
    func isMember(_ user: String, of group: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        redis.run([RedisCommand("HEXISTS", [keys.groupMembers(group), user])], on: loop).flatMapThrowing { replies in
            try replies[0].checked().int == 1
        }
    }

    /// The member's copies of the group are no longer held (nothing of it is left to copy).
    func releaseHeld(_ member: String, group: String, on loop: any EventLoop) -> EventLoopFuture<Void> {
        redis.run([RedisCommand.script(Scripts.releaseHeld, keys: [keys.heldGroups(member)], args: [group])], on: loop).map { _ in () }
    }

    /// The group's log after `after` up to `upTo` (at most `limit` entries), oldest first.
    func groupLog(_ group: String, after: UInt64, upTo: UInt64, limit: Int? = nil,
                  on loop: any EventLoop) -> EventLoopFuture<[(seq: UInt64, bytes: [UInt8])]> {
        let range: [any RedisArgument] = [keys.groupLog(group), "(\(after)", "\(upTo)", "WITHSCORES"]
        let read = RedisCommand("ZRANGEBYSCORE", range + (limit.map { ["LIMIT", 0, $0] as [any RedisArgument] } ?? []))
        return redis.run([read], on: loop).flatMapThrowing { replies in
            let flat = try replies[0].checked().array ?? []
            return stride(from: 0, to: flat.count - 1, by: 2).compactMap { index in
                guard let bytes = flat[index].bytes, let score = flat[index + 1].string.flatMap(Double.init) else { return nil }
                return (UInt64(score), bytes)
            }
        }
    }

    /// One membership change (`Scripts.groupChange`); `users` with the bytes of their entries
    /// (none, in a create or add: the user is invited, until `invitationLapses`, ms).
    func changeGroup(_ action: GroupChangeAction, group: String, by: String, users: [(name: String, entry: [UInt8])],
                     maxMembers: Int, nowMillis: Int64 = 0, invitationLapses: Int64 = 0,
                     on loop: any EventLoop) -> EventLoopFuture<GroupChangeResult> {
        var args: [any RedisArgument] = [action.rawValue, by, maxMembers, settings.historyCap, "\(by) \(invitationLapses)", nowMillis]
        for user in users {
            args.append(user.name)
            args.append(user.entry)
        }
        let command = RedisCommand.script(Scripts.groupChange, keys: [keys.groupMembers(group), keys.groupSeq(group), keys.groupLog(group),
                                                                      keys.groupRemovals(group), keys.groupJoins(group),
                                                                      keys.groupInvited(group), keys.commitEpoch(.group(group)),
                                                                      keys.commits(.group(group)), keys.welcomes(.group(group)),
                                                                      keys.welcomeEpochs(.group(group)), keys.commitGroup(.group(group)),
                                                                      keys.groupInfo(.group(group))], args: args)
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let parts = try replies[0].checked().array ?? []
            guard let status = parts.first?.int else { throw RedisError(.protocolViolation, "group change script returned \(replies[0])") }
            guard status == 0, parts.count == 4 else { return .refused(Simp_ErrorCode(rawValue: Int(status)) ?? .badRequest) }
            let changes = (parts[1].array ?? []).compactMap { change -> GroupChangeMade? in
                guard let fields = change.array, fields.count == 4, let seq = fields[0].int, let user = fields[1].string,
                      let after = fields[3].int, let entry = users.first(where: { $0.name == user })?.entry else { return nil }
                return GroupChangeMade(seq: UInt64(seq), user: user, removes: fields[2].string == "r", after: UInt64(after),
                                       bytes: StoredMessage.appending(groupSeq: UInt64(seq), to: entry))
            }
            return .changed(changes, members: Self.members(parts[2]), invited: (parts[3].array ?? []).compactMap(\.string))
        }
    }

    private static func members(_ reply: RedisValue) -> [Simp_GroupMember] {
        let flat = (reply.array ?? []).compactMap(\.string)
        return stride(from: 0, to: flat.count - 1, by: 2).map { index in
            var member = Simp_GroupMember()
            member.name = flat[index]
            member.role = flat[index + 1]
            return member
        }.sorted { $0.name < $1.name }
    }

    /// The members and their roles; nil when there is no such group.
    func groupMembers(_ group: String, on loop: any EventLoop) -> EventLoopFuture<[Simp_GroupMember]?> {
        redis.run([RedisCommand("HGETALL", [keys.groupMembers(group)])], on: loop).flatMapThrowing { replies in
            let members = Self.members(try replies[0].checked())
            return members.isEmpty ? nil : members
        }
    }

    /// The groups the user is a member of, as their copies last recorded.
    func groups(of user: String, on loop: any EventLoop) -> EventLoopFuture<[String]> {
        redis.run([RedisCommand("HGETALL", [keys.groups(user)])], on: loop).flatMapThrowing { replies in
            let flat = try (replies[0].checked().array ?? []).compactMap(\.string)
            return stride(from: 0, to: flat.count - 1, by: 2).filter { flat[$0 + 1].hasSuffix(" 1") }.map { flat[$0] }.sorted()
        }
    }

    /// A page of the group's log, newest pages first (like a conversation's history), for a
    /// member only (nil when `user` is not one), from the entry that added them on. Messages of
    /// senders the member blocked are left out (they keep their places: paging is unchanged).
    func groupHistory(_ group: String, for user: String, before: UInt64, limit: Int, budget: Int,
                      on loop: any EventLoop) -> EventLoopFuture<HistoryPaging.Page?> {
        let skip = Int(min(before, UInt64(HistoryPaging.maxPosition)))
        let read = min(limit, HistoryPaging.maxReadPerPage)
        let command = RedisCommand.script(Scripts.groupHistory, keys: [keys.groupMembers(group), keys.groupLog(group), keys.groupJoins(group)],
                                          args: [user, skip, read])
        let blocked = RedisCommand("SMEMBERS", [keys.blocked(user)])
        return redis.run([command, blocked], on: loop).flatMapThrowing { replies in
            let parts = try replies[0].checked().array ?? []
            guard let visible = parts.first?.int, visible >= 0 else { return nil }
            let items = (parts.count > 1 ? parts[1].array ?? [] : []).compactMap(\.bytes)
            var page = HistoryPaging.page(oldestFirst: items, before: skip, stored: Int(visible), budget: budget)
            let hidden = Set(try (replies[1].checked().array ?? []).compactMap(\.string))
            if !hidden.isEmpty { page.items.removeAll { hidden.contains(GroupFanout.sender(of: $0)) } }
            return page
        }
    }
}

/// Where users stand toward a group's adder (`Scripts.groupStanding`), and the invitations
/// waiting for a user (`Scripts.invitations`).
extension MessageStore {
    /// Per user, how it stands toward `adder`; nil for a user that does not exist.
    func groupStanding(of users: [String], toward adder: String, on loop: any EventLoop) -> EventLoopFuture<[GroupConsent.Standing?]> {
        guard !users.isEmpty else { return loop.makeSucceededFuture([]) }
        let reads = users.map {
            RedisCommand.script(Scripts.groupStanding, keys: [keys.user($0), keys.blocked($0), keys.settings($0), keys.contacts($0), keys.groups($0)],
                                args: [adder])
        }
        return redis.run(reads, on: loop).flatMapThrowing { replies in
            try replies.map { reply in
                let parts = try reply.checked().array ?? []
                guard parts.count == 5 else { return nil }
                return GroupConsent.Standing(blockedAdder: parts[0].int == 1, contactsOnly: parts[1].int == 1,
                                             adds: GroupAdds(rawValue: parts[2].string ?? "") ?? .contacts,
                                             isContact: parts[3].int == 1, groups: Int(parts[4].int ?? 0))
            }
        }
    }

    enum InvitationStep: Sendable {
        case list
        case record(group: String, by: String, lapses: Int64)
        case forget(group: String)
    }

    /// The invitations waiting for `user` after `step`, by group.
    func invitations(of user: String, _ step: InvitationStep, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<[Simp_GroupInvitation]> {
        var args: [any RedisArgument] = [nowMillis]
        switch step {
        case .list: args.append("list")
        case .record(let group, let by, let lapses): args += ["record", group, "\(by) \(lapses)", GroupConsent.invitationsKept] as [any RedisArgument]
        case .forget(let group): args += ["forget", group] as [any RedisArgument]
        }
        let command = RedisCommand.script(Scripts.invitations, keys: [keys.invitations(user)], args: args)
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let flat = try (replies[0].checked().array ?? []).compactMap(\.string)
            return stride(from: 0, to: flat.count - 1, by: 2).compactMap { index -> Simp_GroupInvitation? in
                let value = flat[index + 1].split(separator: " ")
                guard value.count == 2, let lapses = Int64(value[1]) else { return nil }
                var invitation = Simp_GroupInvitation()
                invitation.group = flat[index]
                invitation.by = String(value[0])
                invitation.expires = lapses
                return invitation
            }.sorted { $0.group < $1.group }
        }
    }
}
