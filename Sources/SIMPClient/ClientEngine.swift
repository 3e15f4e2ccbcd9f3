import Crypto
import NIOCore
import SIMPCore

/// The time an event happened, as the driver read it once: the monotonic deadline for timers
/// and the wall clock (ms since the epoch) for what is stored or shown.
struct Moment: Sendable, Equatable {
    var deadline: NIODeadline
    var millis: Int64
}

/// The client's decisions, pure: one input at a time (something the application asked, the
/// server said, a socket or the disk answered, a timer fired; each with the time it happened),
/// actions out (`Action`), in the order they are to be carried out. It owns the connection's
/// life and the choice of server, sending and its receipts, receiving, presence, typing, read
/// receipts and long messages; `SIMPClient` is its driver and does the I/O. No socket, no
/// disk, no clock, no random draw of its own (`random` is given): every decision here has a
/// unit test with an injected time.
struct ClientEngine {
    /// What happened, as the driver tells it.
    enum Input {
        // The application.
        /// The data directory was opened: what the previous process left.
        case storeOpened(ClientStore.Saved)
        /// `connect`: `token` is an earlier login's, to present instead of the password.
        case connectRequested(user: String, password: String?, token: LoginToken?)
        /// Messages to send, in order (the parts of a long message together).
        case send([Outgoing])
        /// The application holds a handle on this message's status (`sendTracked`, `status(of:)`).
        case track(id: String)
        /// With `confirmWhenShown`: the application showed the received messages at these seqs
        /// (`markShown`, `markRead`), and these read marks of them are to be told.
        case shown([UInt64], marks: [Simp_ReadMark])
        /// A TYPING to send: plain, or `sealed` (its MLS message, docs/E2EE.md, Part 7).
        case typing(to: String, sealed: [UInt8]? = nil)
        /// Sealed read receipts (`SEALED_READ`) to send: the application hears nothing of them
        /// (no `accepted`, `delivered` or `failed`).
        case sendSilently([Outgoing])
        /// The conversation's keys judged a TYPING that came (`SignalRules.typingVerdict`).
        case typingChecked(from: String, SignalRules.Verdict)
        case disconnect
        /// The task awaiting `connect` was cancelled: that connect ends, nothing is retried.
        case connectCancelled
        /// `close()`: the client is done.
        case close
        /// After a password change: reconnects present the new token, or the new password.
        case passwordChanged(password: String, token: LoginToken)
        /// A new datagram socket (`rebindUDP`): the server is to validate it at once.
        case udpReplaced

        // Opening a connection (`Action.attempt`).
        /// The attempt's control connection is open: which request opens the session.
        case sessionWanted(udpPort: Int)
        /// The answer to a request of `SessionStep`.
        case sessionAnswered(SessionStep, Result<Simp_Envelope, ClientError>)
        /// The server opened a session (its path still to be bound).
        case sessionOpened(Simp_ConnectResponse)
        /// The attempt on the server at `index` ended: its session is bound, or it failed.
        case attemptEnded(index: Int, Purpose, Result<Void, ClientError>)
        /// A reconnect attempt scheduled by `Action.reconnect` is due.
        case reconnectDue(index: Int)

        // The control connection.
        /// An envelope from the server (an answer when its `requestID` is not 0).
        case control(Simp_Envelope)
        /// The request numbered so is about to be written on the control connection, after
        /// the actions this answers. `marksRead`: it is a `markRead`, which the server takes
        /// only for what this session confirmed, so a receipt still due goes first.
        case requestSent(UInt64, marksRead: Bool = false)
        /// Its caller's task was cancelled.
        case requestCancelled(UInt64)
        /// No answer came within the request timeout.
        case requestTimedOut(UInt64)
        /// The control connection is closing, for this reason: its requests are not answered.
        case requestsLost(why: String)
        /// The control connection closed.
        case controlClosed
        /// The control connection was idle for writing.
        case pingDue

