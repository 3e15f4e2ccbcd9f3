import NIOCore
import SIMPCore
import SIMPRedis

/// The store pipeline: messages to Redis in batches, early pushes, replicas' holds, and what
/// each outcome leads to.
extension DeliveryEngine {
    /// Stores leave in batches, several in flight on the loop's one Redis connection, so the
    /// order in which datagrams arrived is the order of their sequence numbers.
    mutating func enqueueStore(_ request: StoreRequest, now: Moment) {
        if let group = GroupName.addressed(by: request.to) {
            act(.relay(request, group: group))
            return
        }
        // A group's sealed read receipt waits for its reader's membership (`readerChecked`).
        if let group = request.readGroup, !request.readerChecked, request.copyFor == nil {
            readersBeingChecked += 1
            act(.checkReader(request, group: group))
            return
        }
        // A resend of a message whose store is still queued, in flight or being retried is
        // answered by that store's outcome; a second copy could contradict it.
        guard let place = storeTracker.begin(request) else { return }
        var request = request
        request.place = place
        // Behind its recipient's held stores, wherever they were held (the slot map may have
        // changed since); nothing goes early to it: it may well fail.
        if let shard = heldShard(for: request.to) {
            storeTracker.queued(for: request.to)
            replicaHold.hold(request, shard: shard, now: now.deadline)
            return
        }
        if let recipient = earlyRecipient(of: request) { request.pushedEarly = pushEarly(request, to: recipient) }
        storeTracker.queued(for: request.to)
        stores.enqueue(request)
        // Batches leave at the end of the loop tick, so one tick's datagrams share a batch.
        ask(.flushStores)
    }

    /// The store's answer to `checkReader`: a member's read goes on to the store; a non-member's
    /// is refused whoever SENDER is and whatever the group (so the answer tells nothing of
    /// either); one whose check failed is answered as a store that failed (the client sends it
    /// again).
    mutating func readerChecked(_ request: StoreRequest, _ member: Result<Bool, any Error>, now: Moment) {
        readersBeingChecked -= 1
        defer { if readersBeingChecked == 0, stores.isIdle { act(.storesIdle) } }
        switch member {
        case .success(true):
            var checked = request
            checked.readerChecked = true
            enqueueStore(checked, now: now)
        case .success(false):
            metrics.readsRefused.increment()
            let group = GroupName.address(request.readGroup ?? "")
            answerSender(request, [Self.failed(request, .notAMember, "you are not a member of \(group): no read receipts in it")])
        case .failure(let error):
            answerSender(request, [Self.failed(request, .storeUnavailable, "message store unavailable: \(error)")])
        }
    }

    /// The recipient's session when the message may be pushed before its store answers
    /// (`mayPushEarly`).
    private func earlyRecipient(of request: StoreRequest) -> Session? {
        let here = sessions.sessions(of: request.to)
        let recipient = here.first
        let candidate = recipient.map { session in
            EarlyRecipient(takesEarly: session.takesEarly, isBound: session.isBound, synced: session.synced,
                           mayMissPushes: session.catchUp.mayMissPushes,
                           pushesOutstanding: !session.pushes.isEmpty || session.pushes.hasParked)
        }
        let early = Self.mayPushEarly(fresh: request.fresh, answerOnly: request.answerOnly,
                                      othersBeingStored: storeTracker.othersBeingStored(for: request.to), sessionsHere: here.count,
                                      recipient: candidate)
        return early ? recipient : nil
    }

    private mutating func pushEarly(_ request: StoreRequest, to recipient: Session) -> Bool {
        let afterSeq = max(recipient.deviceMark, recipient.highestPushed)
        guard let payload = EarlyPayload(afterSeq: afterSeq, message: request.bytes).encoded(),
              sendDatagram(to: recipient, kind: .early, payload: payload) else { return false }
        metrics.earlyPushes.increment()
        return true
    }

    mutating func flushStores() {
        while let batch = stores.nextBatch() {
            var floors: [String: UInt64] = [:]
            for request in batch.items where floors[request.to] == nil { floors[request.to] = numberingFloor(of: request.to) }
            act(.store(batch, floors: floors))
        }
        // Reads whose reader is being checked go on to the store after: a drain waits for them.
        if stores.isIdle, readersBeingChecked == 0 { act(.storesIdle) }
    }

    /// A batch's outcomes, one per message (the store never fails as a whole: an outage is an
    /// outcome per message).
    mutating func storeCompleted(_ batch: StoreBatch, _ outcomes: [StoreOutcome], now: Moment) {
        var retry: [StoreRequest] = []
        for (index, (request, outcome)) in zip(batch.items, outcomes).enumerated() {
            if holdForReplicas(request, outcome, ticket: batch.ticket, index: index, now: now) { continue }
            if let again = Self.unsettled(request, outcome, now: now.deadline) { retry.append(again) } else { settle(request, outcome, now: now) }
        }
        sendDatagrams(now: now)
        switch stores.completed(batch.ticket, retry: retry) {
        case .proceed: flushStores()
        case .waitForInFlight: break
        // Redis is likely restarting: the unknown ones go again, first, after a moment.
        case .pause: ask(.resumeStores, after: .milliseconds(200))
        }
    }

