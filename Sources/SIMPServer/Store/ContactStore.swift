import NIOCore
import SIMPCore
import SIMPRedis

/// A user's contacts, blocks and settings in Redis (`ContactScripts.swift`).
extension MessageStore {
    /// One step of a contact request on `owner`'s records (`Scripts.contact`).
    func contactStep(_ step: ContactFlow.Step, owner: String, peer: String, on loop: any EventLoop) -> EventLoopFuture<ContactFlow.Result> {
        let command = RedisCommand.script(Scripts.contact,
                                          keys: [keys.user(owner), keys.contacts(owner), keys.blocked(owner), keys.contactRequests(owner),
                                                 keys.presence(owner), keys.blocking(owner)],
                                          args: [step.rawValue, peer, 3600, settings.contactRequestsPerHour])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let parts = try replies[0].checked().array ?? []
            guard parts.count == 4, let status = parts[0].int else {
                throw RedisError(.protocolViolation, "contact script returned \(replies[0])")
            }
            let pairs = Self.pairs(parts[1])
            return ContactFlow.Result(status: Int(status), contacts: pairs.map { Simp_Contact(name: $0.0, state: $0.1) },
                                      blocked: (parts[2].array ?? []).compactMap(\.string), nodes: (parts[3].array ?? []).compactMap(\.string))
        }
    }

    /// The user's settings after setting `changes` (a value of nil: back to its default), and
    /// where its devices are.
    func settings(of user: String, changing changes: [(name: String, value: String?)], on loop: any EventLoop)
        -> EventLoopFuture<(settings: [String: String], nodes: [String])> {
        let args: [any RedisArgument] = changes.flatMap { [$0.name, $0.value ?? ""] as [any RedisArgument] }
        let command = RedisCommand.script(Scripts.settings, keys: [keys.settings(user), keys.presence(user)], args: args)
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let parts = try replies[0].checked().array ?? []
            guard parts.count == 2 else { throw RedisError(.protocolViolation, "settings script returned \(replies[0])") }
            return (Dictionary(Self.pairs(parts[0]), uniquingKeysWith: { $1 }), (parts[1].array ?? []).compactMap(\.string))
        }
    }

    /// An HGETALL reply's field/value pairs.
    private static func pairs(_ reply: RedisValue) -> [(String, String)] {
        let flat = (reply.array ?? []).compactMap(\.string)
        return stride(from: 0, to: flat.count - 1, by: 2).map { (flat[$0], flat[$0 + 1]) }
    }
}

extension Simp_Contact {
    init(name: String, state: String) {
        self.init()
        self.name = name
        self.state = state
    }
}

/// Read receipts in Redis (`Scripts.readMarks`, `Scripts.groupReadMarks`).
extension MessageStore {
    /// What the store found of a request's marks.
    struct GenuineReads: Sendable, Equatable {
        /// The marks that name messages of the reader's inbox, in the request's order.
        var marks: [Simp_ReadMark]
        /// Group marks left out because the reader is not a member of the group.
        var notMember = 0
    }