        // Datagrams, timers, turn ends, the disk and the history.
        case datagram(ByteBuffer)
        /// A task scheduled by `Action.scheduleTick` for this deadline fired: a tick, a task
        /// for a later deadline, or nothing (`TickSchedule`).
        case tickTaskFired(scheduledFor: NIODeadline)
        /// The one timer's deadline came: what `tickTaskFired` leads to when it is due (tests
        /// feed it directly).
        case tick
        /// The pacing's moment (`Action.releaseAt`) came.
        case releaseDue
        /// The end of the loop turn asked for (`Action.atTurnEnd`).
        case turnEnded(TurnEnd)
        /// A batch of received messages (`Action.saveReceived`) was written, or not.
        case saved(Result<Void, StoreWriteError>)
        /// A batch with sealed messages is on disk (or not), opened first: as written.
        case savedOpened(Result<Void, StoreWriteError>, [IncomingMessage])
        /// A change to the outbox on disk (`Action.writeOutbox`) was made, or not.
        case outboxWritten(OutboxWrite, Result<Void, StoreWriteError>)
        /// The earlier parts of a long message read back from the history (`Action.recoverParts`).
        case partsRecovered([IncomingMessage])
        /// A change to the local history (`Action.status`, `Action.history`) was written, or not.
        case historyWritten(Result<Void, StoreWriteError>)
        /// A KEYS hint's check found groups where this device stands in for the one chosen to
        /// commit it (`KeysDeputies`).
        case keysDeputies([KeysDeputies.Duty])
    }

    /// What the driver is to do, in the order given.
    enum Action {
        /// Hand the event to the application.
        case emit(ClientEvent)
        /// A sealed message was shown undecryptable, for this cause: counted.
        case countDecryptionFailure(DecryptionFailure)
        /// A receipt or typing of an encrypted conversation was dropped, for this reason: counted.
        case countDroppedSignal(SignalRules.Kind, SignalRules.Drop)
        /// Ask the conversation's keys about this TYPING (`SignalRules.TypingStep.check`); the
        /// verdict comes back as `typingChecked`.
        case checkTyping(SealedSignals.TypingBody)
        /// The server says `user`'s key directory changed (a KEYS datagram): with `endToEnd`, the
        /// conversations with that user check their members against the directory now.
        case checkKeys(of: String)
        /// A deputy's duty fell due (`KeysDeputies`): the group `in` fetches its commits, then
        /// commits what the directory holds of `of` and the group does not.
        case commitKeys(of: String, in: String)
        /// Tell these read marks (with `endToEnd`: sealed where the conversation is encrypted,
        /// `SignalRules.route`); nobody waits for them.
        case tellReadMarks([Simp_ReadMark])
        case sendControl(Simp_Envelope)
        /// A request of the session's opening; its answer comes back as `sessionAnswered`.
        case request(Simp_Envelope.OneOf_Body, SessionStep)
        /// The session's opening is over for this attempt: its session, or why not.
        case sessionRequested(Result<Simp_ConnectResponse, ClientError>)
        /// A sealed datagram for the server's UDP address (dropped when there is no socket).
        case writeDatagram(ByteBuffer)
        case flushDatagrams
        /// Run `turnEnded` once the loop's current turn is over.
        case atTurnEnd(TurnEnd)
        /// Schedule a task for `deadline`, never cancelled: `tickTaskFired` when it fires.
        case scheduleTick(NIODeadline)
        /// `releaseDue` at `deadline`.
        case releaseAt(NIODeadline)
        /// Open a connection to the server at `index` (`Input.attemptEnded` when it ends).
        case attempt(index: Int, ServerAddress, Purpose)
        /// `reconnectDue` after `delay`.
        case reconnect(index: Int, after: TimeAmount)
        /// The request numbered so is over: this is what its caller gets.
        indirect case answer(UInt64, Result<Simp_Envelope, ClientError>)
        /// The application's `connect` returns (or throws).
        case connectEnded(Result<Void, ClientError>)
        /// The session's path is confirmed: the attempt under way succeeds.
        case pathBound
        /// The server the session is on, for `connectedServer`; nil while there is none.
        case connectedServer(ServerAddress?)
        /// Close the control connection and the datagram socket (a cancelled `connect`).
        case closeConnection
        /// The connection's state changed (`SIMPClient.connectionState`).
        indirect case connectionState(ConnectionState)
        /// The longest text the server takes.
        case textLimit(Int)
        /// Watch the server's heartbeat on the control connection.
        case watchHeartbeat(TimeAmount)
        case writeOutbox(OutboxWrite)
        case saveReceived(ReceivedSaves.Batch)
        /// Read back the parts of `message`'s long message before `part` from the history with `peer`.
        case recoverParts(before: LongText.PartID, of: IncomingMessage, peer: String)
        /// A message the user sent stands here now: tell its watchers, and with `record` write it
        /// to the history (else the outbox write of the same receipt carries it).
        indirect case status(MessageStatus, record: Bool)
        /// Change the local history (only with a store).
        indirect case history(HistoryChange)
    }

