import NIOCore
import SIMPCore

/// Pushes to recipients: inbox reads, group copies, datagrams out and their retransmits.
extension DeliveryEngine {
    /// The inbox read after the bind: everything stored before it.
    mutating func sync(_ session: Session) {
        act(.readInbox(session: session.id, user: session.user, after: session.deviceMark, .sync))
    }

    /// Pushes what another node stored for this session since its last push. One read at a
    /// time per session: notices that arrive meanwhile make one more read after it.
    mutating func catchUp(_ session: Session) {
        guard let covering = session.catchUp.want() else { return }
        act(.readInbox(session: session.id, user: session.user, after: max(session.deviceMark, session.highestPushed), .catchUp(covering: covering)))
    }

    /// A session's inbox read came back: its entries are pushed; a failed read is tried again.
    mutating func inboxRead(session id: UInt64, _ read: InboxRead, _ result: Result<[[UInt8]], any Error>, now: Moment) {
        guard let session = sessions[id] else { return }
        switch (read, result) {
        case (.sync, .success(let items)):
            session.synced = true
            pushStored(items, to: session, now: now)
        case (.sync, .failure(let error)):
            logger.warning("sync failed; retrying", metadata: session.logMetadata.merging(["error": "\(error)"]) { $1 })
            ask(.read(session: id, .sync), after: .seconds(1))
        case (.catchUp(let covering), _):
            if case .success(let items) = result { pushStored(items, to: session, now: now) }
            if case .failure(let error) = result {
                logger.warning("catch-up read failed; retrying", metadata: session.logMetadata.merging(["error": "\(error)"]) { $1 })
            }
            let succeeded = if case .success = result { true } else { false }
            guard let wait = session.catchUp.finished(covering: covering, succeeded: succeeded) else { return }
            ask(.read(session: id, .catchUp(covering: covering)), after: wait)
        }
    }

    /// A member's sessions here read their inbox: entries found copied already may never have
    /// been pushed (the node that copied them died).
    mutating func recheck(member: String) {
        for session in sessions.sessions(of: member) where session.isBound { catchUp(session) }
    }

    /// Pushes a group's entries just copied into a member's inbox to the member's sessions here.
    mutating func groupCopied(_ member: String, _ copies: [GroupCopy], now: Moment) {
        for recipient in sessions.sessions(of: member) {
            for copy in copies {
                recipient.raiseNumberingFloor(copy.seq)
                if recipient.isBound { push(copy.seq, copy.push, to: recipient, now: now) }
            }
        }
        sendDatagrams(now: now)
    }

    /// Pushes inbox entries read back from the store (each carries its seq and sender).
    mutating func pushStored(_ items: [[UInt8]], to session: Session, now: Moment) {
        for bytes in items {
            guard let message = try? Simp_Message(serializedBytes: bytes) else { continue }
            push(message.seq, Push(stored: message, bytes: bytes, recipient: session.user), to: session, now: now)
        }
        sendDatagrams(now: now)
    }

    /// Queues the push for the next `sendDatagrams`.
    mutating func push(_ seq: UInt64, _ push: Push, to session: Session, now: Moment) {
        guard hasUDP, session.isBound, session.pushes.push(seq, push) else { return }
        metrics.pushes.increment()
        session.highestPushed = max(session.highestPushed, seq)
        pushing.insert(session.id)
        releasing.insert(session.id)
        ask(.tick, after: settings.tick)
    }

    /// Sends what each session with queued pushes may send now (its congestion window and
    /// pacing say how much), together in bundles when it takes them, and flushes. A session
    /// held back stays queued for the next tick or receipt.
    mutating func sendDatagrams(now: Moment) {
        guard !releasing.isEmpty else { return }
        var wrote = false
        for id in releasing {
            guard let session = sessions[id], session.isBound else {
                releasing.remove(id)
                continue
            }
            let release = session.pushes.release(now: now.deadline, bundles: session.takesBundles, reliable: session.path.onStream)
            if !session.pushes.hasQueued { releasing.remove(id) }
            metrics.retransmits.increment(by: Int64(release.resent))
            for group in release.datagrams { send(group, to: session) }
            wrote = wrote || !release.datagrams.isEmpty
        }
        if wrote { act(.flushDatagrams) }
        if !releasing.isEmpty { ask(.tick, after: settings.tick) }
    }

