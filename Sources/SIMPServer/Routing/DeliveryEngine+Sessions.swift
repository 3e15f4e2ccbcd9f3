import Foundation
import Crypto
import NIOCore
import SIMPCore

/// Sessions: opened, replaced, closed, ended by an administrator; presence; other nodes' notices.
extension DeliveryEngine {
    /// What a CONNECT asks for, once its token is verified.
    struct SessionRequest: Sendable {
        var user: String
        var device: String
        /// When the token was issued (ms since the epoch): a device revoked since refuses it.
        var tokenIssuedMillis: Int64
        var lastSeq: UInt64
        var takesBundles = false
        var takesEarly = false
        /// The highest seq the client holds without confirming it (`receivedSeq`), if above `lastSeq`.
        var receivedSeq: UInt64 = 0

        /// The highest seq the client has seen: numbering never goes at or below it again.
        var seenSeq: UInt64 { max(lastSeq, receivedSeq) }
    }

    /// A session opened and not yet answered: what its CONNECT's answer needs once its
    /// numbering is checked.
    struct Connecting {
        var attempt: UInt64
        var bindToken: [UInt8]
        var lastSeq: UInt64
        var seenSeq: UInt64
        /// The device's confirmed mark in the store.
        var deviceMark: UInt64
        var devices: Int
    }

    /// A device presented a valid token (`attempt` names its CONNECT): the store registers it first.
    mutating func connectAsked(_ request: SessionRequest, attempt: UInt64, now: Moment) {
        act(.registerDevice(attempt: attempt, request, millis: now.millis))
    }

    /// The store registered the device, or refused it. A registered one gets its session,
    /// and its numbering is checked before the CONNECT is answered.
    mutating func registered(_ request: SessionRequest, _ registration: MessageStore.DeviceRegistration, attempt: UInt64, now: Moment) {
        if let refusal = Self.refusal(registration, request) {
            act(.connectRefused(attempt: attempt, refusal))
            return
        }
        guard case .registered(let deviceMark, let devices, let nodes, let filtered) = registration else { return }
        var wanted = request
        // A user who filters senders takes nothing early: a message pushed before its store
        // answered could be one its filters refuse.
        if filtered { wanted.takesEarly = false }
        let (session, bindToken) = open(wanted, devices: devices, nodes: nodes, now: now)
        connecting[session.id] = Connecting(attempt: attempt, bindToken: bindToken, lastSeq: request.lastSeq, seenSeq: request.seenSeq,
                                            deviceMark: deviceMark, devices: devices)
        act(.opened(attempt: attempt, session: session.id))
        act(.repairNumbering(session: session.id, user: request.user, lastSeq: request.seenSeq))
    }

    /// The new session's numbering was checked: its CONNECT is answered, or refused (and the
    /// session closed) when the check failed.
    mutating func numberingRepaired(_ id: UInt64, _ moved: Result<Int, any Error>, now: Moment) {
        guard let pending = connecting.removeValue(forKey: id), let session = sessions[id] else { return }
        switch moved {
        case .success(let count):
            numberingChecked(session, lastSeq: pending.lastSeq, seenSeq: pending.seenSeq, deviceMark: pending.deviceMark, moved: count)
            act(.connectAnswered(attempt: pending.attempt, connectResponse(session, bindToken: pending.bindToken, deviceMark: pending.deviceMark,
                                                                           devices: pending.devices, udpPort: udpPort ?? 0)))
        case .failure(let error):
            act(.connectRefused(attempt: pending.attempt, error))
            close(id, now: now)
        }
    }

    /// Why the store refused the device a session.
    static func refusal(_ registration: MessageStore.DeviceRegistration, _ request: SessionRequest) -> ServerError? {
        switch registration {
        case .registered:
            return nil
        case .tooMany(let devices):
            return ServerError(.tooManyDevices, "\(request.user) has \(devices) devices, the most this server allows; "
                               + "revoke one first (/device revoke NAME)")
        case .revoked:
            return .deviceRevoked(request.device, of: request.user)
        }
    }

