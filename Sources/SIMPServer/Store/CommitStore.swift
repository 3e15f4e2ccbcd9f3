import NIOCore
import SIMPCore
import SIMPRedis

/// The commit order in Redis (`CommitScripts.swift`, `CommitFlow`).
extension MessageStore {
    /// The conversation's keys, and a group's members (for a one-to-one conversation a key of
    /// its slot that no script writes, so every key is in one slot).
    private func commitKeys(_ conversation: CommitConversation) -> [any RedisArgument] {
        let members: String = switch conversation {
        case .group(let group): keys.groupMembers(group)
        case .direct: keys.of(conversation.tag, "members")
        }
        return [keys.commitEpoch(conversation), keys.commits(conversation), keys.welcomes(conversation), members,
                keys.welcomeEpochs(conversation), keys.commitGroup(conversation), keys.groupInfo(conversation)]
    }

    private static func isGroup(_ conversation: CommitConversation) -> String {
        if case .group = conversation { "1" } else { "0" }
    }

    /// The key of `device` of `user`'s device certificate (nil: none), whether `peer` exists
    /// (true when there is none to check), and the first added device that has none: one
    /// pipeline, a command per slot.
    func commitSubmitter(user: String, device: String, peer: String?, added: [CommitFlow.AddedDevice],
                         on loop: any EventLoop) -> EventLoopFuture<CommitFlow.Submitter> {
        let reads = [RedisCommand("HGET", [keys.deviceCertificates(user), device])]
            + (peer.map { [RedisCommand("EXISTS", [keys.user($0)])] } ?? [])
            + added.map { RedisCommand("HEXISTS", [keys.deviceCertificates($0.user), $0.device]) }
        return redis.run(reads, on: loop).flatMapThrowing { replies in
            guard replies.count == reads.count else { throw RedisError(.protocolViolation, "commit read returned \(replies.count) replies") }
            let first = peer == nil ? 1 : 2
            var uncertified: CommitFlow.AddedDevice?
            for (index, device) in added.enumerated() where try replies[first + index].checked().int != 1 {
                uncertified = device
                break
            }
            // The certificate: the device key (32 bytes), then the identity's signature.
            let certificate = try replies[0].checked().bytes
            return CommitFlow.Submitter(certifiedKey: certificate.flatMap { $0.count == 96 ? Array($0[0..<32]) : nil },
                                        peerExists: peer == nil ? true : try replies[1].checked().int == 1,
                                        uncertifiedAdded: uncertified)
        }
    }

