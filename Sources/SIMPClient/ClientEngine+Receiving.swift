import Foundation
import NIOCore
import SIMPCore

/// What the server says on the control connection and in datagrams.
extension ClientEngine {
    // MARK: control envelopes

    mutating func control(_ envelope: Simp_Envelope, now: Moment) {
        switch envelope.body {
        case .accepted(let accepted):
            paths.udpHeard(now: now.deadline)
            self.accepted(accepted, now: now)
        case .delivered(let delivered): self.delivered(delivered)
        case .failed(let failed):
            paths.udpHeard(now: now.deadline)
            self.failed(failed, now: now)
        case .missing(let missing):
            paths.udpHeard(now: now.deadline)
            for message in sending.missing(missing, now: now.deadline) { transmit(message, .reported, now: now) }
            followResends(now: now)
        case .retracted(let retracted):
            guard early.retracted(.init(from: retracted.fromUser, id: retracted.messageID)) else { return }
            emit(.retracted(id: retracted.messageID, from: retracted.fromUser,
                            reason: retracted.reason.isEmpty ? retracted.code.name : retracted.reason))
        case .bound(let bound):
            // The server's path: UDP, or the stream (an empty address). A change after the
            // session was bound is told; the first one goes with `connected`.
            let was = paths.path
            if let path = paths.bound(address: bound.address, now: now.deadline), lifecycle.isBound {
                emit(.path(path))
                // UDP was lost: what it did not carry goes again inside the connection, at once.
                if path == .stream, was == .udp {
                    uplink.newPath()
                    perform(sending.resendAll(now: now.deadline, bound: true), .first, now: now)
                    followResends(now: now)
                }
            }
            lifecycle.pathBound()
            actions.append(.pathBound)
            tellConfirmedReadMarks()
        case .datagram(let bytes):
            datagram(ByteBuffer(bytes: bytes), now: now)
        case .ping(let ping):
            var pong = Simp_Pong()
            pong.nonce = ping.nonce
            sendControl(.pong(pong))
        case .error(let error):
            let reason = error.reason.isEmpty ? error.code.name : error.reason
            if error.code == .sessionClosed || error.code == .sessionReplaced { lifecycle.serverEnds(because: reason) }
            emit(.error("server: \(reason)", code: ErrorCode(error.code)))
        default:
            break
        }
    }

    private mutating func accepted(_ accepted: Simp_Accepted, now: Moment) {
        acknowledged(accepted.messageID, now: now)
        let event = sending.accepted(accepted, now: now.deadline)
        followResends(now: now)
        guard let event else { return }
        if case .groupAccepted = event {
            writeOutbox(.remove(id: accepted.messageID), for: .groupAccepted)
        } else {
            writeOutbox(.markAccepted(id: accepted.messageID, seq: accepted.seq), for: .accepted)
        }
        emit(event)
    }

    private mutating func failed(_ failed: Simp_Failed, now: Moment) {
        acknowledged(failed.messageID, now: now)
        let event = sending.failed(failed, now: now.deadline)
        followResends(now: now)
        guard let event else { return }
        writeOutbox(.remove(id: failed.messageID), for: .failed)
        emit(event)
    }

    mutating func delivered(_ delivered: Simp_Delivered) {
        let news = sending.delivered(delivered)
        if let accepted = news.accepted { emit(accepted) }
        guard let event = news.delivered else {
            // Sent from another of the user's devices: this one shows its copy.
            if news.accepted == nil, let id = LongText.shownID(of: delivered.messageID),
               let receipt = copyReceipts.delivered(id: id, to: delivered.toUser, seq: delivered.seq) {
                emit(.delivered(id: id, to: receipt.to, seq: receipt.seq))
            }
            return
        }
        writeOutbox(.remove(id: delivered.messageID), for: .delivered)
        emit(event)
    }

    // MARK: datagrams

