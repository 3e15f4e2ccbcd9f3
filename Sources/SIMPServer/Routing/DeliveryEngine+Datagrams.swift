import NIOCore
import SIMPCore

/// Datagrams in: binds, paths, keepalives, messages and their send order.
extension DeliveryEngine {
    mutating func receive(_ envelope: AddressedEnvelope<ByteBuffer>, now: Moment) {
        metrics.datagramsIn.increment()
        let size = envelope.data.readableBytes
        switch DatagramIntake.decide(envelope.data, peers: { sessions[$0] }) {
        case .oversize:
            metrics.dropped(.oversize)
            metrics.exceeded(.datagramSize)
            tellOversize(envelope, now: now)
        case .drop(let reason):
            metrics.dropped(reason)
        case .open(let session, .bind, let token):
            bind(session, token: token, from: envelope.remoteAddress, size: size, now: now)
        case .open(let session, let kind, let payload):
            guard fromValidatedAddress(session, envelope.remoteAddress, size: size, now: now) else { return }
            session.udpSilence.heard(now: now.deadline)
            opened(session, kind, payload, now: now)
        }
    }

    /// A sealed datagram that came inside session `id`'s control connection (the stream path):
    /// checked as one from UDP (size, header, seal, replay window, kind), but it must name the
    /// connection's own session, and its source needs no validation: the connection is the
    /// session's.
    mutating func receiveOverStream(_ datagram: ByteBuffer, sessionID id: UInt64, now: Moment) {
        metrics.streamDatagrams(.in)
        guard settings.datagramsOverStream else {
            if let session = sessions[id] {
                tellLimit(session, .streamPathOff, "this server takes datagrams over UDP only (--datagrams-over-stream never); dropped", now: now)
            }
            return
        }
        switch DatagramIntake.decide(datagram, peers: { $0 == id ? sessions[$0] : nil }) {
        case .oversize:
            metrics.dropped(.oversize)
            metrics.exceeded(.datagramSize)
        case .drop(let reason):
            metrics.dropped(reason)
        case .open(let session, .bind, let token):
            bound(session, session.path.bindOverStream(token: token), now: now)
        case .open(let session, let kind, let payload):
            if kind == .data || kind == .bundle { metrics.streamPayloads(.in) }
            opened(session, kind, payload, now: now)
        }
    }

    /// A datagram from a validated path, by kind.
    private mutating func opened(_ session: Session, _ kind: DatagramKind, _ payload: [UInt8], now: Moment) {
        switch kind {
        case .data:
            data(session, payload: payload, now: now)
        case .bundle:
            guard let messages = try? DatagramBundle.split(payload) else {
                metrics.dropped(.malformed)
                return
            }
            for message in messages { data(session, payload: message, now: now) }
        case .typing:
            typing(session, to: payload, now: now)
        default:
            keepalive(session, now: now)
        }
    }

    /// The session's control connection returned the challenge token: the new address is its.
    mutating func pathResponse(sessionID: UInt64, token: [UInt8], now: Moment) {
        guard let session = sessions[sessionID] else { return }
        let fromStream = session.path.onStream
        guard session.path.respond(token: token) != nil else { return }
        session.udpSilence = UDPSilence(now: now.deadline)
        sendBound(session)
        refreshPresence(session, promptly: true, now: now)
        if fromStream {
            // What the stream carried arrives (the connection loses nothing): only what waits
            // for the window goes on, now over UDP.
            pathChanged(session, from: .stream)
        } else {
            metrics.pushesGivenUp.increment(by: Int64(session.pushes.expediteAll(now: now.deadline)))
        }
        releasing.insert(session.id)
        sendDatagrams(now: now)
    }

    private mutating func bind(_ session: Session, token: [UInt8], from address: SocketAddress, size: Int, now: Moment) {
        let result = session.path.bind(token: token, from: address)
        // On the stream path a BIND over UDP is the client's probe of UDP: its address is
        // challenged, as any new one, and taken when the control connection answers.
        guard result != .ignored || !session.path.onStream else {
            _ = fromValidatedAddress(session, address, size: size, now: now)
            return
        }
        bound(session, result, now: now)
    }

    private mutating func bound(_ session: Session, _ result: PathValidator.BindResult, now: Moment) {
        switch result {
        case .bound:
            session.udpSilence = UDPSilence(now: now.deadline)
            pathChanged(session, from: nil)
            sendBound(session)
            // Presence is written before the inbox is read, on the same connection: a store on
            // another node either ran before the write (the read sees it) or after it (it finds
            // this node in presence, and notifies it).
            session.lastPresenceWrite = now.deadline
            presenceDue[session.id] = session
            writePresence(now: now)
            sync(session)
        case .answerAgain:
            if !session.path.onStream { session.udpSilence.heard(now: now.deadline) }
            sendBound(session)
        case .movedToStream:
            movedToStream(session, because: "client-asked", now: now)
        case .badToken:
            metrics.dropped(.badBindToken)
            act(.send(.error(.invalidToken, "bind token does not belong to this session"), session: session.id))
        case .ignored:
            // A bound session's BIND from another address: a new address is taken only
            // through a challenge.
            metrics.dropped(.unvalidatedAddress)
        }
    }