    /// A change to the local history besides what the store writes with received messages.
    enum HistoryChange: Sendable, Equatable {
        /// A whole long message, once its parts came together.
        case add(HistoryEntry)
        /// The user read `from`'s message `id` on another device: it is no longer unread here.
        case readElsewhere(id: String, from: String)
    }

    /// Work left to the end of a loop turn, once however often it is asked for in the turn.
    enum TurnEnd: Sendable, Equatable {
        /// What the window lets go leaves, and the datagrams are flushed: a burst of sends
        /// leaves in one sendmmsg.
        case flush
        /// One cumulative receipt per burst of datagrams.
        case receipt
    }

    /// Which request of a session's opening an answer is for.
    enum SessionStep: Sendable, Equatable {
        case login
        /// CONNECT with the saved token (`tokenPresented`) or one just given by a login.
        case connect(tokenPresented: Bool)
    }

    /// A change to the outbox on disk, and what its failure costs.
    /// A change to the outbox on disk, and the receipt that asked for it. Its words are made
    /// only when the write fails: building them for every receipt cost the send path about a
    /// tenth of its time.
    struct OutboxWrite: Sendable, Equatable {
        enum Change: Sendable, Equatable {
            case remove(id: String)
            case markAccepted(id: String, seq: UInt64)
        }

        /// The receipt that made the change.
        enum Cause: Sendable, Equatable {
            case accepted, groupAccepted, failed, delivered
        }

        var change: Change
        var cause: Cause
        /// The status the receipt gave the message, recorded in the same transaction.
        var status: MessageStatus?

        var id: String {
            switch change {
            case .remove(let id), .markAccepted(let id, _): id
            }
        }

        /// What the write was to do, for the error that says it could not.
        var what: String {
            switch cause {
            case .accepted: "record that message \(id) was accepted"
            case .groupAccepted: "remove accepted group message \(id) from the outbox"
            case .failed: "remove failed message \(id) from the outbox"
            case .delivered: "remove delivered message \(id) from the outbox"
            }
        }

        /// What the lost write costs the user.
        var consequence: String {
            switch cause {
            case .accepted, .groupAccepted: "a restart with this data directory sends it again (the server knows it by its id)"
            case .failed: "a restart with this data directory sends it again"
            case .delivered: "a restart with this data directory reports it delivered again"
            }
        }
    }

    let configuration: ClientConfiguration
    /// Its durations in the loop's terms.
    let times: ClientConfiguration.LoopTimes
    /// A uniformly random number: message ids, ping nonces, reconnect jitter.
    let random: @Sendable () -> UInt64
    /// What to carry out, in order; `handle` returns them.
    var actions: [Action] = []

    // Who this client is.
    /// No password when connected with a saved token.
    var credentials: (user: String, password: String?)?
    /// The token of the last login: reconnects present it instead of the password while valid.
    var token: LoginToken?
    /// Which of the user's devices this client is.
    var device: String
    /// The data directory is open: received messages are saved before shown and confirmed.
    var hasStore = false

    // The connection.
    var lifecycle = ConnectionLifecycle()
    /// The requests written on the control connection and not yet over (ClientEngine+Requests).
    var pendingRequests = Set<UInt64>()
    /// What the application is told of the connection (`Action.connectionState` on a change).
    var connectionState = ConnectionState.disconnected
    var rotation: ServerRotation
    /// The server of the connection open or being opened.
    var server: ServerAddress
    /// The application's `connect`: the servers left to try, and each failure so far.
    var connectSearch: (order: ArraySlice<Int>, failures: [ClientError])?
    var session: Simp_ConnectResponse?
    /// The datagram socket's port, for the CONNECT of the session being opened.
    var sessionUDPPort = 0
    var sessionKey: SymmetricKey?
    var replay = ReplayWindow()
    var nextPacketNumber: UInt64 = 1
    var timers: ClientTimers
    /// The tasks scheduled for `timers`' tick, never cancelled (`TickSchedule` says why).
    var tickSchedule = TickSchedule()
    /// UDP or the stream (`PathChoice`).
    var paths: PathChoice

    // Sending.
    var sending: SendTracker
    /// Messages on their way to the server, under its congestion window and pacing.
    var uplink: Uplink
    var releaseScheduled = false
    var turnEnds: Set<TurnEnd> = []
    /// Turns the events of the parts of long messages sent into the messages' events.
    var longSends = LongSends()
    /// Each sent message's status, from the events about it.
    var statuses = StatusBook()