    mutating func datagram(_ envelope: ByteBuffer, now: Moment) {
        var buffer = envelope
        guard let header = try? Datagram.decodeHeader(&buffer), header.sessionID == session?.sessionID, let key = sessionKey,
              let payload = try? DatagramSeal.open(header, sealed: buffer, key: key, direction: .toClient),
              replay.accept(header.packetNumber) else { return }
        paths.udpHeard(now: now.deadline)
        switch header.kind {
        case .challenge:
            var response = Simp_PathResponse()
            response.token = Data(payload)
            sendControl(.pathResponse(response))
        case .data: received([payload], now: now)
        case .early: receivedEarly(payload, now: now)
        case .typing:
            guard let body = SealedSignals.TypingBody(payload) else { return }
            switch SignalRules.typingStep(body, endToEnd: configuration.endToEnd) {
            case .show(let from): emit(.typing(from: from))
            case .check(let body): actions.append(.checkTyping(body))
            case .drop(let reason): actions.append(.countDroppedSignal(.typing, reason))
            }
        case .presence:
            if let change = PresenceChange(payload: payload) {
                emit(.presence(PresenceInfo(user: change.user, state: change.online ? .online : .offline, lastSeen: Date(millis: change.since))))
            }
        case .keys: checkKeys(of: String(decoding: payload, as: UTF8.self))
        case .bundle:
            guard let messages = try? DatagramBundle.split(payload) else { return }
            received(messages, now: now)
        default: return
        }
    }

    /// `user`'s key directory changed (a KEYS datagram, or its notice): an encrypting client
    /// checks its conversations with `user`.
    private mutating func checkKeys(of user: String) {
        guard configuration.endToEnd, UserName.isValid(user) else { return }
        actions.append(.checkKeys(of: user))
    }

    /// The messages of one datagram: what they make ready is delivered (and stored) together.
    private mutating func received(_ payloads: [[UInt8]], now: Moment) {
        let batch = ReceivedBatch.take(payloads, sequencer: &sequencer, early: &early, user: credentials?.user, device: device)
        if batch.advanced {
            deliver(batch.ready, after: batch.before, now: now)
        } else if batch.repeated {
            atTurnEnd(.receipt)
        }
        guard batch.gap else { return }
        reportGap(now: now.deadline)
        armTick(at: now.deadline + ClientTimers.gapRetry, now: now.deadline)
    }

    /// An EARLY datagram: handed over at once when it overtakes nothing (`EarlyLedger.admit`);
    /// otherwise dropped, and its numbered copy brings it.
    private mutating func receivedEarly(_ payload: [UInt8], now: Moment) {
        guard let pushed = try? EarlyPayload(decoding: payload),
              let message = try? Simp_Message(serializedBytes: pushed.message), message.seq == 0,
              message.type != .textPart else { return }
        // Sealed ones (a SEALED_READ too) are opened first; a type this client does not know is never shown.
        let incoming = IncomingMessage(message)
        guard !incoming.sealed, !incoming.unknownType else { return }
        let key = EarlyLedger.Key(from: message.fromUser, id: message.messageID)
        guard early.admit(key, afterSeq: pushed.afterSeq, deliveredUpTo: sequencer.deliveredUpTo,
                          holding: sequencer.bufferedCount > 0, now: now.deadline) else { return }
        emit(.message(incoming))
    }

    /// `ready` took the delivered mark from `after` to where it is now.
    private mutating func deliver(_ ready: [IncomingMessage], after: UInt64, now: Moment) {
        guard hasStore else {
            for item in ready { show(item, now: now) }
            atTurnEnd(.receipt)
            return
        }
        // On disk first: a client killed after showing a message must not show it again,
        // and one the disk did not take must come again (ReceivedSaves).
        if let batch = saves.ready(ready, after: after, upTo: sequencer.deliveredUpTo) { actions.append(.saveReceived(batch)) }
    }