    /// One datagram: DATA for one message, a BUNDLE for more.
    private mutating func send(_ group: [[UInt8]], to session: Session) {
        guard group.count > 1, let bundle = DatagramBundle.pack(group, spread: 1).first else {
            sendDatagram(to: session, kind: .data, payload: group[0], flush: false)
            return
        }
        sendDatagram(to: session, kind: bundle.kind, payload: bundle.payload, flush: false)
        metrics.bundles.increment()
    }

    /// Sends under a fresh packet number, on the session's path (to the validated address, or
    /// inside its control connection) unless told an address; false when there is nowhere to
    /// send it. One packet number sequence serves both paths.
    @discardableResult
    mutating func sendDatagram(to session: Session, kind: DatagramKind, payload: [UInt8], flush: Bool = true,
                               at target: SocketAddress? = nil) -> Bool {
        guard hasUDP, payload.count <= DatagramHeader.maxPayload else { return false }
        if target == nil, session.path.onStream {
            let header = DatagramHeader(kind: kind, sessionID: session.id, packetNumber: session.takePacketNumber())
            act(.streamDatagram(session: session.id, header: header, payload: payload, key: session.key))
            metrics.streamDatagrams(.out)
            if kind == .data || kind == .bundle || kind == .early { metrics.streamPayloads(.out) }
            return true
        }
        guard let address = target ?? session.address else { return false }
        let header = DatagramHeader(kind: kind, sessionID: session.id, packetNumber: session.takePacketNumber())
        act(.datagram(OutgoingDatagram(header: header, payload: payload, key: session.key, address: address, flush: flush)))
        return true
    }

    /// Finds lost what timed out, sends what the windows let go, writes the marks and prompt
    /// presence due; asks for the next tick while anything waits for one.
    mutating func tick(now: Moment) {
        findTimedOut(now: now)
        sendDatagrams(now: now)
        writeReceipts(now: now)
        writePresence(now: now)
        if !pushing.isEmpty || receipts.hasReady || receipts.failedCount > 0 { ask(.tick, after: settings.tick) }
    }

    private mutating func findTimedOut(now: Moment) {
        guard hasUDP else { return }
        for id in pushing {
            guard let session = sessions[id], !session.pushes.isEmpty else {
                pushing.remove(id)
                continue
            }
            // On the stream path nothing is lost: no retransmit timer runs.
            guard session.isBound, !session.path.onStream else { continue }
            let before = session.pushes.congestion
            // Given up on this path for now: pushed again after the client's next keepalive.
            let parked = session.pushes.due(now: now.deadline)
            metrics.pushesGivenUp.increment(by: Int64(parked))
            countLosses(session, since: before)
            if parked > 0 || session.pushes.congestion.lost > before.lost {
                session.udpSilence.timeout()
                // Gone quiet while the connection lives: the stream carries it (Losing UDP).
                if settings.datagramsOverStream, session.udpSilence.lost(now: now.deadline) {
                    moveToStream(session, because: "udp-silent", now: now)
                    continue
                }
            }
            // Policed far below what the stream would carry, with a backlog: the stream
            // delivers more (docs/PROTOCOL.md, Throttled UDP).
            if settings.datagramsOverStream, session.pushes.throttled {
                moveToStream(session, because: "udp-throttled", now: now)
                continue
            }
            if session.pushes.hasQueued { releasing.insert(id) }
        }
    }

    /// Counts what a session's controller found lost since `before`.
    mutating func countLosses(_ session: Session, since before: CongestionController) {
        let after = session.pushes.congestion
        guard after.lost > before.lost else { return }
        metrics.pushesLost.increment(by: Int64(after.lost - before.lost))
        metrics.congestionEvents.increment(by: Int64(after.congestionEvents - before.congestionEvents))
    }
}