    /// The marks that name messages in `reader`'s inbox; nil when the reader turned read
    /// receipts off. A group mark holds when both the reader's slot (the group's copies to the
    /// reader reached its place) and the group's (the reader is a member, the sender's id is at
    /// that place) say so: one command per slot, in one round trip.
    func genuineReads(_ marks: [Simp_ReadMark], reader: String, on loop: any EventLoop) -> EventLoopFuture<GenuineReads?> {
        guard !marks.isEmpty else { return loop.makeSucceededFuture(GenuineReads(marks: [])) }
        var names = [keys.settings(reader)]
        var index: [String: Int] = [:]
        func key(_ name: String) -> Int {
            if let known = index[name] { return known }
            names.append(name)
            index[name] = names.count
            return names.count
        }
        var args: [any RedisArgument] = []
        // Per group: its marks (their place in `marks`), its senders' keys and its arguments.
        var groups: [(marks: [Int], keys: [String], args: [any RedisArgument])] = []
        var groupIndex: [String: Int] = [:]
        for (place, mark) in marks.enumerated() {
            let inbox = mark.group.isEmpty ? keys.messageIDs(to: reader, from: mark.fromUser) : keys.groups(reader)
            args += [key(inbox), mark.messageID, Int64(mark.seq), mark.group, Int64(mark.groupSeq)] as [any RedisArgument]
            guard !mark.group.isEmpty else { continue }
            if groupIndex[mark.group] == nil {
                groupIndex[mark.group] = groups.count
                groups.append(([], [keys.groupMembers(mark.group)], [reader]))
            }
            let senderKey = keys.groupIDs(mark.group, from: mark.fromUser)
            var group = groups[groupIndex[mark.group]!]
            if !group.keys.contains(senderKey) { group.keys.append(senderKey) }
            // KEYS of the group's script count from 1: members first, then the senders' ids.
            let keyIndex = group.keys.firstIndex(of: senderKey)! + 1
            group.marks.append(place)
            group.args += [keyIndex, mark.messageID, Int64(mark.groupSeq)] as [any RedisArgument]
            groups[groupIndex[mark.group]!] = group
        }
        let commands = [RedisCommand.script(Scripts.readMarks, keys: names, args: args)]
            + groups.map { RedisCommand.script(Scripts.groupReadMarks, keys: $0.keys, args: $0.args) }
        let groupMarks = groups.map(\.marks)
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            let parts = try replies[0].checked().array ?? []
            guard parts.first?.int == 1 else { return nil }
            var holds = Set(parts.dropFirst().compactMap { $0.int }.map { Int($0) - 1 })
            var out = GenuineReads(marks: [])
            for (places, reply) in zip(groupMarks, replies.dropFirst()) {
                let answer = try reply.checked().array ?? []
                let inGroup = Set(answer.dropFirst().compactMap { $0.int }.compactMap { $0 >= 1 && $0 <= places.count ? places[Int($0) - 1] : nil })
                if answer.first?.int != 1 { out.notMember += places.count }
                holds.subtract(Set(places).subtracting(inGroup))
            }
            out.marks = marks.indices.filter(holds.contains).map { marks[$0] }
            return out
        }
    }

    /// Which of `users` take read receipts from `reader` (the setting is not "off", and they
    /// did not block the reader).
    func takingReadReceipts(_ users: [String], from reader: String, on loop: any EventLoop) -> EventLoopFuture<Set<String>> {
        guard !users.isEmpty else { return loop.makeSucceededFuture([]) }
        let checks = users.map { RedisCommand.script(Scripts.takesReadReceipt, keys: [keys.settings($0), keys.blocked($0)], args: [reader]) }
        return redis.run(checks, on: loop).flatMapThrowing { replies in
            Set(try zip(users, replies).filter { try $0.1.checked().int == 1 }.map(\.0))
        }
    }
}

/// Typing (`Scripts.typingNodes`).
extension MessageStore {
    /// The nodes where `to`'s devices are, if `to` takes `from`'s typing; none otherwise.
    func typingNodes(from: String, to: String, on loop: any EventLoop) -> EventLoopFuture<[String]> {
        let command = RedisCommand.script(Scripts.typingNodes, keys: [keys.blocked(to), keys.settings(to), keys.contacts(to), keys.presence(to)],
                                          args: [from])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            (try replies[0].checked().array ?? []).compactMap(\.string)
        }
    }
}