    mutating func saved(_ result: Result<Void, StoreWriteError>, opened: [IncomingMessage]? = nil, now: Moment) {
        switch result {
        case .success:
            timers.unsavedKept()
            // Kept, with more still to ask for: asked for a second from now, not at the end of
            // the wait the failures before had grown to.
            if sequencer.hasGap, sequencer.bufferedCount == 0 { armTick(at: now.deadline + timers.unsavedRetry, now: now.deadline) }
            let (shown, next) = saves.written(opened: opened)
            for item in shown { show(item, now: now) }
            atTurnEnd(.receipt)
            if let next { actions.append(.saveReceived(next)) }
        case .failure(let error):
            let failure = saves.failed()
            // Unconfirmed, they are pushed again; what the server had confirmed before this
            // session does not come again.
            let expected = sequencer.expected
            sequencer = InboundSequencer(deliveredUpTo: failure.rollBackTo)
            sequencer.advance(to: session?.confirmedSeq ?? 0)
            // Asked for again (a gap report), not only left to the server's timers: on the
            // stream path none runs, and they would wait for the next reconnect. What an
            // earlier failure expects stays expected: a resend of its first 64 that failed too
            // must not end the wait for the rest.
            sequencer.expect(upTo: max(expected, failure.upTo))
            if sequencer.hasGap {
                timers.unsavedFailed(at: now.deadline)
                armTick(at: now.deadline + timers.unsavedRetry, now: now.deadline)
            }
            guard let seqs = failure.report else { return }
            let which = seqs.count == 1 ? "seq \(seqs.lowerBound)" : "seq \(seqs.lowerBound)-\(seqs.upperBound)"
            emit(.error("cannot save received messages (\(which)) in \(error.path): \(error.reason); "
                + "they are not shown or confirmed, and the server sends them again"))
        }
    }

    // MARK: showing

    /// Hands a message to the application; the copy of one the user sent from another device
    /// is followed by its receipt when that came first.
    mutating func show(_ given: IncomingMessage, now: Moment) {
        var message = given
        if let part = given.part {
            guard let whole = takePart(given, as: part, now: now) else { return }
            message = whole
            // Its parts are on disk; the history keeps the whole.
            if hasStore, let user = credentials?.user, let entry = HistoryEntry.received(whole, user: user) {
                actions.append(.history(.add(entry)))
            }
        }
        if let change = message.groupChange, let group = message.group {
            emit(.groupChanged(group: group, change: change, seq: message.groupSeq))
            return
        }
        // A later protocol's type: its content is not a text this client may show.
        if message.unknownType { return }
        // Stored for a device that was away when the KEYS datagram went (a bound one got both).
        if message.keysChanged { return checkKeys(of: message.from) }
        if let dropped = message.droppedSignal {
            actions.append(.countDroppedSignal(.read, dropped))
            return
        }
        if message.sealed {
            // A sealed read receipt that did not open is dropped and counted, not shown.
            if message.sealedRead { return actions.append(.countDroppedSignal(.read, .unopened)) }
            let why = message.unopened ?? "this client keeps no keys (end-to-end encryption needs a data directory)"
            actions.append(.countDecryptionFailure(message.unopenedCause ?? .noKeys))
            return emit(.undecryptable(from: message.from, id: message.id, reason: why))
        }
        switch message.kind {
        case .contactRequest: return emit(.contactRequest(from: message.from))
        case .contactAccepted: return emit(.contactAccepted(by: message.from))
        case .groupInvited: return emit(.groupInvited(group: GroupName.addressed(by: message.text) ?? message.text, by: message.from))
        case .read: return showReads(message)
        case .message: break
        }
        emit(.message(message))
        if configuration.confirmWhenShown, message.from != credentials?.user { unshown.handedOver(message.seq) }
        guard message.group == nil, !message.fromDevice.isEmpty, message.from == credentials?.user,
              let receipt = copyReceipts.shown(id: message.id, to: message.to) else { return }
        emit(.delivered(id: message.id, to: receipt.to, seq: receipt.seq))
    }

    /// A part of a long message: the whole once it is complete. A part whose earlier parts
    /// this client never held (it restarted after confirming them) has them read back from
    /// the conversation's history, so the message is still shown whole.
    private mutating func takePart(_ message: IncomingMessage, as part: LongText.PartID, now: Moment) -> IncomingMessage? {
        let taken = reassembly.take(message, as: part, now: now.deadline)
        if taken.recoverEarlierParts {
            let peer = message.group.map(GroupName.address) ?? (message.from == credentials?.user ? message.to : message.from)
            actions.append(.recoverParts(before: part, of: message, peer: peer))
        }
        return taken.whole
    }

    mutating func partsRecovered(_ found: [IncomingMessage], now: Moment) {
        for recovered in found {
            guard let piece = recovered.part, let whole = reassembly.add(recovered, as: piece) else { continue }
            show(whole, now: now)
        }
    }