    private func heldShard(for recipient: String) -> RedisNodeAddress? {
        guard !replicaHold.isEmpty else { return nil }
        if let shard = replicaHold.shard(holding: { $0.to == recipient }) { return shard }
        return shardOf(recipient).flatMap { replicaHold.holds($0) ? $0 : nil }
    }

    /// A store refused for want of replicas waits for its shard (nothing was written).
    private mutating func holdForReplicas(_ request: StoreRequest, _ outcome: StoreOutcome, ticket: UInt64, index: Int, now: Moment) -> Bool {
        guard case .replicasShort(let online) = outcome, let shard = heldShard(for: request.to) ?? shardOf(request.to) else { return false }
        if !replicaHold.holds(shard) {
            let wait = settings.replicaHoldLimit.nanoseconds / 1_000_000_000
            logger.warning("Redis shard \(shard) has \(online) of the \(configuration.minReplicas) replicas --redis-min-replicas asks for; its recipients' messages wait up to \(wait) s")
        }
        // A store tried again after its shard was let go keeps the time it first waited from.
        var request = request
        if storeTracker.isOvertaken(request) { request.overtaken = true }
        let since = request.heldSince ?? now.deadline
        request.heldSince = since
        replicaHold.refused(request, shard: shard, online: online, ticket: ticket, index: index, now: since)
        metrics.replicasShort(replicaHold.held)
        ask(.replicaProbe, after: settings.replicaProbeInterval)
        return true
    }

    /// Fails what waited too long, asks each held shard for its replicas (each answer is
    /// `replicasProbed`).
    mutating func probeHeldShards(now: Moment) {
        for (request, online) in replicaHold.expired(now: now.deadline) {
            act(.markFailed(request, code: .replicasUnavailable))
            settle(request, .replicasShort(online: online), now: now)
        }
        storeTracker.prune(now: now.deadline)
        for (shard, _) in replicaHold.held { act(.probeReplicas(shard)) }
        sendDatagrams(now: now)
        if !replicaHold.isEmpty { ask(.replicaProbe, after: settings.replicaProbeInterval) }
    }

    /// A held shard's replicas online, or the error that kept it from answering: those that
    /// have them again, or did not answer, let their stores go (tried where their slots are now).
    mutating func replicasProbed(_ shard: RedisNodeAddress, _ result: Result<Int, any Error>) {
        let released: [StoreRequest]
        switch result {
        case .success(let online):
            released = replicaHold.probed(shard, online: online, needed: configuration.minReplicas)
            if !replicaHold.holds(shard) {
                logger.notice("Redis shard \(shard) has \(online) replicas online again; \(released.count) held messages are stored now")
            }
        case .failure(let error):
            released = replicaHold.letGo(shard)
            logger.notice("Redis shard \(shard) did not answer (\(error)); its \(released.count) held messages are tried where their slots are now")
        }
        stores.enqueueFirst(released)
        if !released.isEmpty { ask(.flushStores) }
        metrics.replicasShort(replicaHold.held)
    }

    /// A store whose outcome is unknown (the script may have run, the answer was lost) is
    /// tried again, idempotently by message id, until Redis gives a real answer or 30 s pass.
    static func unsettled(_ request: StoreRequest, _ outcome: StoreOutcome, now: NIODeadline) -> StoreRequest? {
        guard case .unavailable(let error) = outcome else { return nil }
        var again = request
        if again.ambiguousSince == nil {
            guard error.mayHaveRun else { return nil }
            again.ambiguousSince = now
        }
        return now - again.ambiguousSince! < .seconds(30) ? again : nil
    }

    private mutating func settle(_ request: StoreRequest, _ outcome: StoreOutcome, now: Moment) {
        storeTracker.settled(request)
        if case .stored(let seq, let bytes) = outcome {
            answerHeldEarlierOnly(request, now: now)
            let push = Push(bytes: bytes, from: request.from, id: request.id, isCopy: request.copyFor != nil || request.notice)
            for recipient in sessions.sessions(of: request.to) {
                recipient.raiseNumberingFloor(seq)
                if recipient.isBound { self.push(seq, push, to: recipient, now: now) }
            }
        } else {
            catchUpIfUnpushed(request, outcome)
        }
        guard request.copyFor == nil else {
            copySettled(request, outcome)
            return
        }
        let envelopes = answers(request, outcome)
        if request.pushedEarly { retractEarlyCopyIfDue(request, outcome, answers: envelopes) }
        if request.copiedForSender, outcome.isStored {
            enqueueStore(Self.senderCopy(of: request, answers: envelopes), now: now)
            return
        }
        answerSender(request, envelopes)
    }

