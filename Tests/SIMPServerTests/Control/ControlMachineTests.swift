import NIOCore
@testable import SIMPCore
import Testing
@testable import SIMPServer

/// Every `ControlMachine.Input` case, in and out: the input with an injected time, the actions
/// it leads to. No channel, no clock, no Redis: the node's `Admission` is a real one with small
/// limits, since the machine consults it in place.
struct ControlMachineTests {
    /// One connection's machine and the time, moved by hand.
    struct Connection {
        var machine: ControlMachine
        var millis: Int64 = 0
        let node: ControlMachine.Node

        init(_ node: ControlMachine.Node, ip: String? = "10.0.0.1") {
            self.node = node
            machine = ControlMachine(node)
            if let ip { _ = machine.handle(.opened(ip: ip), at: at) }
        }

        var at: Moment { Moment(deadline: .uptimeNanoseconds(UInt64(1_000_000_000 + millis * 1_000_000)), millis: 1_700_000_000_000 + millis) }

        mutating func raw(_ input: ControlMachine.Input) -> [ControlAction] {
            machine.handle(input, at: at)
        }

        /// The actions, each as a short line (`ControlMachineTests.line`).
        mutating func on(_ input: ControlMachine.Input) -> [String] {
            raw(input).map(ControlMachineTests.line)
        }

        mutating func frame(_ body: Simp_Envelope.OneOf_Body, id: UInt64 = 1) -> [String] {
            on(.frame(Simp_Envelope(requestID: id, body)))
        }

        /// Logs in as `user` on `device`: the request, the accounts' token, the login table.
        mutating func logIn(_ user: String = "alice", device: String = "phone", id: UInt64 = 1) {
            var request = Simp_LoginRequest()
            request.user = user
            request.password = "secret"
            request.device = device
            _ = frame(.login(request), id: id)
            let login = ControlMachine.Login(id: id, user: user, device: device)
            let actions = raw(.loginIssued(login, .success(ControlMachineTests.grant(user, device: device))))
            guard case .joinLogins(let join)? = actions.first else { return }
            _ = raw(.loginsJoined(join, true))
        }

        /// Opens a session (`session`) with a token of `user`'s `device`.
        mutating func connect(_ user: String = "alice", device: String = "phone", session: UInt64 = 7, id: UInt64 = 2) {
            _ = frame(.connect(ControlMachineTests.connectRequest(device)), id: id)
            let connect = ControlMachine.Connect(id: id, device: device, lastSeq: 3, bundles: true, early: false)
            let opening = raw(.tokenVerified(connect, .success(ControlMachineTests.grant(user, device: device))))
            guard case .run(.openSession(_, let request))? = opening.first else { return }
            let joining = raw(.sessionOpened(id: id, request, .success(ControlMachineTests.response(session, device: device))))
            guard case .joinLogins(let join)? = joining.first else { return }
            _ = raw(.loginsJoined(join, true))
        }
    }

    static func node(rate: Int = 2_000, burst: Int = 4_000, connectionsPerIP: Int = 4, sessionsPerUser: Int = 4) -> ControlMachine.Node {
        var limits = ServerLimits()
        limits.connectionsPerIP = connectionsPerIP
        limits.sessionsPerUser = sessionsPerUser
        let admission = Admission(limits: limits, metrics: ServerMetrics())
        return ControlMachine.Node(admission: admission, requests: RequestGate.Settings(rate: rate, burst: burst, maxOutstanding: 2),
                                   loginDeadline: .seconds(30), maxFrameLength: 65_536, anonymousFrameLength: 4_096,
                                   unreadGrace: .seconds(10), maxGroupMembers: 100)
    }

    static func token(_ byte: UInt8) -> RevocableToken {
        RevocableToken(id: TokenID(mac: [UInt8](repeating: byte, count: 32))!, expiresAt: 99)
    }

    static func grant(_ user: String, device: String = "phone", revocable: RevocableToken = token(1)) -> ControlMachine.Grant {
        ControlMachine.Grant(user: user, device: device, token: "t-\(user)", expiresAt: 99, issued: 42, revocable: revocable)
    }

    static func connectRequest(_ device: String) -> Simp_ConnectRequest {
        var request = Simp_ConnectRequest()
        request.token = "t"
        request.device = device
        request.lastSeq = 3
        request.bundles = true
        return request
    }