    // Receiving.
    /// Received messages put in seq order: what may be handed over, what is missing.
    var sequencer = InboundSequencer<IncomingMessage>()
    /// Messages handed over before they were numbered, until their numbered copy comes.
    var early = EarlyLedger()
    var copyReceipts = CopyReceipts()
    /// Parts of long messages received, until each message is whole.
    var reassembly = Reassembly()
    /// With a store: received messages on their way to disk. Receipts never confirm more
    /// than its saved mark.
    var saves = ReceivedSaves(savedUpTo: 0)
    /// What the next receipt confirms: the delivered mark, or with a store the saved mark.
    /// Everything up to it is here, in order (with a store: saved).
    var receivedUpTo: UInt64 { hasStore ? saves.savedUpTo : sequencer.deliveredUpTo }
    /// What receipts confirm: all that was received, or with `confirmWhenShown` what was shown below it.
    var confirmUpTo: UInt64 { configuration.confirmWhenShown ? unshown.confirmable(received: receivedUpTo) : receivedUpTo }
    /// With `confirmWhenShown`: what was handed over and not yet shown.
    var unshown = ShownLedger()
    /// With `confirmWhenShown`: read marks of messages not confirmed yet (one below them is
    /// not shown), told once they are: the server tells only what the session confirmed.
    var heldReadMarks: [Simp_ReadMark] = []
    /// Ids of sealed read receipts sent (`sendSilently`): their answers are not events.
    var silent: Set<String> = []
    /// Groups where this device stands in for a KEYS hint's chosen committer, and when.
    var deputies = KeysDeputies()

    init(configuration: ClientConfiguration, random: @escaping @Sendable () -> UInt64) {
        self.configuration = configuration
        self.random = random
        let times = configuration.loopTimes
        self.times = times
        sending = SendTracker(policy: times.retransmit)
        uplink = Uplink(windowed: configuration.congestionControl)
        device = configuration.device ?? DeviceName.unnamed
        timers = ClientTimers(keepaliveInterval: times.keepalive, bindRetry: times.bindRetry)
        paths = PathChoice(allowed: configuration.datagramsOverStream == .auto)
        rotation = ServerRotation(count: configuration.servers.count,
                                  backoff: times.reconnect)
        server = configuration.servers.first ?? ServerAddress(host: "", port: 0)
    }

    /// The one entry: what `input` at `now` asks the driver to do.
    mutating func handle(_ input: Input, at now: Moment) -> [Action] {
        var out: [Action] = []
        handle(input, at: now, into: &out)
        return out
    }

    /// `handle(_:at:)` appending to the caller's array, so that a driver can reuse one.
    mutating func handle(_ input: Input, at now: Moment, into out: inout [Action]) {
        swap(&actions, &out)
        defer { swap(&actions, &out) }
        switch input {
        case .storeOpened(let saved): storeOpened(saved, now: now)
        case .connectRequested(let user, let password, let token): connectRequested(user: user, password: password, token: token, now: now)
        case .send(let items): send(items, now: now)
        case .typing(let peer, let sealed): typing(to: peer, sealed: sealed)
        case .sendSilently(let items):
            silent.formUnion(items.map(\.message.messageID))
            send(items, now: now)
        case .typingChecked(let from, let verdict):
            switch verdict {
            case .show: emit(.typing(from: from))
            case .drop(let reason): actions.append(.countDroppedSignal(.typing, reason))
            }
        case .disconnect: disconnect()
        case .connectCancelled: connectCancelled()
        case .close: setConnectionState(.closed)
        case .passwordChanged(let password, let token): passwordChanged(to: password, token: token)
        case .udpReplaced: udpReplaced(now: now)
        case .sessionWanted(let udpPort): sessionWanted(udpPort: udpPort, now: now)
        case .sessionAnswered(let step, let answer): sessionAnswered(step, answer)
        case .sessionOpened(let response): sessionOpened(response, now: now)
        case .attemptEnded(let index, let purpose, let result): attemptEnded(index: index, purpose, result, now: now)
        case .reconnectDue(let index): reconnectDue(index: index)
        case .control(let envelope): envelope.requestID == 0 ? control(envelope, now: now) : answered(envelope)
        case .requestSent(let id, let marksRead): requestSent(id, marksRead: marksRead)
        case .requestCancelled(let id): requestEnded(id, .cancelled)
        case .requestTimedOut(let id):
            requestEnded(id, ClientError("no answer from the server within \(times.request.nanoseconds / 1_000_000_000)s"))
        case .requestsLost(let why): requestsLost(why)
        case .controlClosed: controlClosed()
        case .pingDue: sendPing()
        case .datagram(let buffer): datagram(buffer, now: now)
        case .tickTaskFired(let deadline): tickTaskFired(scheduledFor: deadline, now: now)
        case .tick: tick(now: now)
        case .releaseDue: releaseDue()
        case .turnEnded(let end): turnEnded(end, now: now)
        case .saved(let result): saved(result, now: now)
        case .savedOpened(let result, let opened): saved(result, opened: opened, now: now)
        case .outboxWritten(let write, let result): outboxWritten(write, result)
        case .partsRecovered(let found): partsRecovered(found, now: now)
        case .historyWritten(let result): historyWritten(result)
        case .keysDeputies(let duties):
            deputies.named(duties, now: now.deadline)
            if let next = deputies.next { armTick(at: next, now: now.deadline) }
        case .track(let id): statuses.track(id)
        case .shown(let seqs, let marks): shown(seqs, marks: marks)
        }
    }