    /// The sender's device that sent the request hears `envelopes` (its other devices never sent it).
    mutating func answerSender(_ request: StoreRequest, _ envelopes: [Simp_Envelope]) {
        guard !request.notice, let sender = sessions.session(of: request.from, device: request.device) else { return }
        for envelope in envelopes { act(.send(envelope, session: sender.id)) }
    }

    /// The copy of a stored message for its sender's other devices, in the sender's own inbox.
    /// The sender hears about the message once the copy is made: until then a crash could
    /// leave the message stored and the copy never made, while a resend (answered as a
    /// duplicate) makes it.
    static func senderCopy(of request: StoreRequest, answers: [Simp_Envelope]) -> StoreRequest {
        var copy = StoreRequest(from: request.from, id: request.id, to: request.from,
                                bytes: StoredMessage.appending(fromDevice: request.device, to: request.bytes))
        copy.device = request.device
        copy.inHistory = request.inHistory
        copy.senderCopy = SenderCopy(peer: request.to, answers: answers)
        return copy
    }

    /// The message is stored whatever became of its copy: its sender hears so now.
    private mutating func copySettled(_ copy: StoreRequest, _ outcome: StoreOutcome) {
        if !outcome.isStored {
            logger.warning("message \(copy.id) from \(copy.from) to \(copy.copyFor ?? "?") was stored, but its copy for \(copy.from)'s other devices was not: \(outcome)")
        }
        answerSender(copy, copy.senderCopy?.answers ?? [])
    }

    /// A later message of the same sender stored while an earlier one waits for replicas (its
    /// shard's replicas came back between the two): the earlier one may no longer be stored,
    /// it would follow the later one. It is answered (not stored) when it is let go.
    private mutating func answerHeldEarlierOnly(_ request: StoreRequest, now: Moment) {
        guard configuration.minReplicas > 0 else { return }
        storeTracker.stored(request, now: now.deadline)
        guard !replicaHold.isEmpty else { return }
        let conversation = StoreTracker.Conversation(request)
        replicaHold.update(matching: { StoreTracker.Conversation($0) == conversation }) { $0.overtaken = true }
    }

    /// A store found already made (its first answer lost) or given up on while it may have run
    /// leaves a seq this node has not pushed: the inbox is read back now, and nothing goes early
    /// to that recipient until a read issued after it has come back (`CatchUp.mayMissPushes`).
    private mutating func catchUpIfUnpushed(_ request: StoreRequest, _ outcome: StoreOutcome) {
        for recipient in sessions.sessions(of: request.to) where recipient.isBound {
            let pushedUpTo = max(recipient.deviceMark, recipient.highestPushed)
            guard outcome.mayLeaveUnpushed(ambiguous: request.ambiguousSince != nil, pushedUpTo: pushedUpTo) else { continue }
            recipient.catchUp.doubt()
            catchUp(recipient)
        }
    }

    /// An early message that will not come numbered, or that its recipient had confirmed
    /// before (its sender sent it again), is retracted, with the reason its sender got.
    private mutating func retractEarlyCopyIfDue(_ request: StoreRequest, _ outcome: StoreOutcome, answers: [Simp_Envelope]) {
        guard outcome.retractsEarlyCopy(ambiguous: request.ambiguousSince != nil) else { return }
        var retracted = Simp_Retracted()
        retracted.fromUser = request.from
        retracted.messageID = request.id
        if case .failed(let failed) = answers.first?.body {
            retracted.code = failed.code
            retracted.reason = failed.reason
        } else {
            retracted.code = .badRequest
            retracted.reason = "the sender had sent this message before"
        }
        metrics.earlyRetracted.increment()
        for recipient in sessions.sessions(of: request.to) { act(.send(Simp_Envelope(.retracted(retracted)), session: recipient.id)) }
    }

    /// What the sender is told about its message's store; the outcome is counted.
    private func answers(_ request: StoreRequest, _ outcome: StoreOutcome) -> [Simp_Envelope] {
        switch outcome {
        case .stored: metrics.stored.increment()
        case .duplicate: metrics.duplicates.increment()
        case .inboxFull: metrics.exceeded(.inboxSize)
        case .shareFull: metrics.exceeded(.inboxShare)
        case .replicasShort: metrics.replicaRefusals.increment()
        default: break
        }
        return Self.answers(request, outcome, limits: limits)
    }

    /// Marks due are written now, and every queued store leaves; `storesIdle` says when all are answered.
    mutating func drain(now: Moment) {
        writeReceipts(now: now)
        flushStores()
    }
}