    static func response(_ session: UInt64, device: String = "phone") -> Simp_ConnectResponse {
        var response = Simp_ConnectResponse()
        response.sessionID = session
        response.device = device
        return response
    }

    /// An action as a line: what it does and to what, enough to tell the cases apart.
    static func line(_ action: ControlAction) -> String {
        switch action {
        case .send(let envelope): "send \(body(envelope))"
        case .sendThenClose(let envelope): "sendThenClose \(body(envelope))"
        case .close: "close"
        case .log: "log"
        case .setFrameLimit(let limit): "frameLimit \(limit)"
        case .setReading(let read): "reading \(read)"
        case .pauseFraming: "pause"
        case .resumeFraming: "resume"
        case .schedule(let timer, _): "schedule \(timer)"
        case .cancel(let timer): "cancel \(timer)"
        case .exceeded(let limit): "exceeded \(limit.rawValue)"
        case .keepalive: "keepalive"
        case .joinLogins(let join): "join \(join.user) \(join.device)"
        case .leaveLogins(let user): "leave \(user)"
        case .endOtherLogins(let user, let why): "endOtherLogins \(user) \(why.rawValue)"
        case .endDevice(let revocation): "endDevice \(revocation.user) \(revocation.device) by \(revocation.by)"
        case .router(let call): "router \(name(call))"
        case .run(let work): "run \(name(work))"
        }
    }

    static func body(_ envelope: Simp_Envelope) -> String {
        if case .error(let error)? = envelope.body { return "#\(envelope.requestID) error \(error.code.name)" }
        return "#\(envelope.requestID) \(envelope.body.map(name) ?? "nothing")"
    }

    static func name(_ value: Any) -> String {
        String(String(describing: value).prefix { $0 != "(" })
    }

    static func works(_ actions: [ControlAction]) -> [ControlWork] {
        actions.compactMap { if case .run(let work) = $0 { work } else { nil } }
    }

    // MARK: the connection

