import NIOCore
import SIMPCore
import SIMPRedis

/// Receipts: what a device confirms, its marks in the store, and the senders who hear of it.
extension DeliveryEngine {
    /// A cumulative receipt: the senders of the pushes it confirms are told at once; the mark
    /// is written with the tick's other receipts.
    mutating func receipt(sessionID: UInt64, _ receipt: Simp_Receipt, now: Moment) {
        guard let session = sessions[sessionID] else { return }
        // What arrived stops being pushed; only what is confirmed is delivered (a client that
        // confirms only what its application showed holds the rest: `receivedUpToSeq`).
        let received = max(receipt.upToSeq, receipt.receivedUpToSeq)
        if received > receipt.upToSeq { metrics.receiptsHolding.increment() }
        let arrived = session.pushes.confirm(upTo: received, now: now.deadline)
        if !arrived.isEmpty { session.udpSilence.heard(now: now.deadline) }
        let confirmed = received > receipt.upToSeq ? arrived.filter { $0.seq <= receipt.upToSeq } : arrived
        session.raiseNumberingFloor(received)
        resendMissing(receipt.missing.prefix(RequestCost.missingPerReceipt), to: session, now: now)
        if session.pushes.hasQueued { releasing.insert(session.id) }
        sendDatagrams(now: now)
        let elsewhere = sessions.sessions(of: session.user).lazy.filter { $0 !== session }.map(\.deviceMark).max() ?? 0
        let effects = Self.receipt(newMark: receipt.upToSeq, pushes: confirmed, deviceMark: session.deviceMark,
                                   otherDevicesMark: elsewhere, user: session.user, device: session.device)
        for push in effects.delivered { notifyDelivered(id: push.id, from: push.from, to: session.user, seq: push.seq, group: push.group) }
        guard let written = effects.receipt else { return }
        session.deviceMark = written.deviceMark
        recordReceipt(written)
    }

    /// Resends what the receiver reports missing, within the session's resend budget (what is
    /// left out is resent by the retransmit timers, or asked for again). A seq this session
    /// never pushed (its store reply was lost with a Redis connection, say) is fetched from the
    /// inbox, so no gap stays; one such read at a time per session, however many receipts ask.
    private mutating func resendMissing(_ seqs: ArraySlice<UInt64>, to session: Session, now: Moment) {
        guard hasUDP, !seqs.isEmpty else { return }
        let rate = settings.resendBytesPerSecond
        var budget = session.resendBudget ?? TokenBucket(rate: rate, burst: rate, now: now.deadline)
        let before = session.pushes.congestion
        let found = session.pushes.missing(seqs, budget: &budget, now: now.deadline)
        session.resendBudget = budget
        countLosses(session, since: before)
        if found.overBudget { metrics.exceeded(.resendBytes) }
        if found.queued > 0 { releasing.insert(session.id) }
        guard !found.unknown.isEmpty, !session.readingMissing else { return }
        session.readingMissing = true
        act(.readEntries(session: session.id, user: session.user, seqs: found.unknown))
    }

    /// The entries a session's receipt named and this node never pushed.
    mutating func entriesRead(session id: UInt64, _ result: Result<[[UInt8]], any Error>, now: Moment) {
        guard let session = sessions[id] else { return }
        session.readingMissing = false
        guard case .success(let items) = result else { return }
        pushStored(items, to: session, now: now)
    }

    /// Receipts wait for the next tick (10 ms): nothing waits for them (senders were told from
    /// the pushes), and a quiet node writes one per recipient device per tick instead of one
    /// per datagram.
    mutating func recordReceipt(_ receipt: ReceiptLedger.Receipt) {
        receipts.record(receipt)
        ask(.tick, after: settings.tick)
    }

    /// The tick's receipts, written in one round trip (`receiptsWritten`).
    mutating func writeReceipts(now: Moment) {
        let due = receipts.take(now: now.deadline)
        guard !due.isEmpty else { return }
        act(.writeReceipts(due))
    }