    /// UDP is lost (the client asked for the stream, or pushes went unanswered): the session
    /// takes the stream, says so (`bound` with an empty address), and everything unconfirmed
    /// goes again inside the connection, in push order, under a new controller (what went over
    /// UDP is no measure of the stream). The client de-duplicates what arrived both ways.
    mutating func moveToStream(_ session: Session, because reason: String, now: Moment) {
        session.path.leaveUDP()
        movedToStream(session, because: reason, now: now)
    }

    private mutating func movedToStream(_ session: Session, because reason: String, now: Moment) {
        pathChanged(session, from: .udp, because: reason)
        sendBound(session)
        _ = session.pushes.expediteAll(now: now.deadline)
        for (seq, push) in session.pushes.unpark() { self.push(seq, push, to: session, now: now) }
        releasing.insert(session.id)
        sendDatagrams(now: now)
    }

    /// The session took a path (`from` nil: its bind): counted, and logged.
    private mutating func pathChanged(_ session: Session, from: DatagramPath?, because reason: String? = nil) {
        metrics.pathChanged(from: from, to: session.datagramPath)
        let path = session.datagramPath?.rawValue ?? "none"
        var metadata = session.logMetadata.merging(["path": "\(path)"]) { $1 }
        if let reason { metadata["reason"] = "\(reason)" }
        logger.info(from == nil ? "session bound" : "session path changed", metadata: metadata)
    }

    private mutating func sendBound(_ session: Session) {
        var bound = Simp_Bound()
        // Empty on the stream path: the client learns which path the server uses.
        bound.address = session.address.map(Self.describe) ?? ""
        act(.send(Simp_Envelope(.bound(bound)), session: session.id))
        sendDatagram(to: session, kind: .pong, payload: [])
    }

    /// A keepalive is not answered: it holds the client's NAT mapping outbound, and an answer
    /// for every one was a tenth of an idle server's CPU. A client checks its path with BIND.
    private mutating func keepalive(_ session: Session, now: Moment) {
        unpark(session, now: now)
        if presenceAging(session, now: now) { refreshPresence(session, promptly: false, now: now) }
    }

    /// The path works again (a keepalive came through): push what was given up, in order.
    private mutating func unpark(_ session: Session, now: Moment) {
        guard session.pushes.hasParked else { return }
        for (seq, push) in session.pushes.unpark() { self.push(seq, push, to: session, now: now) }
        sendDatagrams(now: now)
    }

    /// True when the datagram came from the session's validated address; otherwise it is
    /// dropped, and a bound session's new address is challenged.
    private mutating func fromValidatedAddress(_ session: Session, _ address: SocketAddress, size: Int, now: Moment) -> Bool {
        let verdict = session.path.check(address, size: size, now: now.deadline, newToken: { randomBytes(16) })
        switch verdict {
        case .accept:
            return true
        case .drop(let reason):
            metrics.dropped(.unvalidatedAddress)
            if reason == .amplification { metrics.dropped(.amplification) }
        case .challenge(let token, let target):
            metrics.dropped(.unvalidatedAddress)
            sendDatagram(to: session, kind: .challenge, payload: token, at: target)
        }
        return false
    }

    /// TYPING a session may have relayed: a client sends one every few seconds while its user
    /// types, so 2 a second (bursts of 4) leave room for several conversations.
    static let typingRate = (perSecond: 2, burst: 4)

    /// The user is typing to another: the store says whether that user takes it and where its
    /// devices are (`relayTyping`). Dropped, not refused, when malformed or over `typingRate`:
    /// it is never resent.
    /// A sealed one (`SealedSignals.TypingBody`) is relayed with its MLS message as it is; under
    /// `--e2e required` the plain form is dropped (`e2e_required`).
    private mutating func typing(_ session: Session, to payload: [UInt8], now: Moment) {
        guard let body = SealedSignals.TypingBody(payload), body.user != session.user else {
            metrics.dropped(.malformed)
            return
        }
        let peer = body.user
        if settings.sealedOnly, body.sealed == nil {
            metrics.dropped(.e2eRequired)
            return
        }
        var bucket = session.typingBucket ?? TokenBucket(rate: Self.typingRate.perSecond, burst: Self.typingRate.burst, now: now.deadline)
        defer { session.typingBucket = bucket }
        guard bucket.take(now: now.deadline) else {
            metrics.dropped(.rateLimited)
            return
        }
        act(.routeTyping(from: session.user, to: peer, sealed: body.sealed))
    }