    /// A device whose token is valid and whose registration the store took (`devices` of the
    /// user, connected on `nodes`): its session goes into the table, replacing the same
    /// device's older one here. Its other devices stay. Its numbering is checked next.
    mutating func open(_ request: SessionRequest, devices: Int, nodes: [String], now: Moment) -> (session: Session, bindToken: [UInt8]) {
        let user = request.user
        // The session's path validator forgets it once used; only the answer needs it too.
        let bindToken = randomBytes(16)
        let key = SymmetricKey(data: randomBytes(DatagramSeal.keySize))
        let session = Session(id: newSessionID(), user: user, device: request.device, bindToken: bindToken, key: key,
                              deviceMark: request.lastSeq, policy: settings.retransmit,
                              bucket: TokenBucket(rate: settings.messagesPerSecond, burst: settings.messageBurst, now: now.deadline))
        session.takesBundles = request.takesBundles
        session.takesEarly = request.takesEarly
        if let previous = sessions.insert(session) {
            act(.end(session: previous.id, .error(.sessionReplaced, "a newer session of \(user)'s device \(request.device) connected")))
            sessionClosed(previous, now: now)
        }
        deviceCount(of: user, is: devices)
        let others = nodes.filter { $0 != settings.nodeID }
        if devices > 1, !others.isEmpty { act(.publish(.devices(user: user, count: devices), to: others)) }
        metrics.sessions.set(Int64(sessions.count))
        logger.info("session opened", metadata: session.logMetadata)
        // Stores made from now on run in Redis after the numbering check (one connection, in
        // order), so they may already number above what the client has seen.
        session.numberingFloor = request.seenSeq
        return (session, bindToken)
    }

    /// The notice that `user`'s keys changed, in `recipient`'s inbox: never in a history, and
    /// not stored for a recipient who blocked `user` (who is told nothing of `user`, as of its
    /// presence).
    static func keysNotice(of user: String, to recipient: String, id: UInt64, nowMillis: Int64) -> StoreRequest {
        var notice = StoreRequest.notice(.keysChanged, from: user, to: recipient, owner: recipient, id: id, nowMillis: nowMillis)
        notice.inHistory = false
        notice.blocksApply = recipient != user
        notice.lane = "keys-changed"
        return notice
    }