    /// A read receipt (a READ notice in the inbox): the sender's devices hear who read which of
    /// its messages (a group's notice names the group, `#NAME`: its reader is one member), the
    /// reader's other devices what their user read. Never before `delivered`.
    private mutating func showReads(_ message: IncomingMessage) {
        let ids = message.text.split(separator: " ").map(String.init)
        if message.from == credentials?.user {
            guard message.fromDevice != device else { return }
            for id in ids { emit(.read(id: id, from: message.to, by: message.from)) }
            return
        }
        // The user's own messages: to the reader, or to a group the reader is in.
        let sender = message.group == nil ? message.to : credentials?.user ?? message.to
        // A sealed read names only messages of the conversation it was sealed in (the reader's,
        // or the group's): one naming a message this device knows went elsewhere is dropped.
        let conversation = message.group.map(GroupName.address) ?? message.from
        if message.encrypted, !SignalRules.readNamesOnly(ids, of: conversation, knownTo: { statuses.status(of: $0)?.to }) {
            return actions.append(.countDroppedSignal(.read, .unopened))
        }
        for id in ids {
            if let group = message.group {
                let seq = statuses.status(of: id)?.seq ?? 0
                if let delivered = sending.memberDeliveryImplied(byReadOf: id, member: message.from, group: group, seq: seq) { emit(delivered) }
            } else if let delivered = sending.deliveryImplied(byReadOf: id) {
                self.delivered(delivered)
            }
            emit(.read(id: id, from: sender, by: message.from))
        }
    }

    // MARK: receipts

    /// Asks for what is missing below a held message.
    mutating func reportGap(now: NIODeadline) {
        let gaps = sequencer.gaps()
        guard let first = gaps.first, timers.mayReportGap(first: first, now: now) else { return }
        timers.gapReported(first: first, at: now)
        var receipt = Simp_Receipt()
        receipt.upToSeq = confirmUpTo
        if receivedUpTo > receipt.upToSeq { receipt.receivedUpToSeq = receivedUpTo }
        receipt.missing = gaps
        sendControl(.receipt(receipt))
    }

    /// After a reconnect and now and then: which accepted messages did their recipients confirm?
    mutating func queryDeliveries(now: NIODeadline) {
        guard let query = sending.deliveryQuery() else { return }
        timers.deliveryQuerySent(at: now)
        sendControl(.query(query))
    }

    mutating func sendReceipt() {
        var receipt = Simp_Receipt()
        receipt.upToSeq = confirmUpTo
        if receivedUpTo > receipt.upToSeq { receipt.receivedUpToSeq = receivedUpTo }
        sendControl(.receipt(receipt))
    }

    /// The application showed these (`confirmWhenShown`): what they held is confirmed now,
    /// then the read marks of what is confirmed are told (the server tells only those); the
    /// others wait for the messages below them to be shown.
    mutating func shown(_ seqs: [UInt64], marks: [Simp_ReadMark]) {
        guard configuration.confirmWhenShown else { return }
        let rose = unshown.shown(seqs)
        heldReadMarks += marks
        if heldReadMarks.count > Self.maxHeldReadMarks { heldReadMarks.removeFirst(heldReadMarks.count - Self.maxHeldReadMarks) }
        guard session != nil else { return }
        if rose { sendReceipt() }
        tellConfirmedReadMarks()
    }

    /// Read marks held for their messages' confirmation, at most; the oldest go first.
    static let maxHeldReadMarks = 4_096

    /// Sends the held read marks the session has confirmed, 256 to a request; nobody waits
    /// for their answer (request id 0).
    mutating func tellConfirmedReadMarks() {
        guard !heldReadMarks.isEmpty else { return }
        let confirmed = confirmUpTo
        let due = heldReadMarks.filter { $0.seq <= confirmed }
        guard !due.isEmpty else { return }
        heldReadMarks.removeAll { $0.seq <= confirmed }
        // Encrypting: the driver seals those of encrypted conversations (docs/E2EE.md, Part 7).
        if configuration.endToEnd { return actions.append(.tellReadMarks(due)) }
        for start in stride(from: 0, to: due.count, by: 256) {
            var request = Simp_ReadRequest()
            request.reads = Array(due[start..<min(start + 256, due.count)])
            sendControl(.markRead(request))
        }
    }
}