    // MARK: shared

    /// The event the application sees: a part's becomes its long message's, or none.
    mutating func emit(_ event: ClientEvent) {
        switch event {
        case .accepted(let id, _, _) where silent.contains(id): return
        case .delivered(let id, _, _) where silent.contains(id), .failed(let id, _, _, _) where silent.contains(id):
            silent.remove(id)
            return
        default: break
        }
        guard let shown = longSends.fold(event) else { return }
        actions.append(.emit(shown))
        // A status is kept for what a handle follows, or for every message when the history
        // records them; a plain `send` without a data directory pays for none.
        if let status = statuses.apply(shown, user: credentials?.user, everyMessage: hasStore) {
            actions.append(.status(status, record: !recordWithOutboxWrite(status)))
        }
        if hasStore, case .read(let id, let from, let by) = shown, by == credentials?.user {
            actions.append(.history(.readElsewhere(id: id, from: from)))
        }
    }

    /// Tells the application the connection's new state, when it changed.
    mutating func setConnectionState(_ state: ConnectionState) {
        guard state != connectionState, connectionState != .closed else { return }
        connectionState = state
        actions.append(.connectionState(state))
    }

    /// `end` at the end of this loop turn, once.
    mutating func atTurnEnd(_ end: TurnEnd) {
        guard turnEnds.insert(end).inserted else { return }
        actions.append(.atTurnEnd(end))
    }

    /// Keeps the one timer armed for the earliest deadline asked for, scheduling a task only
    /// when none already scheduled fires by then (`TickSchedule`).
    mutating func armTick(at deadline: NIODeadline, now: NIODeadline) {
        guard timers.arm(deadline) else { return }
        if let task = tickSchedule.arm(deadline, now: now) { actions.append(.scheduleTick(task)) }
    }

    /// A tick task fired: the tick when its deadline came, else the next task, or nothing.
    mutating func tickTaskFired(scheduledFor deadline: NIODeadline, now: Moment) {
        switch tickSchedule.fired(scheduledFor: deadline, now: now.deadline) {
        case .tick: tick(now: now)
        case .schedule(let next): actions.append(.scheduleTick(next))
        case .nothing: break
        }
    }

    mutating func sendControl(_ body: Simp_Envelope.OneOf_Body) {
        actions.append(.sendControl(Simp_Envelope(body)))
    }

    /// A uniformly random number in 0..<1.
    func randomFraction() -> Double {
        Double(random() >> 11) / Double(UInt64(1) << 53)
    }

    /// What the disk did not take: say so, and what it costs.
    mutating func outboxWritten(_ write: OutboxWrite, _ result: Result<Void, StoreWriteError>) {
        guard case .failure(let error) = result else { return }
        emit(.error("cannot \(write.what) in \(error.path): \(error.reason); \(write.consequence)"))
    }

    /// Puts a status in the outbox write its receipt made just before (one transaction for
    /// both, not two); false when there is none.
    private mutating func recordWithOutboxWrite(_ status: MessageStatus) -> Bool {
        for index in actions.indices.reversed().prefix(2) {
            guard case .writeOutbox(var write) = actions[index], write.id == status.id, write.status == nil else { continue }
            write.status = status
            actions[index] = .writeOutbox(write)
            return true
        }
        return false
    }

    mutating func historyWritten(_ result: Result<Void, StoreWriteError>) {
        guard case .failure(let error) = result else { return }
        emit(.error("cannot update the local history in \(error.path): \(error.reason)"))
    }

    mutating func writeOutbox(_ change: OutboxWrite.Change, for cause: OutboxWrite.Cause) {
        guard hasStore else { return }
        actions.append(.writeOutbox(OutboxWrite(change: change, cause: cause)))
    }
}