    /// A failed mark is written again a second later; entries come back only for marks that
    /// asked (their senders are told now).
    mutating func receiptsWritten(_ marks: [ReceiptLedger.Receipt], _ results: [Result<MessageStore.ReceiptWritten, RedisError>], now: Moment) {
        for (mark, result) in zip(marks, results) {
            switch result {
            case .success(let written):
                receipts.written(mark)
                for bytes in written.entries { notifyDelivered(storedBytes: bytes, recipient: mark.user) }
                if !written.heldGroups.isEmpty { actions.append(.resumeGroupCopies(member: mark.user, groups: written.heldGroups)) }
            case .failure(let error):
                logger.warning("receipt not stored; will retry", metadata: ["user": "\(mark.user)", "error": "\(error)"])
                receipts.writeFailed(mark, now: now.deadline)
                ask(.tick, after: settings.tick)
            }
        }
    }

    private mutating func notifyDelivered(storedBytes bytes: [UInt8], recipient: String) {
        guard let message = try? Simp_Message(serializedBytes: bytes) else { return }
        let push = Push(stored: message, bytes: [], recipient: recipient)
        // A copy for its sender's other devices, or a group's change, tells nobody.
        guard !push.isCopy else { return }
        notifyDelivered(id: message.messageID, from: message.fromUser, to: recipient, seq: message.seq, group: push.group)
    }

    /// Tells the sender's devices: those here at once, those on other nodes through their
    /// nodes (presence says which). A device whose notice is lost, or that is offline, asks
    /// with DeliveryQuery when it connects and now and then.
    mutating func notifyDelivered(id: String, from sender: String, to recipient: String, seq: UInt64, group: GroupPlace? = nil) {
        // A group message's sender hears which member confirmed it, by its place in the group.
        let to = group.map { GroupName.address($0.name) } ?? recipient
        let place = group?.seq ?? seq
        let member = group == nil ? "" : recipient
        let here = sessions.sessions(of: sender)
        for session in here { act(.send(Self.delivered(id: id, to: to, seq: place, member: member), session: session.id)) }
        guard Self.tellsOtherNodes(devicesHere: here.count, devicesKnown: here.map(\.devices).max() ?? 0) else { return }
        var item = Simp_Accepted()
        item.messageID = id
        item.toUser = to
        item.seq = place
        item.member = member
        remoteDelivered[sender, default: []].append(item)
        ask(.publishDelivered)
    }

    /// This tick's delivered notices for senders not connected here, in one round trip to
    /// find their nodes and one to tell them.
    mutating func publishDelivered() {
        guard !remoteDelivered.isEmpty else { return }
        act(.publishDelivered(remoteDelivered))
        remoteDelivered.removeAll(keepingCapacity: true)
    }

    /// Each item of a query is two Redis commands; the client asks about 512 at a time.
    static let maxQueryItems = 512

    /// A reconnected sender asks which of its messages were delivered: the store is asked
    /// about them (answered with `confirmedRead`), or the question is answered at once when
    /// there is nothing to ask.
    mutating func query(_ query: Simp_DeliveryQuery, sessionID: UInt64, ask: UInt64) {
        guard let session = sessions[sessionID], !query.messages.isEmpty else { return act(.queryAnswered(ask: ask)) }
        guard query.messages.count <= Self.maxQueryItems else {
            act(.send(.error(.badRequest, "a query asks about at most \(Self.maxQueryItems) messages, not \(query.messages.count)"),
                      session: sessionID))
            return act(.queryAnswered(ask: ask))
        }
        act(.readConfirmed(ask: ask, session: sessionID, user: session.user, items: query.messages))
    }

    /// Delivered for each message its recipient confirmed.
    mutating func confirmedOf(session id: UInt64, _ confirmed: [Simp_Accepted], ask: UInt64) {
        for item in confirmed { act(.send(Self.delivered(id: item.messageID, to: item.toUser, seq: item.seq), session: id)) }
        act(.queryAnswered(ask: ask))
    }
}