    @Test func anOpenedConnectionMustLogInByTheDeadline() {
        var machine = ControlMachine(Self.node())
        #expect(machine.handle(.opened(ip: "10.0.0.1"), at: Moment(deadline: .uptimeNanoseconds(1), millis: 1)).map(Self.line)
            == ["schedule loginDeadline"])
    }

    @Test func connectionsPastTheLimitOfAnIPAreRefusedAndClosed() {
        let node = Self.node(connectionsPerIP: 1)
        var first = Connection(node)
        var second = Connection(node, ip: nil)
        #expect(second.on(.opened(ip: "10.0.0.1")) == ["schedule loginDeadline", "sendThenClose #0 error too_many_connections"])
        _ = first.on(.closed)
        var third = Connection(node, ip: nil)
        #expect(third.on(.opened(ip: "10.0.0.1")) == ["schedule loginDeadline"], "the closed connection's place is free")
    }

    @Test func aPingIsAnsweredAtOnceAndAPongCounted() {
        var connection = Connection(Self.node())
        var ping = Simp_Ping()
        ping.nonce = 5
        let actions = connection.raw(.frame(Simp_Envelope(requestID: 3, .ping(ping))))
        #expect(actions.map(Self.line) == ["keepalive", "send #3 pong"])
        if case .send(let envelope) = actions[1], case .pong(let pong)? = envelope.body { #expect(pong.nonce == 5) }
        #expect(connection.frame(.pong(Simp_Pong())) == ["keepalive"])
    }

    @Test func requestsNeedALoginOrASessionFirst() {
        var connection = Connection(Self.node())
        #expect(connection.frame(.devices(Simp_DevicesRequest())) == ["send #1 error not_authenticated"])
        #expect(connection.frame(.receipt(Simp_Receipt())) == ["send #1 error not_connected"])
        #expect(connection.frame(.query(Simp_DeliveryQuery())) == ["send #1 error not_connected"])
        connection.logIn()
        #expect(connection.frame(.receipt(Simp_Receipt())) == ["send #1 error not_connected"], "logged in, not connected")
        #expect(connection.frame(.devices(Simp_DevicesRequest())) == ["run devices"])
    }

    @Test func whatAClientDoesNotSendIsRefused() {
        var connection = Connection(Self.node())
        #expect(connection.on(.frame(Simp_Envelope())) == ["send #0 error bad_request"])
        #expect(connection.frame(.connected(Simp_ConnectResponse())) == ["send #1 error bad_request"])
    }

    @Test func badNamesAreRefusedBeforeAnyWork() {
        var connection = Connection(Self.node())
        var login = Simp_LoginRequest()
        login.user = "alice"
        login.device = "Not A Device!"
        #expect(connection.frame(.login(login)) == ["send #1 error invalid_name"])
        connection.logIn()
        var history = Simp_HistoryRequest()
        history.peer = "no such name!"
        #expect(connection.frame(.history(history)) == ["send #1 error bad_request"])
        history.peer = "#friends"
        history.limit = 5_000
        let actions = connection.raw(.frame(Simp_Envelope(requestID: 1, .history(history))))
        guard case .groupHistory(_, "alice", "friends", "#friends", _, 1_000)? = Self.works(actions).first else {
            Issue.record("a group's history, capped at 1000: \(actions.map(Self.line))")
            return
        }
    }

    @Test func sessionRequestsGoToTheRouterOnceConnected() {
        var connection = Connection(Self.node())
        connection.connect(session: 7)
        #expect(connection.frame(.receipt(Simp_Receipt())) == ["router receipt"])
        #expect(connection.frame(.withdraw(Simp_Withdraw())) == ["router withdraw"])
        #expect(connection.frame(.pathResponse(Simp_PathResponse())) == ["router pathResponse"])
        let query = connection.raw(.frame(Simp_Envelope(requestID: 4, .query(Simp_DeliveryQuery()))))
        guard case .query(7, _)? = Self.works(query).first else {
            Issue.record("the session's query: \(query.map(Self.line))")
            return
        }
    }

    @Test func aRequestPastTheRateIsHeldWithTheReadingUntilTheRateAllowsIt() {
        // A login costs 16 units: the bucket holds 16, and refills 10 a second.
        var connection = Connection(Self.node(rate: 10, burst: 16))
        var request = Simp_RegisterRequest()
        request.user = "alice"
        #expect(connection.frame(.register(request)) == ["run register"])
        #expect(connection.frame(.pong(Simp_Pong())) == ["pause", "exceeded control_requests", "reading false", "schedule gate"])
        connection.millis += 50
        #expect(connection.on(.due(.gate)) == ["schedule gate"], "not yet: 0.5 of a unit")
        connection.millis += 100
        #expect(connection.on(.due(.gate)) == ["keepalive", "resume", "reading true"])
    }

    @Test func twoRequestsInProgressHoldTheThirdUntilAnAnswer() {
        var connection = Connection(Self.node())
        connection.logIn()
        #expect(connection.frame(.devices(Simp_DevicesRequest()), id: 2) == ["run devices"])
        #expect(connection.frame(.presence(Simp_PresenceRequest()), id: 3) == ["run presenceCircle"])
        #expect(connection.frame(.pong(Simp_Pong())) == ["pause", "reading false"], "waits for an answer, not for the rate")
        #expect(connection.on(.answered(id: 2, .success(Simp_Envelope(requestID: 2, .ok(Simp_Ok())))))
            == ["send #2 ok", "keepalive", "resume", "reading true"])
    }

    @Test func aPeerThatStopsReadingIsNotReadAndClosedAfterTheGrace() {
        var connection = Connection(Self.node())
        #expect(connection.on(.writabilityChanged(false)) == ["reading false", "schedule unread"])
        #expect(connection.on(.writabilityChanged(false)) == [], "one timer")
        #expect(connection.on(.writabilityChanged(true)) == ["reading true", "cancel unread"])
        _ = connection.on(.writabilityChanged(false))
        #expect(connection.on(.due(.unread)) == ["exceeded output_backlog", "close"])
    }

    @Test func theHeartbeatPingsWithTheNonceGivenAndGivesASilentPeerUp() {
        var connection = Connection(Self.node())
        let actions = connection.raw(.heartbeatDue(.write, nonce: 77))
        guard case .send(let envelope)? = actions.first, case .ping(let ping)? = envelope.body else {
            Issue.record("a ping: \(actions.map(Self.line))")
            return
        }
        #expect(ping.nonce == 77 && actions.count == 1)
        #expect(connection.on(.heartbeatDue(.read, nonce: 0)) == ["log", "close"])
        #expect(connection.on(.heartbeatDue(.all, nonce: 0)) == [])
    }

    @Test func framingFailuresAreCountedByKind() {
        var connection = Connection(Self.node())
        #expect(connection.on(.framingFailed(.tooLarge(length: 9_000, limit: 4_096))) == ["exceeded frame_size"])
        #expect(connection.on(.framingFailed(.incomplete(received: 3, within: .seconds(5)))) == ["exceeded frame_deadline"])
    }

    @Test func theLoginDeadlineClosesOnlyAnAnonymousConnection() {
        var anonymous = Connection(Self.node())
        #expect(anonymous.on(.due(.loginDeadline)) == ["exceeded login_deadline", "sendThenClose #0 error not_authenticated"])
        var loggedIn = Connection(Self.node())
        loggedIn.logIn()
        #expect(loggedIn.on(.due(.loginDeadline)) == [])
    }

    @Test func aClosedConnectionEndsItsSessionAndFreesItsPlaces() {
        let node = Self.node(connectionsPerIP: 1, sessionsPerUser: 1)
        var connection = Connection(node)
        connection.connect(session: 7)
        #expect(connection.on(.closed) == ["cancel unread", "cancel gate", "cancel loginDeadline", "router closeSession", "leave alice"])
        #expect(connection.machine.phase == .closed)
        var next = Connection(node)
        next.logIn()
        #expect(next.machine.phase == .authenticated(user: "alice"), "the IP's and the user's places are free again")
    }

    // MARK: answers

    @Test func theFirstAnswerAfterALoginLiftsTheFrameLimit() {
        var connection = Connection(Self.node())
        var request = Simp_LoginRequest()
        request.user = "alice"
        _ = connection.frame(.login(request))
        let login = ControlMachine.Login(id: 1, user: "alice", device: "default")
        let joining = connection.raw(.loginIssued(login, .success(Self.grant("alice", device: "default"))))
        #expect(joining.map(Self.line) == ["join alice default"])
        guard case .joinLogins(let join)? = joining.first else { return }
        #expect(connection.on(.loginsJoined(join, true)) == ["cancel loginDeadline", "frameLimit 65536", "send #1 loginOk"])
        #expect(connection.machine.phase == .authenticated(user: "alice") && connection.machine.device == "default")
        #expect(connection.machine.tokens == [Self.token(1)])
    }

    @Test func anAnswersFailureIsAnErrorForItsRequest() {
        var connection = Connection(Self.node())
        var request = Simp_RegisterRequest()
        request.user = "alice"
        _ = connection.frame(.register(request), id: 9)
        #expect(connection.on(.answered(id: 9, .failure(ServerError(.userExists, "taken")))) == ["send #9 error user_exists"])
    }

    @Test func aQueryAnsweredFreesItsPlaceForTheNextRequest() {
        var connection = Connection(Self.node())
        connection.connect()
        _ = connection.frame(.query(Simp_DeliveryQuery()), id: 3)
        _ = connection.frame(.query(Simp_DeliveryQuery()), id: 4)
        #expect(connection.frame(.pong(Simp_Pong())) == ["pause", "reading false"])
        #expect(connection.on(.queryAnswered) == ["keepalive", "resume", "reading true"], "nothing written for the query itself")
    }

    @Test func aFailedLoginIsAnsweredAndTakesNoSlot() {
        let node = Self.node(sessionsPerUser: 1)
        var connection = Connection(node)
        var request = Simp_LoginRequest()
        request.user = "alice"
        _ = connection.frame(.login(request))
        let login = ControlMachine.Login(id: 1, user: "alice", device: "default")
        #expect(connection.on(.loginIssued(login, .failure(ServerError(.invalidCredentials, "no")))) == ["send #1 error invalid_credentials"])
        #expect(connection.machine.slot == nil)
        var other = Connection(node)
        other.logIn()
        #expect(other.machine.phase == .authenticated(user: "alice"))
    }

    @Test func aLoginPastTheUsersConnectionsIsRefused() {
        let node = Self.node(sessionsPerUser: 1)
        var first = Connection(node)
        first.logIn()
        var second = Connection(node)
        var request = Simp_LoginRequest()
        request.user = "alice"
        _ = second.frame(.login(request))
        let login = ControlMachine.Login(id: 1, user: "alice", device: "default")
        #expect(second.on(.loginIssued(login, .success(Self.grant("alice")))) == ["send #1 error too_many_sessions"])
    }

    @Test func aSecondLoginOfTheSameUserKeepsItsTokenWithoutJoiningAgain() {
        var connection = Connection(Self.node())
        connection.logIn()
        var request = Simp_LoginRequest()
        request.user = "alice"
        _ = connection.frame(.login(request), id: 5)
        let login = ControlMachine.Login(id: 5, user: "alice", device: "default")
        #expect(connection.on(.loginIssued(login, .success(Self.grant("alice", revocable: Self.token(2))))) == ["send #5 loginOk"])
        #expect(connection.machine.tokens == [Self.token(1), Self.token(2)])
        request.user = "bob"
        #expect(connection.frame(.login(request), id: 6) == ["send #6 error bad_request"], "one user per connection")
    }

    @Test func aTokenOpensASessionOnlyForItsDeviceAndTheUserLoggedIn() {
        var connection = Connection(Self.node())
        connection.logIn("alice")
        let connect = ControlMachine.Connect(id: 2, device: "phone", lastSeq: 3, bundles: true, early: false)
        _ = connection.frame(.connect(Self.connectRequest("phone")), id: 2)
        #expect(connection.on(.tokenVerified(connect, .success(Self.grant("alice", device: "laptop")))) == ["send #2 error invalid_token"])
        _ = connection.frame(.connect(Self.connectRequest("phone")), id: 2)
        #expect(connection.on(.tokenVerified(connect, .success(Self.grant("bob")))) == ["send #2 error invalid_token"])
        _ = connection.frame(.connect(Self.connectRequest("phone")), id: 2)
        let opening = connection.raw(.tokenVerified(connect, .success(Self.grant("alice"))))
        guard case .run(.openSession(2, let request))? = opening.first else {
            Issue.record("a session asked for: \(opening.map(Self.line))")
            return
        }
        #expect(request.user == "alice" && request.device == "phone" && request.tokenIssuedMillis == 42 && request.lastSeq == 3 && request.takesBundles)
    }

    @Test func aLoginAndAConnectCarryTheirRequestsTime() {
        var connection = Connection(Self.node())
        connection.millis = 250
        var request = Simp_LoginRequest()
        request.user = "alice"
        let login = connection.raw(.frame(Simp_Envelope(requestID: 1, .login(request))))
        guard case .login(_, _, _, let loginMillis)? = Self.works(login).first else {
            Issue.record("a login asked for: \(login.map(Self.line))")
            return
        }
        connection.millis = 900
        let connect = connection.raw(.frame(Simp_Envelope(requestID: 2, .connect(Self.connectRequest("phone")))))
        guard case .verifyToken(_, _, let connectMillis)? = Self.works(connect).first else {
            Issue.record("a token check asked for: \(connect.map(Self.line))")
            return
        }
        #expect(loginMillis == 1_700_000_000_250 && connectMillis == 1_700_000_000_900)
    }

    @Test func oneConnectAtATime() {
        var connection = Connection(Self.node())
        #expect(connection.frame(.connect(Self.connectRequest("phone")), id: 2) == ["run verifyToken"])
        #expect(connection.frame(.connect(Self.connectRequest("phone")), id: 3) == ["send #3 error bad_request"])
        let connect = ControlMachine.Connect(id: 2, device: "phone", lastSeq: 3, bundles: true, early: false)
        _ = connection.on(.tokenVerified(connect, .failure(ServerError(.invalidToken, "expired"))))
        #expect(connection.frame(.connect(Self.connectRequest("phone")), id: 4) == ["run verifyToken"], "the failed one ended")
    }

    @Test func aSessionOpenedForAConnectionThatClosedIsClosedAgain() {
        var connection = Connection(Self.node())
        _ = connection.frame(.connect(Self.connectRequest("phone")), id: 2)
        let request = DeliveryEngine.SessionRequest(user: "alice", device: "phone", tokenIssuedMillis: 42, lastSeq: 3)
        _ = connection.on(.closed)
        #expect(connection.on(.sessionOpened(id: 2, request, .success(Self.response(7)))) == ["router closeSession", "send #2 error not_connected"])
    }

    @Test func anOpenedSessionJoinsTheLoginsThenIsAnswered() {
        var connection = Connection(Self.node())
        _ = connection.frame(.connect(Self.connectRequest("phone")), id: 2)
        let request = DeliveryEngine.SessionRequest(user: "alice", device: "phone", tokenIssuedMillis: 42, lastSeq: 3)
        let joining = connection.raw(.sessionOpened(id: 2, request, .success(Self.response(7))))
        #expect(joining.map(Self.line) == ["join alice phone"])
        guard case .joinLogins(let join)? = joining.first else { return }
        #expect(join.tokenIssued == 42)
        #expect(connection.on(.loginsJoined(join, true)) == ["cancel loginDeadline", "frameLimit 65536", "send #2 connected"])
        #expect(connection.machine.phase == .connected(user: "alice", session: 7))
        #expect(connection.frame(.connect(Self.connectRequest("phone")), id: 3) == ["send #3 error bad_request"], "already connected")
    }

    @Test func aSessionRefusedByTheStoreIsAnError() {
        var connection = Connection(Self.node())
        _ = connection.frame(.connect(Self.connectRequest("phone")), id: 2)
        let request = DeliveryEngine.SessionRequest(user: "alice", device: "phone", tokenIssuedMillis: 42, lastSeq: 3)
        #expect(connection.on(.sessionOpened(id: 2, request, .failure(ServerError(.deviceRevoked, "gone")))) == ["send #2 error device_revoked"])
    }

    @Test func aRevocationHeardBeforeTheJoinWins() {
        var login = Connection(Self.node())
        var request = Simp_LoginRequest()
        request.user = "alice"
        _ = login.frame(.login(request))
        let asked = ControlMachine.Login(id: 1, user: "alice", device: "default")
        let join = ControlMachine.Join(user: "alice", device: "default", tokenIssued: 42, purpose: .login(asked, Self.grant("alice")))
        #expect(login.on(.loginsJoined(join, false)) == ["send #1 error device_revoked"])
        #expect(login.machine.slot == nil && login.machine.phase == .anonymous)

        var connect = Connection(Self.node())
        _ = connect.frame(.connect(Self.connectRequest("phone")), id: 2)
        let session = ControlMachine.Join(user: "alice", device: "phone", tokenIssued: 42, purpose: .connect(id: 2, Self.response(7)))
        #expect(connect.on(.loginsJoined(session, false)) == ["router closeSession", "send #2 error device_revoked"])
    }

    @Test func aJoinThatLandsAfterTheCloseIsUndone() {
        var connection = Connection(Self.node())
        _ = connection.frame(.connect(Self.connectRequest("phone")), id: 2)
        _ = connection.on(.closed)
        let session = ControlMachine.Join(user: "alice", device: "phone", tokenIssued: 42, purpose: .connect(id: 2, Self.response(7)))
        #expect(connection.on(.loginsJoined(session, true)) == ["leave alice", "router closeSession", "send #2 error not_connected"])
    }

    @Test func aNewPasswordEndsTheOtherLoginsAndReplacesTheTokens() {
        var connection = Connection(Self.node())
        connection.logIn()
        var request = Simp_ChangePassword()
        request.oldPassword = "a"
        request.newPassword = "b"
        let asked = connection.raw(.frame(Simp_Envelope(requestID: 4, .changePassword(request))))
        guard case .changePassword(4, "alice", "a", "b", "phone", "10.0.0.1", let millis)? = Self.works(asked).first else {
            Issue.record("the change asked for: \(asked.map(Self.line))")
            return
        }
        #expect(millis == connection.at.millis, "the accounts stamp the new token with the request's time")
        #expect(connection.on(.passwordChanged(id: 4, user: "alice", .success(Self.grant("alice", revocable: Self.token(3)))))
            == ["endOtherLogins alice password", "send #4 loginOk"])
        #expect(connection.machine.tokens == [Self.token(3)])
        _ = connection.frame(.changePassword(request), id: 5)
        #expect(connection.on(.passwordChanged(id: 5, user: "alice", .failure(ServerError(.invalidCredentials, "no"))))
            == ["send #5 error invalid_credentials"])
    }

    @Test func aPresenceReadIsChargedOnceItsCircleIsKnown() {
        // 40 units a second, bursts of 40: the circle's 41 units leave a debt, and a ping waits.
        var connection = Connection(Self.node(rate: 40, burst: 40))
        connection.logIn()
        connection.millis += 1_000
        #expect(connection.frame(.presence(Simp_PresenceRequest()), id: 3) == ["run presenceCircle"])
        let circle = (users: Array(repeating: "bob", count: 36), groups: 5)
        let asked = connection.raw(.presenceCircleRead(id: 3, user: "alice", .success(circle)))
        guard case .presence(3, "alice", let users, let millis)? = Self.works(asked).first, asked.count == 1 else {
            Issue.record("the presence read: \(asked.map(Self.line))")
            return
        }
        #expect(users.count == 36 && millis == connection.at.millis)
        #expect(connection.frame(.pong(Simp_Pong())) == ["pause", "exceeded control_requests", "reading false", "schedule gate"])
        #expect(connection.on(.answered(id: 3, .success(Simp_Envelope(requestID: 3, .presenceAnswer(Simp_PresenceAnswer())))))
            == ["send #3 presenceAnswer"], "the ping still waits for the rate")
    }

    @Test func aPresenceCircleThatCannotBeReadIsAnError() {
        var connection = Connection(Self.node())
        connection.logIn()
        _ = connection.frame(.presence(Simp_PresenceRequest()), id: 4)
        #expect(connection.on(.presenceCircleRead(id: 4, user: "alice", .failure(ServerError(.storeUnavailable, "down"))))
            == ["send #4 error store_unavailable"])
    }

    @Test func logoutEndsTheSessionAndStartsTheDeadlineAgain() {
        var connection = Connection(Self.node())
        connection.connect(session: 7)
        var request = Simp_Logout()
        request.all = true
        let actions = connection.raw(.frame(Simp_Envelope(requestID: 5, .logout(request))))
        #expect(actions.map(Self.line) == ["router closeSession", "leave alice", "frameLimit 4096", "schedule loginDeadline", "run logout"])
        guard case .logout(5, "alice", true, let revoking, let millis)? = Self.works(actions).first else { return }
        #expect(revoking == [Self.token(1)] && connection.machine.tokens.isEmpty)
        #expect(millis == connection.at.millis, "tokens end from the request's time")
        #expect(connection.machine.phase == .anonymous && connection.machine.slot == nil)
        #expect(connection.on(.answered(id: 5, .success(Simp_Envelope(requestID: 5, .ok(Simp_Ok()))))) == ["send #5 ok"],
                "anonymous again: the frame limit stays small")
    }

    @Test func aHistoryPageIsAnsweredAndAGroupOfOthersIsRefused() throws {
        var connection = Connection(Self.node())
        connection.logIn()
        var stored = Simp_Message()
        stored.messageID = "m1"
        let page = HistoryPaging.Page(items: [try stored.serializedBytes()], nextBefore: 4, more: true)
        _ = connection.frame(.history(Simp_HistoryRequest()), id: 6)
        let answer = connection.raw(.historyRead(id: 6, peer: "bob", .success(page)))
        guard case .send(let envelope)? = answer.first, case .historyResult(let result)? = envelope.body else {
            Issue.record("a page: \(answer.map(Self.line))")
            return
        }
        #expect(result.peer == "bob" && result.messages.map(\.messageID) == ["m1"] && result.nextBefore == 4 && result.more)
        #expect(connection.on(.historyRead(id: 7, peer: "#friends", .success(nil))) == ["send #7 error not_a_member"])
        #expect(connection.on(.historyRead(id: 8, peer: "bob", .failure(ServerError(.storeUnavailable, "down")))) == ["send #8 error store_unavailable"])
    }

    @Test func aRevokedDeviceIsEndedEverywhereOnceTheStoreFoundIt() {
        var connection = Connection(Self.node())
        connection.logIn(device: "laptop")
        var request = Simp_RevokeDevice()
        request.name = "phone"
        connection.millis = 5
        let asked = connection.raw(.frame(Simp_Envelope(requestID: 3, .revokeDevice(request))))
        guard case .revokeDevice(let revocation)? = Self.works(asked).first else {
            Issue.record("the revocation asked for: \(asked.map(Self.line))")
            return
        }
        #expect(revocation == ControlMachine.Revocation(id: 3, user: "alice", device: "phone", by: "laptop", millis: connection.at.millis))
        #expect(connection.on(.revocationStored(revocation, .success(true))) == ["endDevice alice phone by laptop", "router announceKeys", "send #3 ok"],
                "its peers are told (KEYS), to remove its leaves now")
        _ = connection.frame(.revokeDevice(request), id: 3)
        #expect(connection.on(.revocationStored(revocation, .success(false))) == ["send #3 error bad_request"], "no such device")
        _ = connection.frame(.revokeDevice(request), id: 3)
        #expect(connection.on(.revocationStored(revocation, .failure(ServerError(.storeUnavailable, "down")))) == ["send #3 error store_unavailable"])
        request.name = "Not A Name"
        #expect(connection.frame(.revokeDevice(request), id: 4) == ["send #4 error bad_request"], "refused before the store")
    }
}