    /// `from` is typing to `to`, whose sessions here hear it (a sealed one's MLS message as it came).
    mutating func relayTyping(from: String, to: String, sealed: [UInt8]? = nil) {
        let payload = SealedSignals.TypingBody(user: from, sealed: sealed).bytes
        for recipient in sessions.sessions(of: to) where recipient.isBound {
            if sendDatagram(to: recipient, kind: .typing, payload: payload) { metrics.typingRelayed.increment() }
        }
    }

    private mutating func data(_ session: Session, payload: [UInt8], now: Moment) {
        guard session.bucket.take(now: now.deadline) else {
            rateLimited(session, now: now)
            return
        }
        guard let message = try? Simp_Message(serializedBytes: payload) else {
            metrics.dropped(.malformed)
            return
        }
        if let problem = MessageRules.problem(in: message, maxTextBytes: settings.maxMessageBytes, sealedOnly: settings.sealedOnly) {
            if problem.code == .e2ERequired { metrics.plaintextRefused.increment() }
            refuse(message, problem, from: session, now: now)
            return
        }
        if message.type == .sealed || message.type == .sealedRead { metrics.sealedTaken.increment() }
        // Before anything is looked up: the answer would say whether the name exists.
        // A group's sealed read receipt (`SENDER#NAME`) is paced as one to SENDER, its inbox:
        // a member's reads to names that are no member's answer whether the name exists.
        let recipient = SealedSignals.inboxOwner(of: message)
        if Self.isPaced(message), recipient != session.user,
           !recipients.admits(session.user, writingTo: recipient, now: now.deadline) {
            metrics.exceeded(.newRecipients)
            refuse(message, (.rateLimited, recipients.reason()), from: session, now: now)
            return
        }
        switch Self.storeRequest(for: message, from: session, now: now) {
        case .refused(let message, let problem):
            refuse(message, problem, from: session, now: now)
        case .unordered(let request):
            enqueueStore(request, now: now)
        case .ordered(let order, let request):
            send(request, order: order, from: session, now: now)
        }
    }

    /// Whether a message counts towards its sender's new recipients (`RecipientPacing`): one to a
    /// user does, and so does a group's sealed read receipt (to its SENDER); one to a group
    /// does not (its members only, and the group answers the same for every name).
    static func isPaced(_ message: Simp_Message) -> Bool {
        GroupName.addressed(by: message.toUser) == nil
    }

    /// The session's send order decides when the message goes to the store.
    private mutating func send(_ request: StoreRequest, order: UInt64, from session: Session, now: Moment) {
        switch session.sendOrder.receive(order, request) {
        case .release(let ready): ready.forEach { enqueueStore($0, now: now) }
        case .late(var again):
            again.answerOnly = true
            enqueueStore(again, now: now)
        case .withdrawn: sendWithdrawn(session, id: request.id, to: request.to)
        case .held: reportMissing(session, now: now)
        case .dropped: break
        }
    }

    /// What a message datagram becomes.
    enum Intake {
        case refused(Simp_Message, (code: Simp_ErrorCode, reason: String))
        /// No send order (its client number is 0): stored on every arrival.
        case unordered(StoreRequest)
        case ordered(UInt64, StoreRequest)
    }

    /// The store request for a valid message from `session`: the sender is the session the
    /// datagram came on, whatever the datagram claims, and the server's time is stamped on it.
    static func storeRequest(for received: Simp_Message, from session: Session, now: Moment) -> Intake {
        var message = received
        let order = message.clientSeq
        let fresh = message.fresh
        let overtaken = message.overtaken
        message.overtaken = false
        message.fromUser = session.user
        message.seq = 0
        message.clientSeq = 0
        message.fresh = false
        message.serverTime = now.millis
        // A group message goes to its sender's inbox too (a member): the device that sent it
        // knows it by its name and shows it once.
        // One to one, the field is only on the sender's own copy, which the store writes from
        // the session: a sender's value would make the message show as the recipient's own.
        let toGroup = GroupName.addressed(by: message.toUser) != nil
        message.fromDevice = toGroup ? session.device : ""
        let bytes: [UInt8] = (try? message.serializedBytes()) ?? []
        // Whose inbox it goes to: a group's sealed read receipt (`SENDER#NAME`) to SENDER's
        // alone, its `toUser` kept as it came (the group names the MLS group that seals it).
        let owner = SealedSignals.inboxOwner(of: message)
        let copied = session.devices > 1 && owner != session.user && !toGroup
        // Stored, it (or its copy for the sender's other devices) could never be pushed: its
        // seq would not fit the datagram.
        let limit = MessageRules.maxStoredBytes - (copied ? session.device.utf8.count + 2 : 0)
            - (toGroup ? MessageRules.groupSeqBytes : 0)
        guard bytes.count <= limit else {
            message.clientSeq = order
            return .refused(message, (.messageTooLarge, "message is \(bytes.count) bytes as stored (with its sender and time); "
                                      + "the limit is \(limit)"))
        }
        var request = StoreRequest(from: session.user, id: message.messageID, to: owner, bytes: bytes)
        request.device = session.device
        request.copiedForSender = copied
        // A sealed read receipt is told, never kept in the conversation's history (as a READ
        // notice is not), and refused when its recipient has read receipts off.
        if message.type == .sealedRead {
            request.inHistory = false
            request.sealedRead = true
            request.readGroup = SealedSignals.ReadAddress(message.toUser)?.group
        }
        // Unordered messages are stored on every arrival: only a numbered one reaches the
        // store once per session, so only it may go early.
        request.fresh = fresh && order > 0
        request.overtaken = overtaken
        return order > 0 ? .ordered(order, request) : .unordered(request)
    }