/// Presence (`Scripts.presenceCircle`, `Scripts.presenceOf`).
extension MessageStore {
    /// Who may see `user`'s presence (its contacts and the members of its groups, less those it
    /// blocked, at most `limit`); empty when it hides it (last-seen off).
    /// `ignoringOwnSetting`: the user's own last-seen setting does not matter (it asks to see others').
    /// `groups`: how many groups' member lists were read for it (what it cost, `RequestCost.presenceRead`).
    /// Fails when a read does (an error reply): an empty circle would tell nobody, silently.
    /// `withPeers`: the peers of its encrypted one-to-one conversations too, after its contacts
    /// (a key change reaches them, contacts or not).
    func presenceCircle(of user: String, ignoringOwnSetting: Bool = false, withPeers: Bool = false, limit: Int = 2_000,
                        on loop: any EventLoop) -> EventLoopFuture<(users: [String], groups: Int)> {
        let command = RedisCommand.script(Scripts.presenceCircle, keys: [keys.contacts(user), keys.groups(user), keys.blocked(user), keys.settings(user),
                                                                         keys.directPeers(user)],
                                          args: [ignoringOwnSetting ? "any" : "own", withPeers ? "peers" : ""])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            try replies[0].checked().array ?? []
        }.flatMap { parts in
            // No parts: the user hides its presence (last-seen off).
            guard parts.count >= 3 else { return loop.makeSucceededFuture(([], 0)) }
            let contacts = (parts[0].array ?? []).compactMap(\.string) + (parts.count > 3 ? (parts[3].array ?? []).compactMap(\.string) : [])
            let groups = (parts[1].array ?? []).compactMap(\.string)
            let blocked = Set((parts[2].array ?? []).compactMap(\.string))
            let reads = groups.map { RedisCommand("HKEYS", [self.keys.groupMembers($0)]) }
            let members = reads.isEmpty ? loop.makeSucceededFuture([]) : self.redis.run(reads, on: loop)
            return members.flatMapThrowing { replies in
                // Contacts first: past the limit, group members are left out before them.
                var members = Set<String>()
                for reply in replies { members.formUnion((try reply.checked().array ?? []).compactMap(\.string)) }
                let first = Set(contacts).subtracting(blocked).subtracting([user])
                let rest = members.subtracting(first).subtracting(blocked).subtracting([user])
                return (Array((first.sorted() + rest.sorted()).prefix(limit)).sorted(), groups.count)
            }
        }
    }

    /// The presence of each of `users` as `asker` may see it.
    func presence(of users: [String], seenBy asker: String, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<[Simp_UserPresence]> {
        guard !users.isEmpty else { return loop.makeSucceededFuture([]) }
        let oldest = nowMillis - Int64(settings.presenceTTLSeconds) * 1000
        let commands = users.map { user in
            RedisCommand.script(Scripts.presenceOf, keys: [keys.settings(user), keys.blocked(user), keys.presence(user), keys.devices(user)],
                                args: [asker, oldest])
        }
        return redis.run(commands, on: loop).flatMapThrowing { replies in
            try zip(users, replies).map { user, reply in
                let parts = try reply.checked().array ?? []
                var presence = Simp_UserPresence()
                presence.user = user
                let state = parts.first?.int ?? 0
                presence.state = state == 2 ? "hidden" : (state == 1 ? "online" : "offline")
                presence.lastSeen = state == 2 ? 0 : (parts.count > 1 ? parts[1].int ?? 0 : 0)
                return presence
            }
        }
    }

    /// Where each of `watchers`' devices are, per node, leaving out those who blocked `user`.
    func nodes(of watchers: [String], watching user: String, on loop: any EventLoop) -> EventLoopFuture<[String: [String]]> {
        guard !watchers.isEmpty else { return loop.makeSucceededFuture([:]) }
        let reads = watchers.map { RedisCommand.script(Scripts.watcherNodes, keys: [keys.presence($0), keys.blocked($0)], args: [user]) }
        return redis.run(reads, on: loop).flatMapThrowing { replies in
            var byNode: [String: [String]] = [:]
            for (watcher, reply) in zip(watchers, replies) {
                for node in Set((try reply.checked().array ?? []).compactMap(\.string)) { byNode[node, default: []].append(watcher) }
            }
            return byNode
        }
    }
}