    /// A notice's id, from the engine's randomness.
    private func newNoticeID() -> UInt64 {
        randomBytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// A session id not in use, from the engine's randomness (never 0).
    private func newSessionID() -> UInt64 {
        while true {
            let id = randomBytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            if id != 0, sessions[id] == nil { return id }
        }
    }

    /// The session's numbering was checked (`moved` entries renumbered past the client's
    /// `lastSeq`); `deviceMark` is its device's confirmed mark in the store.
    mutating func numberingChecked(_ session: Session, lastSeq: UInt64, seenSeq: UInt64, deviceMark: UInt64, moved: Int) {
        if moved > 0 {
            metrics.renumbered.increment(by: Int64(moved))
            logger.warning("Redis lost numbers \(session.user) had seen; \(moved) messages stored since moved past seq \(seenSeq)",
                           metadata: session.logMetadata)
        }
        session.deviceMark = max(lastSeq, deviceMark)
        // The device has more than the server knows it confirmed: its last receipt was lost
        // with the previous connection (or node). Apply it now.
        if lastSeq > deviceMark { recordReceipt(.init(user: session.user, device: session.device, deviceMark: lastSeq, needsEntries: true)) }
    }

    /// The answer to the CONNECT that opened `session`.
    func connectResponse(_ session: Session, bindToken: [UInt8], deviceMark: UInt64, devices: Int, udpPort: Int) -> Simp_ConnectResponse {
        var response = Simp_ConnectResponse()
        response.sessionID = session.id
        response.bindToken = Data(bindToken)
        response.confirmedSeq = deviceMark
        response.heartbeatMillis = UInt32(settings.heartbeat.nanoseconds / 1_000_000)
        response.user = session.user
        response.udpPort = UInt32(udpPort)
        response.sessionKey = session.key.withUnsafeBytes { Data($0) }
        response.bundles = true
        response.early = session.takesEarly
        response.device = session.device
        response.devices = UInt32(devices)
        response.maxMessageBytes = UInt32(settings.maxMessageBytes)
        return response
    }

    /// Every session of the user here learns how many devices the user has.
    func deviceCount(of user: String, is count: Int) {
        for session in sessions.sessions(of: user) { session.devices = count }
    }

    /// The session's control connection closed (or its opening failed).
    mutating func close(_ id: UInt64, now: Moment) {
        guard let session = sessions.remove(id) else { return }
        sessionClosed(session, now: now)
    }

    private mutating func sessionClosed(_ session: Session, now: Moment) {
        if let pending = connecting.removeValue(forKey: session.id) {
            act(.connectRefused(attempt: pending.attempt, ServerError(.sessionClosed, "the session closed before it was ready")))
        }
        metrics.sessions.set(Int64(sessions.count))
        if let path = session.datagramPath { metrics.pathChanged(from: path, to: nil) }
        presenceDue[session.id] = nil
        presenceRenewals[session.id] = nil
        logger.info("session closed", metadata: session.logMetadata)
        act(.closed(session: session.id))
        act(.clearPresence(user: session.user, device: session.device, session: session.id, millis: now.millis))
    }

    /// An administrator closes the user's sessions on this node (only `session`, when given):
    /// the clients are told not to reconnect.
    mutating func closeByAdministrator(user: String, session id: UInt64?, now: Moment) {
        for session in sessions.sessions(of: user) where id == nil || session.id == id {
            logger.notice("session closed by an administrator", metadata: session.logMetadata)
            end(session, .sessionClosed, "an administrator closed this session", now: now)
        }
    }

    private mutating func end(_ session: Session, _ code: Simp_ErrorCode, _ reason: String, now: Moment) {
        act(.end(session: session.id, .error(code, reason)))
        close(session.id, now: now)
    }

    // MARK: other nodes

    /// What another node told this one.
    mutating func received(_ notice: NodeNotice) {
        switch notice {
        case .inbox(let user):
            for session in sessions.sessions(of: user) where session.isBound { catchUp(session) }
        case .delivered(let sender, let messages):
            for session in sessions.sessions(of: sender) {
                for item in messages {
                    act(.send(Self.delivered(id: item.messageID, to: item.toUser, seq: item.seq, member: item.member), session: session.id))
                }
            }
        case .devices(let user, let count):
            deviceCount(of: user, is: count)
        case .filtered(let user):
            for session in sessions.sessions(of: user) { session.takesEarly = false }
        case .typing(let from, let to, let sealed):
            relayTyping(from: from, to: to, sealed: sealed)
        case .presence(let change, let watchers):
            relayPresence(change, to: watchers)
        case .keys(let user, let watchers):
            relayKeys(of: user, to: watchers)
        }
    }

    /// The user blocked someone or turned contacts-only on: its sessions here, and on `nodes`,
    /// take nothing early from now on.
    mutating func filtered(user: String, nodes: [String]) {
        received(.filtered(user: user))
        let others = nodes.filter { $0 != settings.nodeID }
        if !others.isEmpty { act(.publish(.filtered(user: user), to: others)) }
    }

    /// `change` to those who may see it: relayed to those here, published to the other nodes.
    mutating func presenceWatchers(_ change: PresenceChange, byNode: [String: [String]]) {
        for (node, watchers) in byNode.sorted(by: { $0.key < $1.key }) {
            if node == settings.nodeID {
                relayPresence(change, to: watchers)
            } else {
                act(.publish(.presence(change, watchers: watchers), to: [node]))
            }
        }
    }

    /// `user`'s key directory changed: a KEYS_CHANGED notice stored in the inbox of each of
    /// `circle` and of `user`, so that a device away learns of it when back.
    mutating func keysCircle(user: String, circle: [String], now: Moment) {
        for recipient in Set(circle + [user]).sorted() {
            enqueueStore(Self.keysNotice(of: user, to: recipient, id: newNoticeID(), nowMillis: now.millis), now: now)
        }
    }

    /// `user`'s key directory changed: a KEYS datagram told to the watchers here, published to
    /// the other nodes (a device bound now learns at once).
    mutating func keysWatchers(user: String, byNode: [String: [String]]) {
        for (node, watchers) in byNode.sorted(by: { $0.key < $1.key }) {
            if node == settings.nodeID {
                relayKeys(of: user, to: watchers)
            } else {
                act(.publish(.keys(user: user, watchers: watchers), to: [node]))
            }
        }
    }

    /// A KEYS datagram naming `user` to the bound sessions here of `watchers`.
    mutating func relayKeys(of user: String, to watchers: [String]) {
        for watcher in watchers {
            for session in sessions.sessions(of: watcher) where session.isBound {
                if sendDatagram(to: session, kind: .keys, payload: Array(user.utf8)) { metrics.keysRelayed.increment() }
            }
        }
    }

    /// `from`'s typing to `to`, whose devices are on `nodes`: relayed here, published elsewhere.
    mutating func typingNodes(from: String, to: String, nodes: [String], sealed: [UInt8]? = nil) {
        if nodes.contains(settings.nodeID) { relayTyping(from: from, to: to, sealed: sealed) }
        let others = nodes.filter { $0 != settings.nodeID }
        if !others.isEmpty { act(.publish(.typing(from: from, to: to, sealed: sealed), to: others)) }
    }

    /// Presence entries were written: a user none of whose other devices was present came online.
    mutating func presenceWritten(_ entries: [MessageStore.Presence], first: [Bool]) {
        for (entry, first) in zip(entries, first) where first {
            act(.announcePresence(PresenceChange(user: entry.user, online: true, since: entry.entry.seenMillis)))
        }
    }

    /// The user's device's presence was cleared: with none left the user went offline.
    mutating func presenceCleared(user: String, devicesPresent: Int, millis: Int64) {
        guard devicesPresent == 0, sessions.sessions(of: user).isEmpty else { return }
        act(.announcePresence(PresenceChange(user: user, online: false, since: millis)))
    }

    /// `change` to the bound sessions here of those who may see it.
    mutating func relayPresence(_ change: PresenceChange, to watchers: [String]) {
        for watcher in watchers {
            for session in sessions.sessions(of: watcher) where session.isBound {
                if sendDatagram(to: session, kind: .presence, payload: change.payload) { metrics.presenceRelayed.increment() }
            }
        }
    }

    /// This node's notices may have been lost (its subscription broke and was made again): every
    /// bound session reads its inbox, so nothing stored meanwhile on another node waits for the
    /// next message or reconnect to be pushed.
    mutating func catchUpEverySession() {
        for session in sessions.all where session.isBound && session.synced { catchUp(session) }
    }

    // MARK: presence

    /// Presence is written with every other session's that fell due: a new address on the next
    /// tick; a keepalive's renewal (only the TTL: 60 s of it left to spare) within
    /// `presenceGathering`, so an idle node with 20,000 sessions makes one Redis round trip a
    /// second for them all.
    mutating func refreshPresence(_ session: Session, promptly: Bool, now: Moment) {
        guard session.isBound else { return }
        session.lastPresenceWrite = now.deadline
        if promptly {
            presenceDue[session.id] = session
            ask(.tick, after: settings.tick)
        } else {
            presenceRenewals[session.id] = session
            ask(.presenceRenewal, after: settings.presenceGathering)
        }
    }

    /// A keepalive renews presence a third of its TTL after the last write.
    func presenceAging(_ session: Session, now: Moment) -> Bool {
        now.deadline - session.lastPresenceWrite > .seconds(Int64(configuration.presenceTTLSeconds / 3))
    }

    mutating func renewPresence(now: Moment) {
        let renewals = presenceRenewals.values.filter { sessions.isCurrent($0) && $0.address != nil }
        presenceRenewals.removeAll(keepingCapacity: true)
        guard !renewals.isEmpty else { return }
        act(.renewPresence(renewals.compactMap { presence($0, now: now) }, sessions: renewals.map(\.id)))
    }

    /// The renewals' answers: a presence that is gone (Redis restarted without it, or the TTL
    /// ran out) is written whole. The renewal also brings each session its user's device count
    /// (a notice may be lost).
    mutating func presenceRenewed(_ ids: [UInt64], _ answers: [(renewed: Bool, devices: Int)], now: Moment) {
        for (id, answer) in zip(ids, answers) {
            guard let session = sessions[id] else { continue }
            if !answer.renewed { presenceDue[id] = session }
            if answer.devices > 0 { session.devices = answer.devices }
        }
        writePresence(now: now)
    }

    mutating func writePresence(now: Moment) {
        guard !presenceDue.isEmpty else { return }
        let entries = presenceDue.values.filter { sessions.isCurrent($0) }.compactMap { presence($0, now: now) }
        presenceDue.removeAll(keepingCapacity: true)
        guard !entries.isEmpty else { return }
        act(.setPresence(entries))
    }

    /// The session's presence entry as of now (nil before it has an address).
    private func presence(_ session: Session, now: Moment) -> MessageStore.Presence? {
        guard let address = session.address else { return nil }
        let entry = PresenceEntry(node: settings.nodeID, session: session.id, address: Self.describe(address), seenMillis: now.millis)
        return MessageStore.Presence(user: session.user, device: session.device, entry: entry)
    }
}

extension DeliveryEngine {
    /// Each session's path as its congestion controller sees it (GET /sessions), by user.
    func pathReport() -> String {
        var lines = ["user device session window_bytes in_flight_bytes srtt_ms lost congestion_events ceiling_bytes_per_s"]
        for session in sessions.all.sorted(by: { ($0.user, $0.id) < ($1.user, $1.id) }) {
            let c = session.pushes.congestion
            let srtt = session.pushes.smoothedRTT.map { String(format: "%.2f", Double($0.nanoseconds) / 1e6) } ?? "-"
            let ceiling = c.ceiling.map { String(Int($0)) } ?? "-"
            lines.append("\(session.user) \(session.device) \(session.id) \(c.window) \(c.bytesInFlight) \(srtt) \(c.lost) \(c.congestionEvents) \(ceiling)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
