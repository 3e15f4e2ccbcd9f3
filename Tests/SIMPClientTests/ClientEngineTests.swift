import Crypto
import Foundation
import NIOCore
import SIMPCore
import Testing
@testable import SIMPClient

/// Each case of `ClientEngine.Input`: events in, actions out, with injected time and randomness.
@Suite struct ClientEngineTests {
    static let start = Moment(deadline: .uptimeNanoseconds(1_000_000_000), millis: 1_700_000_000_000)
    static let key = SymmetricKey(data: Array(repeating: UInt8(7), count: 32))
    static let sessionID: UInt64 = 42
    /// The server's `bound` for a session bound over UDP (an empty address: the stream).
    static let udpBound = Simp_Bound.with { $0.address = "127.0.0.1:7701" }

    static func at(_ ms: Int64) -> Moment {
        Moment(deadline: start.deadline + .milliseconds(ms), millis: start.millis + ms)
    }

    static func configuration(servers: Int = 1) -> ClientConfiguration {
        var configuration = ClientConfiguration(servers: (0..<servers).map { ServerAddress(host: "127.0.0.1", port: 7700 + $0) })
        configuration.device = "phone"
        return configuration
    }

    static func engine(servers: Int = 1, random: UInt64 = 1 << 63, confirmWhenShown: Bool = false, endToEnd: Bool = false) -> ClientEngine {
        var configuration = configuration(servers: servers)
        configuration.confirmWhenShown = confirmWhenShown
        configuration.endToEnd = endToEnd
        return ClientEngine(configuration: configuration, random: { random })
    }

    static func response() -> Simp_ConnectResponse {
        var response = Simp_ConnectResponse()
        response.sessionID = sessionID
        response.sessionKey = Data(Array(repeating: UInt8(7), count: 32))
        response.bindToken = Data([1, 2, 3])
        response.heartbeatMillis = 5000
        response.bundles = true
        return response
    }

    static func loginOk(expiresAt: Int64 = start.millis + 3_600_000) -> Simp_Envelope {
        var ok = Simp_LoginResponse()
        ok.token = "t1"
        ok.expiresAt = expiresAt
        return Simp_Envelope(.loginOk(ok))
    }