    /// `group`: the commit's framed MLS group id (`CommitFraming`), compared with the
    /// conversation's recorded one, or recorded when there is none. `welcome`: the commit's
    /// Welcome, stored once, with the devices it is for. `groupInfo`: the new epoch's
    /// `StoredGroupInfo`, kept in place of the last (nil: the last goes).
    func storeCommit(_ conversation: CommitConversation, user: String, epoch: UInt64, entry: [UInt8], welcome: CommitFlow.KeptWelcome?,
                     kept: Int, keptWelcomes: Int = CommitRules.maxKeptWelcomes, group: [UInt8], groupInfo: [UInt8]? = nil,
                     on loop: any EventLoop) -> EventLoopFuture<CommitFlow.Stored> {
        var args: [any RedisArgument] = [user, "\(epoch)", entry, kept, Self.isGroup(conversation), keptWelcomes,
                                         CommitFlow.sameCommitLength(entry), group, groupInfo ?? []]
        if let welcome {
            args.append(welcome.value)
            for device in welcome.devices {
                args.append(device.user)
                args.append(device.field)
            }
        }
        let command = RedisCommand.script(Scripts.submitCommit, keys: commitKeys(conversation), args: args)
        // With `minReplicas`, as a message's `accepted`: WAIT on the same connection after the script.
        let ran: EventLoopFuture<[RedisReplicated]>
        if settings.minReplicas > 0 {
            ran = redis.run([command], on: loop, countingReplicas: RedisReplicaWait(replicas: settings.minReplicas,
                                                                                  timeout: .milliseconds(settings.replicaTimeoutMillis)))
        } else {
            ran = redis.run([command], on: loop).map { $0.map { RedisReplicated(reply: $0, replicas: 0) } }
        }
        return ran.flatMapThrowing { [replicaRule] replies -> CommitFlow.Stored in
            guard let reply = replies.first?.reply else { throw RedisError(.protocolViolation, "commit script returned no reply") }
            let parts = try reply.checked().array ?? []
            guard let status = parts.first?.int else { throw RedisError(.protocolViolation, "commit script returned \(reply)") }
            switch status {
            case 0:
                let now = UInt64(clamping: parts.count > 1 ? parts[1].int ?? 0 : 0)
                guard replicaRule.counts(replicas: replies[0].replicas) else { return .unreplicated(epoch: now, confirmed: replies[0].replicas) }
                return .stored(epoch: now)
            case -1: return .conflict(current: UInt64(clamping: parts.count > 1 ? parts[1].int ?? 0 : 0))
            case -2: return .notAMember
            case -3: return .noSuchGroup
            case -4: return .welcomeToNonMember(parts.count > 1 ? parts[1].string ?? "" : "")
            case -5: return .otherGroup
            default: throw RedisError(.protocolViolation, "commit script returned status \(status)")
            }
        }.flatMap { stored in
            guard case .stored = stored, case .direct(let user, let peer) = conversation else { return loop.makeSucceededFuture(stored) }
            return self.rememberPeers(user, peer, on: loop).map { stored }
        }
    }

    /// The two users of a one-to-one conversation with a commit stored remember each other
    /// (`Keys.directPeers`), each in its own slot: told of each other's key changes, contacts
    /// or not. A hint: a failed write leaves the commit stored, and the next commit writes again.
    private func rememberPeers(_ user: String, _ peer: String, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let writes = [(user, peer), (peer, user)].map { owner, other in
            RedisCommand.script(Scripts.rememberPeer, keys: [keys.directPeers(owner)], args: [other, CommitRules.maxRememberedPeers])
        }
        return redis.run(writes, on: loop).map { _ in () }.recover { _ in () }
    }

    /// `welcomeField`: set for a join (the device's Welcome is read, and the page starts at it);
    /// `external`: the latest GroupInfo is read, and the page starts at it.
    func fetchCommits(_ conversation: CommitConversation, user: String, welcomeField: String?, external: Bool = false, fromEpoch: UInt64,
                      maxCommits: Int, budget: Int, kept: Int, on loop: any EventLoop) -> EventLoopFuture<CommitFlow.Fetched> {
        let args: [any RedisArgument] = [user, welcomeField ?? "", "\(fromEpoch)", maxCommits, budget, Self.isGroup(conversation), kept,
                                         external ? "1" : "0"]
        let command = RedisCommand.script(Scripts.fetchCommits, keys: commitKeys(conversation), args: args)
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let parts = try replies[0].checked().array ?? []
            guard let status = parts.first?.int else { throw RedisError(.protocolViolation, "commit fetch script returned \(replies[0])") }
            switch status {
            case -2: return .notAMember
            case -3: return .noSuchGroup
            default:
                guard status == 0, parts.count >= 5, let current = parts[1].int else {
                    throw RedisError(.protocolViolation, "commit fetch script returned \(parts.count) parts")
                }
                let welcome = parts[2].bytes.flatMap { $0.isEmpty ? nil : $0 }
                let groupInfo = parts[4].bytes.flatMap { $0.isEmpty ? nil : $0 }
                return .page(current: UInt64(clamping: current), welcome: welcome, groupInfo: groupInfo, commits: parts[5...].compactMap(\.bytes),
                             more: parts[3].int == 1)
            }
        }
    }
}