    private mutating func refuse(_ message: Simp_Message, _ problem: (code: Simp_ErrorCode, reason: String), from session: Session, now: Moment) {
        let failed = Simp_Failed(messageID: message.messageID, to: message.toUser, code: problem.code, reason: problem.reason)
        act(.send(Simp_Envelope(.failed(failed)), session: session.id))
        // Refused for good: the sender's later messages must not wait for its number.
        if message.clientSeq > 0 { session.sendOrder.withdraw(message.clientSeq).released.forEach { enqueueStore($0, now: now) } }
    }

    /// Over the session's message rate the datagram is dropped unread: the client resends it
    /// later (nothing it was told is lost), and is told why at most once a second.
    private mutating func rateLimited(_ session: Session, now: Moment) {
        metrics.dropped(.rateLimited)
        metrics.exceeded(.messagesPerSecond)
        tellLimit(session, .rateLimited, "more than \(settings.messagesPerSecond) messages per second on this session; slowing down", now: now)
    }

    /// An oversize datagram cannot be opened, so its session id is unproven: only a datagram
    /// from the session's validated address gets an error, which a spoofed source can make
    /// arrive at most once a second.
    private mutating func tellOversize(_ envelope: AddressedEnvelope<ByteBuffer>, now: Moment) {
        guard let id = Datagram.sessionID(peeking: envelope.data), let session = sessions[id],
              session.address == envelope.remoteAddress else { return }
        let reason = "datagram of \(envelope.data.readableBytes) bytes exceeds the limit of \(Datagram.maxSize); dropped"
        tellLimit(session, .messageTooLarge, reason, now: now)
    }

    mutating func tellLimit(_ session: Session, _ code: Simp_ErrorCode, _ reason: String, now: Moment) {
        guard Self.mayTellLimit(lastTold: session.lastLimitError[code], now: now.deadline) else { return }
        session.lastLimitError[code] = now.deadline
        act(.send(.error(code, reason), session: session.id))
    }

    /// The session's send order waits for numbers: ask for them now rather than after the
    /// client's timeout (see `missingScan`).
    private mutating func reportMissing(_ session: Session, now: Moment) {
        let scan = Self.missingScan(next: session.sendOrder.next, checkedUpTo: session.missingCheckedUpTo,
                                    lastFullAt: session.lastFullMissingAt, now: now.deadline)
        let gaps = session.sendOrder.gaps(from: scan.start, limit: Self.missingLimit)
        session.missingCheckedUpTo = gaps.count == Self.missingLimit ? gaps[gaps.count - 1] : session.sendOrder.highestHeld
        if scan.full { session.lastFullMissingAt = now.deadline }
        guard !gaps.isEmpty else { return }
        var missing = Simp_Missing()
        missing.clientSeqs = gaps
        act(.send(Simp_Envelope(.missing(missing)), session: session.id))
    }

    /// The sender gave up on a message: stop waiting for it, and tell the sender whether the
    /// server ever had it (if it did, its Accepted or Failed is already on the way).
    mutating func withdraw(sessionID: UInt64, _ withdraw: Simp_Withdraw, now: Moment) {
        guard let session = sessions[sessionID] else { return }
        let (waiting, released) = session.sendOrder.withdraw(withdraw.clientSeq)
        if waiting { sendWithdrawn(session, id: withdraw.messageID, to: withdraw.toUser) }
        released.forEach { enqueueStore($0, now: now) }
    }

    private mutating func sendWithdrawn(_ session: Session, id: String, to: String) {
        let failed = Simp_Failed(messageID: id, to: to, code: .withdrawn, reason: "the server never received it before the sender gave up")
        act(.send(Simp_Envelope(.failed(failed)), session: session.id))
    }
}