    /// An engine with a bound session on the first server, and what connecting asked for.
    static func connected(servers: Int = 1, confirmWhenShown: Bool = false, endToEnd: Bool = false) -> ClientEngine {
        var engine = engine(servers: servers, confirmWhenShown: confirmWhenShown, endToEnd: endToEnd)
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: start)
        _ = engine.handle(.sessionWanted(udpPort: 5000), at: start)
        _ = engine.handle(.sessionAnswered(.login, .success(loginOk())), at: start)
        _ = engine.handle(.sessionAnswered(.connect(tokenPresented: false), .success(Simp_Envelope(.connected(response())))), at: start)
        _ = engine.handle(.sessionOpened(response()), at: start)
        _ = engine.handle(.control(Simp_Envelope(.bound(ClientEngineTests.udpBound))), at: start)
        _ = engine.handle(.attemptEnded(index: 0, .connect, .success(())), at: start)
        _ = engine.handle(.turnEnded(.flush), at: start)
        return engine
    }

    static func events(_ actions: [ClientEngine.Action]) -> [ClientEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    static func controls(_ actions: [ClientEngine.Action]) -> [Simp_Envelope.OneOf_Body] {
        actions.compactMap { if case .sendControl(let envelope) = $0 { envelope.body } else { nil } }
    }

    static func datagrams(_ actions: [ClientEngine.Action]) -> [(DatagramHeader, [UInt8])] {
        actions.compactMap {
            guard case .writeDatagram(var buffer) = $0, let header = try? Datagram.decodeHeader(&buffer),
                  let payload = try? DatagramSeal.open(header, sealed: buffer, key: key, direction: .toServer) else { return nil }
            return (header, payload)
        }
    }

    static func turnEnds(_ actions: [ClientEngine.Action]) -> [ClientEngine.TurnEnd] {
        actions.compactMap { if case .atTurnEnd(let end) = $0 { end } else { nil } }
    }

    /// A datagram from the server of the session.
    static func datagram(_ kind: DatagramKind, _ payload: [UInt8], packet: UInt64 = 1, session: UInt64 = sessionID) -> ClientEngine.Input {
        let header = DatagramHeader(kind: kind, sessionID: session, packetNumber: packet)
        return .datagram(try! DatagramSeal.seal(header, payload: payload, key: key, direction: .toClient))
    }

    static func message(seq: UInt64, from: String = "bob", id: String = "m1", text: String = "hi") -> [UInt8] {
        var message = Simp_Message()
        message.seq = seq
        message.fromUser = from
        message.toUser = "alice"
        message.messageID = id
        message.content = text
        return try! message.serializedBytes()
    }

    static func outgoing(_ id: String, to: String = "bob") -> Outgoing {
        var message = Simp_Message()
        message.messageID = id
        message.toUser = to
        message.content = "hello"
        return Outgoing(to: to, message: message)
    }

    struct DiskFull: Error {}

    // MARK: the application

    @Test func storeOpenedRestoresWhatThePreviousProcessLeft() {
        var engine = Self.engine()
        let saved = ClientStore.Saved(device: "laptop", savedUpTo: 9, pending: [("p1", "bob", Simp_Message())], accepted: [("a1", "bob", 3)])
        let actions = engine.handle(.storeOpened(saved), at: Self.start)
        #expect(actions.isEmpty)
        #expect(engine.hasStore && engine.confirmUpTo == 9)
        #expect(engine.device == "phone", "the configured device wins over the stored one")
        #expect(engine.sending.outstandingCount == 2)
    }

    @Test func connectRequestedTriesTheFirstServerAndStartsTheTimer() {
        var engine = Self.engine(servers: 2)
        let actions = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: Self.start)
        guard case .scheduleTick(let deadline) = actions.first, case .attempt(0, let server, .connect) = actions.last else {
            Issue.record("got \(actions)")
            return
        }
        #expect(deadline == Self.start.deadline + ClientTimers.fastTick)
        #expect(server.port == 7700)
    }

    @Test func sendNumbersAndQueuesOnlyWhenBound() {
        var idle = Self.engine()
        let before = idle.handle(.send([Self.outgoing("m1")]), at: Self.start)
        #expect(Self.turnEnds(before).isEmpty, "unbound: it waits in the outbox")
        #expect(idle.sending.outstandingCount == 1)

        var engine = Self.connected()
        let actions = engine.handle(.send([Self.outgoing("m1"), Self.outgoing("m2")]), at: Self.at(1))
        #expect(Self.turnEnds(actions) == [.flush], "one flush per turn")
        let flushed = engine.handle(.turnEnded(.flush), at: Self.at(1))
        let sent = Self.datagrams(flushed)
        #expect(sent.count == 2, "both leave at the turn's end")
        guard case .flushDatagrams = flushed.last else {
            Issue.record("no flush: \(flushed)")
            return
        }
    }

    @Test func typingGoesOnlyOnABoundPath() {
        var idle = Self.engine()
        #expect(idle.handle(.typing(to: "bob"), at: Self.start).isEmpty)
        var engine = Self.connected()
        let sent = Self.datagrams(engine.handle(.typing(to: "bob"), at: Self.start))
        #expect(sent.count == 1 && sent[0].0.kind == .typing && sent[0].1 == Array("bob".utf8))
    }

    @Test func disconnectFailsWhatWasNotAcceptedWithoutAStore() {
        var engine = Self.connected()
        _ = engine.handle(.send([Self.outgoing("m1")]), at: Self.start)
        let actions = engine.handle(.disconnect, at: Self.at(1))
        #expect(Self.events(actions) == [.failed(id: "m1", to: "bob", reason: "client disconnected before the server confirmed it")])
        #expect(engine.tickSchedule.wanted == nil, "no tick is wanted any more")
        #expect(engine.lifecycle.state == .idle)
    }

    @Test func passwordChangedIsPresentedOnTheNextSession() {
        var engine = Self.connected()
        let token = LoginToken(value: "t2", expiresMillis: Self.start.millis + 3_600_000)
        #expect(engine.handle(.passwordChanged(password: "new", token: token), at: Self.start).isEmpty)
        #expect(engine.token == token && engine.credentials?.password == "new")
        guard case .request(.connect(let connect), .connect(tokenPresented: true)) = engine.handle(.sessionWanted(udpPort: 1), at: Self.start).first else {
            Issue.record("the new token is not presented")
            return
        }
        #expect(connect.token == "t2")
    }

    @Test func udpReplacedSendsAKeepaliveAtOnce() {
        var engine = Self.connected()
        let sent = Self.datagrams(engine.handle(.udpReplaced, at: Self.at(5)))
        #expect(sent.map { $0.0.kind } == [.keepalive])
    }

    // MARK: opening a connection

    @Test func sessionWantedPresentsAValidTokenElseLogsIn() {
        var engine = Self.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: LoginToken(value: "old", expiresMillis: Self.start.millis + 30_000)),
                          at: Self.start)
        guard case .request(.login(let login), .login) = engine.handle(.sessionWanted(udpPort: 5000), at: Self.start).first else {
            Issue.record("a token about to expire is not presented")
            return
        }
        #expect(login.user == "alice" && login.device == "phone")

        var saved = Self.engine()
        _ = saved.handle(.connectRequested(user: "alice", password: nil, token: LoginToken(value: "tok", expiresMillis: Self.start.millis + 120_000)),
                         at: Self.start)
        guard case .request(.connect(let connect), .connect(tokenPresented: true)) = saved.handle(.sessionWanted(udpPort: 5000), at: Self.start).first else {
            Issue.record("a valid token is not presented")
            return
        }
        #expect(connect.token == "tok" && connect.udpPort == 5000 && connect.bundles)
    }

    @Test func sessionAnsweredFallsBackToThePasswordWhenTheTokenIsRefused() {
        var engine = Self.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: LoginToken(value: "tok", expiresMillis: Self.start.millis + 120_000)),
                          at: Self.start)
        _ = engine.handle(.sessionWanted(udpPort: 1), at: Self.start)
        let refused = ClientError("expired", code: .invalidToken)
        guard case .request(.login, .login) = engine.handle(.sessionAnswered(.connect(tokenPresented: true), .failure(refused)), at: Self.start).first else {
            Issue.record("no login after a refused token")
            return
        }
        #expect(engine.token == nil)
        guard case .request(.connect(let connect), .connect(tokenPresented: false)) = engine.handle(.sessionAnswered(.login, .success(Self.loginOk())), at: Self.start).first else {
            Issue.record("no connect after the login")
            return
        }
        #expect(connect.token == "t1")
        guard case .sessionRequested(.success) = engine.handle(.sessionAnswered(.connect(tokenPresented: false), .success(Simp_Envelope(.connected(Self.response())))), at: Self.start).first else {
            Issue.record("no session")
            return
        }
        // Without a password, a refused token ends the attempt.
        var tokenOnly = Self.engine()
        _ = tokenOnly.handle(.connectRequested(user: "alice", password: nil, token: LoginToken(value: "tok", expiresMillis: Self.start.millis + 120_000)),
                             at: Self.start)
        guard case .sessionRequested(.failure(let failure)) = tokenOnly.handle(.sessionAnswered(.connect(tokenPresented: true), .failure(refused)), at: Self.start).first else {
            Issue.record("no failure")
            return
        }
        #expect(failure.code == .invalidToken)
    }

    @Test func sessionOpenedBindsThePathAndSetsTheLimit() {
        var engine = Self.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: Self.start)
        var response = Self.response()
        response.maxMessageBytes = 1000
        let actions = engine.handle(.sessionOpened(response), at: Self.at(1))
        let sent = Self.datagrams(actions)
        #expect(sent.count == 1 && sent[0].0.kind == .bind && sent[0].1 == [1, 2, 3] && sent[0].0.packetNumber == 1)
        #expect(actions.contains { if case .textLimit(1000) = $0 { true } else { false } })
        #expect(actions.contains { if case .watchHeartbeat(.milliseconds(5000)) = $0 { true } else { false } })
        // Unconfirmed, the bind is sent again after `bindRetry`.
        let retried = Self.datagrams(engine.handle(.tick, at: Self.at(1 + 250)))
        #expect(retried.map { $0.0.kind } == [.bind])
    }

    @Test func attemptEndedTriesTheNextServerThenFailsTheConnect() {
        var engine = Self.engine(servers: 2)
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: Self.start)
        let first = engine.handle(.attemptEnded(index: 0, .connect, .failure(ClientError("cannot reach"))), at: Self.start)
        guard case .attempt(1, _, .connect) = first.first else {
            Issue.record("the second server is not tried: \(first)")
            return
        }
        let second = engine.handle(.attemptEnded(index: 1, .connect, .failure(ClientError("cannot reach"))), at: Self.start)
        guard case .connectEnded(.failure(let failure)) = second.first(where: { if case .connectEnded = $0 { true } else { false } }) else {
            Issue.record("connect does not fail: \(second)")
            return
        }
        #expect(failure.message.hasPrefix("no server could be reached: 127.0.0.1:7700"))
        #expect(engine.lifecycle.state == .idle)
    }

    @Test func attemptEndedRefusedEndsTheSearchAtOnce() {
        var engine = Self.engine(servers: 2)
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: Self.start)
        let refused = ClientError("wrong password", code: .invalidCredentials)
        let ended = engine.handle(.attemptEnded(index: 0, .connect, .failure(refused)), at: Self.start)
        guard case .connectEnded(.failure(let failure)) = ended.first(where: { if case .connectEnded = $0 { true } else { false } }) else {
            Issue.record("a refusal does not end the search")
            return
        }
        #expect(failure == refused)
    }

    @Test func attemptEndedConnectedResendsAndReportsConnected() {
        var engine = Self.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: Self.start)
        _ = engine.handle(.send([Self.outgoing("m1")]), at: Self.start)
        _ = engine.handle(.sessionOpened(Self.response()), at: Self.start)
        _ = engine.handle(.control(Simp_Envelope(.bound(ClientEngineTests.udpBound))), at: Self.start)
        _ = engine.handle(.turnEnded(.flush), at: Self.start)
        let actions = engine.handle(.attemptEnded(index: 0, .connect, .success(())), at: Self.at(1))
        #expect(Self.events(actions) == [.connected(user: "alice")])
        #expect(Self.turnEnds(actions) == [.flush], "the waiting message goes out on the new path")
        guard case .connectEnded(.success) = actions.last else {
            Issue.record("connect does not return: \(actions)")
            return
        }
    }

    @Test func reconnectDueTriesTheNextServerAfterALoss() {
        var engine = Self.connected(servers: 2)
        let lost = engine.handle(.controlClosed, at: Self.at(1))
        let told = Self.events(lost)
        #expect(told.first == .disconnected(reason: "control connection to 127.0.0.1:7700 closed"))
        guard told.count == 2, case .reconnecting(1, let waited) = told[1], case .reconnect(1, let delay) = lost.last else {
            Issue.record("no reconnect: \(lost)")
            return
        }
        #expect(delay > .zero && waited == .nanoseconds(delay.nanoseconds), "a round starts after the backoff, with the next server")
        guard case .attempt(1, _, .reconnect) = engine.handle(.reconnectDue(index: 1), at: Self.at(2)).first else {
            Issue.record("the attempt is not made")
            return
        }
        let failed = engine.handle(.attemptEnded(index: 1, .reconnect, .failure(ClientError("cannot reach"))), at: Self.at(3))
        #expect(Self.events(failed).first == .error("reconnect failed: cannot reach"))
        guard case .reconnect(0, .zero) = failed.last else {
            Issue.record("within a round the next server is tried at once: \(failed)")
            return
        }
    }

    @Test func aDisconnectThenTheConnectionClosingSchedulesNoReconnect() {
        var engine = Self.connected()
        _ = engine.handle(.disconnect, at: Self.at(1))
        let closed = engine.handle(.controlClosed, at: Self.at(2))
        #expect(!closed.contains { if case .reconnect = $0 { true } else { false } })
        #expect(!Self.events(closed).contains { if case .reconnecting = $0 { true } else { false } })
        for second in Int64(3)...120 {
            let later = engine.handle(.tick, at: Self.at(second * 1000))
            #expect(!later.contains { if case .reconnect = $0 { true } else { false } })
        }
    }

    @Test func reconnectDueAfterADisconnectDoesNothing() {
        var engine = Self.connected()
        _ = engine.handle(.controlClosed, at: Self.at(1))
        _ = engine.handle(.disconnect, at: Self.at(2))
        #expect(engine.handle(.reconnectDue(index: 0), at: Self.at(3)).isEmpty)
    }

    // MARK: the control connection

    @Test func controlAcceptedDeliveredAndFailedTellTheFateOfAMessage() {
        var engine = Self.connected()
        _ = engine.handle(.send([Self.outgoing("m1"), Self.outgoing("m2")]), at: Self.start)
        var accepted = Simp_Accepted()
        accepted.messageID = "m1"
        accepted.toUser = "bob"
        accepted.seq = 5
        #expect(Self.events(engine.handle(.control(Simp_Envelope(.accepted(accepted))), at: Self.at(1))) == [.accepted(id: "m1", to: "bob", seq: 5)])
        #expect(Self.events(engine.handle(.control(Simp_Envelope(.accepted(accepted))), at: Self.at(1))).isEmpty, "once")
        var delivered = Simp_Delivered()
        delivered.messageID = "m1"
        delivered.toUser = "bob"
        delivered.seq = 5
        #expect(Self.events(engine.handle(.control(Simp_Envelope(.delivered(delivered))), at: Self.at(2))) == [.delivered(id: "m1", to: "bob", seq: 5)])
        var failed = Simp_Failed()
        failed.messageID = "m2"
        failed.toUser = "bob"
        failed.reason = "blocked"
        #expect(Self.events(engine.handle(.control(Simp_Envelope(.failed(failed))), at: Self.at(3))) == [.failed(id: "m2", to: "bob", reason: "blocked", code: .unspecified)])
    }

    @Test func controlWithAStoreWritesTheOutbox() {
        var engine = Self.connected()
        _ = engine.handle(.storeOpened(ClientStore.Saved(device: "x", savedUpTo: 0, pending: [], accepted: [])), at: Self.start)
        _ = engine.handle(.send([Self.outgoing("m1")]), at: Self.start)
        var accepted = Simp_Accepted()
        accepted.messageID = "m1"
        accepted.toUser = "bob"
        accepted.seq = 5
        let actions = engine.handle(.control(Simp_Envelope(.accepted(accepted))), at: Self.at(1))
        #expect(actions.contains { if case .writeOutbox(let write) = $0 { write.change == .markAccepted(id: "m1", seq: 5) } else { false } })
    }

    @Test func controlPingIsAnsweredAndRetractionsAndErrorsAreReported() {
        var engine = Self.connected()
        var ping = Simp_Ping()
        ping.nonce = 99
        guard case .pong(let pong) = Self.controls(engine.handle(.control(Simp_Envelope(.ping(ping))), at: Self.start)).first else {
            Issue.record("no pong")
            return
        }
        #expect(pong.nonce == 99)
        var retracted = Simp_Retracted()
        retracted.fromUser = "bob"
        retracted.messageID = "e1"
        #expect(Self.events(engine.handle(.control(Simp_Envelope(.retracted(retracted))), at: Self.start)).isEmpty,
                "nothing was handed over early")
        var error = Simp_Error()
        error.code = .sessionReplaced
        error.reason = "replaced"
        #expect(Self.events(engine.handle(.control(Simp_Envelope(.error(error))), at: Self.start)) == [.error("server: replaced", code: .sessionReplaced)])
        #expect(Self.events(engine.handle(.controlClosed, at: Self.at(1))) == [.ended(reason: "replaced")], "no reconnect")
    }

    @Test func controlMissingResendsAtOnce() {
        var engine = Self.connected()
        _ = engine.handle(.send([Self.outgoing("m1")]), at: Self.start)
        _ = engine.handle(.turnEnded(.flush), at: Self.start)
        var missing = Simp_Missing()
        missing.clientSeqs = [1]
        let actions = engine.handle(.control(Simp_Envelope(.missing(missing))), at: Self.at(1))
        #expect(Self.turnEnds(actions) == [.flush])
        #expect(Self.datagrams(engine.handle(.turnEnded(.flush), at: Self.at(1))).count == 1)
    }

    @Test func controlClosedWhileConnectingLeavesTheAttemptToFail() {
        var engine = Self.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: Self.start)
        let actions = engine.handle(.controlClosed, at: Self.start)
        #expect(Self.events(actions).isEmpty)
        #expect(actions.contains { if case .connectedServer(nil) = $0 { true } else { false } })
    }

    @Test func pingDueSendsARandomNonce() {
        var engine = ClientEngine(configuration: Self.configuration(), random: { 1234 })
        guard case .ping(let ping) = Self.controls(engine.handle(.pingDue, at: Self.start)).first else {
            Issue.record("no ping")
            return
        }
        #expect(ping.nonce == 1234)
    }

    // MARK: datagrams, timers, turn ends, the disk and the history

    @Test func datagramMessagesAreShownInOrderAndConfirmedOnce() {
        var engine = Self.connected()
        let ahead = engine.handle(Self.datagram(.data, Self.message(seq: 2, id: "m2"), packet: 1), at: Self.at(1))
        #expect(Self.events(ahead).isEmpty)
        guard case .receipt(let gap) = Self.controls(ahead).first else {
            Issue.record("the gap is not reported")
            return
        }
        #expect(gap.missing == [1])
        let filled = engine.handle(Self.datagram(.data, Self.message(seq: 1, id: "m1"), packet: 2), at: Self.at(2))
        #expect(Self.events(filled).map { if case .message(let m) = $0 { m.id } else { "" } } == ["m1", "m2"])
        #expect(Self.turnEnds(filled) == [.receipt])
        guard case .receipt(let receipt) = Self.controls(engine.handle(.turnEnded(.receipt), at: Self.at(2))).first else {
            Issue.record("no receipt")
            return
        }
        #expect(receipt.upToSeq == 2)
        #expect(engine.handle(Self.datagram(.data, Self.message(seq: 3), packet: 2), at: Self.at(3)).isEmpty, "a replayed packet is dropped")
        #expect(engine.handle(Self.datagram(.data, Self.message(seq: 3), packet: 3, session: 7), at: Self.at(3)).isEmpty, "another session's")
    }

    @Test func datagramTypingPresenceAndChallenge() {
        var engine = Self.connected()
        #expect(Self.events(engine.handle(Self.datagram(.typing, Array("bob".utf8), packet: 1), at: Self.start)) == [.typing(from: "bob")])
        let change = PresenceChange(user: "bob", online: true, since: 5)
        #expect(Self.events(engine.handle(Self.datagram(.presence, change.payload, packet: 2), at: Self.start)) == [.presence(PresenceInfo(user: change.user, state: change.online ? .online : .offline, lastSeen: Date(millis: change.since)))])
        guard case .pathResponse(let response) = Self.controls(engine.handle(Self.datagram(.challenge, [9, 9], packet: 3), at: Self.start)).first else {
            Issue.record("the challenge is not answered")
            return
        }
        #expect(response.token == Data([9, 9]))
    }

    /// A KEYS datagram asks an encrypting client to check its conversations with the user it
    /// names (`checkKeys`); a plaintext client, or a name that is no user's, does nothing.
    @Test func aKeysDatagramChecksTheConversationsWithItsUser() {
        func checks(_ actions: [ClientEngine.Action]) -> [String] {
            actions.compactMap { if case .checkKeys(let user) = $0 { user } else { nil } }
        }
        var encrypting = Self.connected(endToEnd: true)
        #expect(checks(encrypting.handle(Self.datagram(.keys, Array("bob".utf8), packet: 1), at: Self.start)) == ["bob"])
        #expect(encrypting.handle(Self.datagram(.keys, Array("Not A Name".utf8), packet: 2), at: Self.start).isEmpty)
        var plain = Self.connected()
        #expect(plain.handle(Self.datagram(.keys, Array("bob".utf8), packet: 1), at: Self.start).isEmpty)
    }

    /// The notice stored for a device that was away (KEYS_CHANGED): checked like the datagram,
    /// confirmed, never shown; a plaintext client only confirms it.
    @Test func aKeysChangedNoticeChecksTheConversationsWithItsUserAndIsNeverShown() {
        func notice(seq: UInt64) -> [UInt8] {
            var message = Simp_Message()
            message.seq = seq
            message.type = .keysChanged
            message.fromUser = "bob"
            message.toUser = "alice"
            message.messageID = "n\(seq)"
            return try! message.serializedBytes()
        }
        for endToEnd in [true, false] {
            var engine = Self.connected(endToEnd: endToEnd)
            let actions = engine.handle(Self.datagram(.data, notice(seq: 1)), at: Self.start)
            let checks = actions.compactMap { if case .checkKeys(let user) = $0 { user } else { nil } }
            #expect(checks == (endToEnd ? ["bob"] : []))
            #expect(Self.events(actions).isEmpty, "not shown: \(Self.events(actions))")
            #expect(Self.turnEnds(actions) == [.receipt])
            #expect(engine.confirmUpTo == 1)
        }
    }

    /// A deputy's duty (`KeysDeputies`) arms the one timer for when it falls due, and the tick
    /// then asks the driver to commit the hint; nothing before.
    @Test func aDeputyDutyAsksForItsCommitWhenDue() throws {
        var engine = Self.connected(endToEnd: true)
        let duty = KeysDeputies.Duty(peer: "carol", conversation: "#team", rank: 1)
        _ = engine.handle(.keysDeputies([duty]), at: Self.start)
        // Armed no later than the duty (here the keepalive's, earlier, stays).
        #expect(try #require(engine.timers.armed) <= Self.start.deadline + KeysDeputies.delay)
        func commits(_ actions: [ClientEngine.Action]) -> [String] {
            actions.compactMap { if case .commitKeys(let peer, let conversation) = $0 { "\(peer) \(conversation)" } else { nil } }
        }
        #expect(commits(engine.handle(.tick, at: Self.at(9_000))).isEmpty)
        #expect(commits(engine.handle(.tick, at: Self.at(10_000))) == ["carol #team"])
        #expect(commits(engine.handle(.tick, at: Self.at(20_000))).isEmpty)
    }

    /// A duty due while the session is lost waits for the next one: a stand-in needs the server.
    @Test func aDeputyDutyDueWhileDisconnectedWaitsForTheSession() {
        var engine = Self.connected(endToEnd: true)
        _ = engine.handle(.keysDeputies([KeysDeputies.Duty(peer: "carol", conversation: "#team", rank: 1)]), at: Self.start)
        _ = engine.handle(.controlClosed, at: Self.at(1_000))
        func commits(_ actions: [ClientEngine.Action]) -> Int {
            actions.filter { if case .commitKeys = $0 { true } else { false } }.count
        }
        #expect(commits(engine.handle(.tick, at: Self.at(10_000))) == 0)
        #expect(commits(engine.handle(.tick, at: Self.at(12_000))) == 0)
        let at = Self.at(13_000)
        _ = engine.handle(.reconnectDue(index: 0), at: at)
        _ = engine.handle(.sessionWanted(udpPort: 5000), at: at)
        _ = engine.handle(.sessionAnswered(.login, .success(Self.loginOk())), at: at)
        _ = engine.handle(.sessionAnswered(.connect(tokenPresented: false), .success(Simp_Envelope(.connected(Self.response())))), at: at)
        _ = engine.handle(.sessionOpened(Self.response()), at: at)
        _ = engine.handle(.control(Simp_Envelope(.bound(Self.udpBound))), at: at)
        #expect(commits(engine.handle(.tick, at: Self.at(13_010))) == 1)
    }

    @Test func datagramReadReceiptImpliesDelivery() {
        var engine = Self.connected()
        _ = engine.handle(.send([Self.outgoing("m1")]), at: Self.start)
        var accepted = Simp_Accepted()
        accepted.messageID = "m1"
        accepted.toUser = "bob"
        accepted.seq = 5
        _ = engine.handle(.control(Simp_Envelope(.accepted(accepted))), at: Self.start)
        var read = Simp_Message()
        read.seq = 1
        read.type = .read
        read.fromUser = "bob"
        read.toUser = "alice"
        read.messageID = "r1"
        read.content = "m1"
        let actions = engine.handle(Self.datagram(.data, try! read.serializedBytes()), at: Self.at(1))
        #expect(Self.events(actions) == [.delivered(id: "m1", to: "bob", seq: 5), .read(id: "m1", from: "alice", by: "bob")])
    }

    @Test func datagramLongMessagePartsAreShownWholeOrRecovered() {
        var engine = Self.connected()
        let first = LongText.PartID(base: "L", index: 1, count: 2).description
        let second = LongText.PartID(base: "L", index: 2, count: 2).description
        var part1 = Simp_Message()
        part1.seq = 1
        part1.type = .textPart
        part1.fromUser = "bob"
        part1.toUser = "alice"
        part1.messageID = first
        part1.content = "ab"
        var part2 = part1
        part2.seq = 2
        part2.messageID = second
        part2.content = "cd"
        #expect(Self.events(engine.handle(Self.datagram(.data, try! part1.serializedBytes(), packet: 1), at: Self.start)).isEmpty)
        let whole = Self.events(engine.handle(Self.datagram(.data, try! part2.serializedBytes(), packet: 2), at: Self.start))
        guard case .message(let message) = whole.first else {
            Issue.record("not whole: \(whole)")
            return
        }
        #expect(message.id == "L" && message.text == "abcd" && message.parts == 2)

        // The last part of a message this client holds nothing of: its earlier parts are read back.
        var restarted = Self.connected()
        let actions = restarted.handle(Self.datagram(.data, try! { var p = part2; p.seq = 1; return p }().serializedBytes()), at: Self.start)
        guard case .recoverParts(let part, _, let peer) = actions.first(where: { if case .recoverParts = $0 { true } else { false } }) else {
            Issue.record("no recovery: \(actions)")
            return
        }
        #expect(part.index == 2 && peer == "bob")
        let shown = Self.events(restarted.handle(.partsRecovered([IncomingMessage(part1)]), at: Self.at(1)))
        #expect(shown.count == 1)
    }

    @Test func tickResendsWhatTheServerDidNotAccept() {
        var engine = Self.connected()
        _ = engine.handle(.send([Self.outgoing("m1")]), at: Self.start)
        _ = engine.handle(.turnEnded(.flush), at: Self.start)
        // Ticks every 10 ms, as armed (a tick much later than that is the client's own stall,
        // which does not count against the server): the resend falls due after the RTO.
        var ms: Int64 = 0
        var actions: [ClientEngine.Action] = []
        while ms < 2000, Self.turnEnds(actions).isEmpty {
            ms += 10
            actions = engine.handle(.tick, at: Self.at(ms))
        }
        #expect(Self.turnEnds(actions) == [.flush])
        #expect(ms >= 500 && ms < 600)
        #expect(engine.timers.armed != nil, "the timer is armed again")
        #expect(Self.datagrams(engine.handle(.turnEnded(.flush), at: Self.at(ms))).count == 1)
    }

    /// The driver's whole part in the timer: schedule each `scheduleTick` and feed its firing,
    /// with the time it fired at. Alone that keeps a bound session's keepalives going, with
    /// few tasks ever waiting; after a disconnect the tasks left fire into nothing.
    @Test func theTickTasksAloneKeepTheSessionAliveAndEndWithADisconnect() {
        var engine = Self.connected()
        var waiting = engine.tickSchedule.scheduled
        var keepalives: [NIODeadline] = []
        func fireEarliest() -> [ClientEngine.Action] {
            let deadline = waiting.min()!
            waiting.remove(at: waiting.firstIndex(of: deadline)!)
            let at = Moment(deadline: deadline, millis: Self.start.millis + (deadline - Self.start.deadline).nanoseconds / 1_000_000)
            let actions = engine.handle(.tickTaskFired(scheduledFor: deadline), at: at)
            waiting += actions.compactMap { if case .scheduleTick(let next) = $0 { next } else { nil } }
            keepalives += Self.datagrams(actions).filter { $0.0.kind == .keepalive }.map { _ in deadline }
            return actions
        }
        #expect(!waiting.isEmpty, "a bound session has a task scheduled")
        while let next = waiting.min(), next < Self.start.deadline + .seconds(90) {
            _ = fireEarliest()
            #expect(waiting.count <= 2)
        }
        #expect(keepalives.count >= 3, "keepalives every 25 s over 90 s: \(keepalives)")
        _ = engine.handle(.disconnect, at: Self.at(90_000))
        while !waiting.isEmpty { #expect(fireEarliest().isEmpty, "a task left after the disconnect does nothing") }
    }

    @Test func tickSendsAKeepaliveWhenDue() {
        var engine = Self.connected()
        let sent = Self.datagrams(engine.handle(.tick, at: Self.at(26_000)))
        #expect(sent.map { $0.0.kind } == [.keepalive])
    }

    @Test func releaseDueFlushesAgain() {
        var engine = Self.connected()
        #expect(Self.turnEnds(engine.handle(.releaseDue, at: Self.start)) == [.flush])
        #expect(Self.turnEnds(engine.handle(.releaseDue, at: Self.start)).isEmpty, "once per turn")
    }

    @Test func turnEndedFlushesOnceAndConfirmsTheDeliveredMark() {
        var engine = Self.connected()
        let flushed = engine.handle(.turnEnded(.flush), at: Self.start)
        guard case .flushDatagrams = flushed.last else {
            Issue.record("no flush")
            return
        }
        #expect(Self.controls(engine.handle(.turnEnded(.receipt), at: Self.start)).isEmpty, "no receipt was asked for")
        _ = engine.handle(Self.datagram(.data, Self.message(seq: 1)), at: Self.start)
        guard case .receipt(let receipt) = Self.controls(engine.handle(.turnEnded(.receipt), at: Self.start)).first else {
            Issue.record("no receipt")
            return
        }
        #expect(receipt.upToSeq == 1)
    }

    /// The race `simp listen --mark-read` lost about one run in six: the application marks a
    /// message read the moment it is handed over, and its request was written before the
    /// turn's end sent the receipt, so the server (which tells only what the session
    /// confirmed) left the mark out. The receipt now goes first, on the same stream, once.
    @Test func aReadMarkLeavesAfterTheReceiptOfWhatItMarks() {
        for store in [false, true] {
            var engine = Self.connected()
            if store { _ = engine.handle(.storeOpened(ClientStore.Saved(device: "x", savedUpTo: 0, pending: [], accepted: [])), at: Self.start) }
            var shown = engine.handle(Self.datagram(.data, Self.message(seq: 1)), at: Self.at(1))
            if store { shown = engine.handle(.saved(.success(())), at: Self.at(2)) }
            #expect(Self.events(shown).count == 1 && Self.turnEnds(shown) == [.receipt], "shown, its receipt due at the turn's end")
            // The application's mark is written after the actions of its `requestSent`.
            let marking = engine.handle(.requestSent(7, marksRead: true), at: Self.at(3))
            guard case .receipt(let receipt)? = Self.controls(marking).first else {
                Issue.record("the mark would leave before the receipt (store: \(store)): \(marking)")
                continue
            }
            #expect(receipt.upToSeq == 1)
            #expect(Self.controls(engine.handle(.turnEnded(.receipt), at: Self.at(3))).isEmpty, "sent once")
            // Another request, or a mark with no receipt due, sends nothing ahead of itself.
            _ = engine.handle(Self.datagram(.data, Self.message(seq: 2, id: "m2"), packet: 2), at: Self.at(4))
            if store { _ = engine.handle(.saved(.success(())), at: Self.at(4)) }
            #expect(Self.controls(engine.handle(.requestSent(8), at: Self.at(5))).isEmpty)
            #expect(Self.controls(engine.handle(.turnEnded(.receipt), at: Self.at(5))).count == 1)
            #expect(Self.controls(engine.handle(.requestSent(9, marksRead: true), at: Self.at(6))).isEmpty)
        }
    }

    @Test func savedShowsAndConfirmsOnlyWhatIsOnDisk() {
        var engine = Self.connected()
        _ = engine.handle(.storeOpened(ClientStore.Saved(device: "x", savedUpTo: 0, pending: [], accepted: [])), at: Self.start)
        let received = engine.handle(Self.datagram(.data, Self.message(seq: 1)), at: Self.start)
        #expect(Self.events(received).isEmpty)
        #expect(received.contains { if case .saveReceived(let batch) = $0 { batch.upTo == 1 } else { false } })
        let written = engine.handle(.saved(.success(())), at: Self.at(1))
        #expect(Self.events(written).count == 1 && Self.turnEnds(written) == [.receipt])
        #expect(engine.confirmUpTo == 1)

        _ = engine.handle(Self.datagram(.data, Self.message(seq: 2, id: "m2"), packet: 2), at: Self.at(2))
        let failed = engine.handle(.saved(.failure(StoreWriteError(path: "/d", DiskFull()))), at: Self.at(3))
        #expect(Self.events(failed).count == 1 && engine.confirmUpTo == 1 && engine.sequencer.deliveredUpTo == 1)
    }

    /// Messages that could not be kept are asked for again (a receipt's `missing`, as a gap):
    /// on the stream path nothing else brings them. A resend of the first 64 that fails too
    /// keeps the rest expected: once those 64 are kept, the other 36 are asked for.
    @Test func messagesThatCouldNotBeKeptAreAskedForAgainAllOfThem() {
        var engine = Self.connected()
        _ = engine.handle(.storeOpened(ClientStore.Saved(device: "x", savedUpTo: 0, pending: [], accepted: [])), at: Self.start)
        for seq in UInt64(1)...100 {
            _ = engine.handle(Self.datagram(.data, Self.message(seq: seq, id: "m\(seq)"), packet: seq), at: Self.start)
        }
        _ = engine.handle(.saved(.failure(StoreWriteError(path: "/d", DiskFull()))), at: Self.at(1))
        func asked(at ms: Int64) -> [UInt64] {
            Self.controls(engine.handle(.tick, at: Self.at(ms))).flatMap { body -> [UInt64] in
                if case .receipt(let receipt) = body { receipt.missing } else { [] }
            }
        }
        #expect(asked(at: 500).isEmpty, "not at once: the disk is likely still full")
        #expect(asked(at: 1001) == Array(1...64))
        #expect(asked(at: 2000).isEmpty, "the next ask waits longer")
        // The server resends those 64; their write fails again.
        for seq in UInt64(1)...64 {
            _ = engine.handle(Self.datagram(.data, Self.message(seq: seq, id: "m\(seq)"), packet: 100 + seq), at: Self.at(2100))
        }
        _ = engine.handle(.saved(.failure(StoreWriteError(path: "/d", DiskFull()))), at: Self.at(2200))
        #expect(asked(at: 4200) == Array(1...64))
        for seq in UInt64(1)...64 {
            _ = engine.handle(Self.datagram(.data, Self.message(seq: seq, id: "m\(seq)"), packet: 200 + seq), at: Self.at(4300))
        }
        // The first one's write, then the 63 that came meanwhile.
        _ = engine.handle(.saved(.success(())), at: Self.at(4400))
        _ = engine.handle(.saved(.success(())), at: Self.at(4400))
        #expect(engine.confirmUpTo == 64)
        #expect(engine.timers.armed.map { $0 <= Self.at(5400).deadline } == true, "a tick a second after the write, whatever was armed")
        #expect(asked(at: 5400) == Array(65...100), "the rest is asked for, a second after a write was kept")
    }

    @Test func outboxWrittenReportsOnlyAFailure() {
        var engine = Self.connected()
        let write = ClientEngine.OutboxWrite(change: .remove(id: "m1"), cause: .delivered)
        #expect(engine.handle(.outboxWritten(write, .success(())), at: Self.start).isEmpty)
        let events = Self.events(engine.handle(.outboxWritten(write, .failure(StoreWriteError(path: "/d", DiskFull()))), at: Self.start))
        #expect(events.count == 1)
        guard case .error(let reason, _) = events.first else {
            Issue.record("not an error: \(events)")
            return
        }
        #expect(reason.hasPrefix("cannot remove delivered message m1 from the outbox in /d: "))
        #expect(reason.hasSuffix("; a restart with this data directory reports it delivered again"))
    }

    @Test func partsRecoveredCompleteAMessage() {
        var engine = Self.connected()
        let parts = (1...2).map { index in
            var part = Simp_Message()
            part.type = .textPart
            part.seq = UInt64(index)
            part.fromUser = "bob"
            part.toUser = "alice"
            part.messageID = LongText.PartID(base: "L", index: index, count: 2).description
            part.content = index == 1 ? "ab" : "cd"
            return IncomingMessage(part)
        }
        let shown = Self.events(engine.handle(.partsRecovered(parts), at: Self.start))
        guard case .message(let whole) = shown.first else {
            Issue.record("not shown: \(shown)")
            return
        }
        #expect(whole.text == "abcd")
    }

    // MARK: made off the loop

    @Test func aLongTextGoesInPartsUnderOneRandomID() throws {
        let text = String(repeating: "x", count: LongText.partBytes + 1)
        let made = try ClientEngine.text(text, to: "bob", limit: 65_536, at: 5, random: { 77 })
        #expect(made.id == "77" && made.items.count > 1 && made.items.allSatisfy { $0.message.time == 5 })
        #expect(throws: ClientError.self) { try ClientEngine.text(text, to: "bob", limit: 10, at: 5, random: { 77 }) }
        #expect(throws: ClientError.self) { try ClientEngine.text("hi", to: "not a user!", limit: 10, at: 5, random: { 77 }) }
    }
}
