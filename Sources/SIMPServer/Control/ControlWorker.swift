import NIOCore
import SIMPCore

/// Carries out a `ControlWork` for a connection's driver: the accounts', store's and router's
/// calls, each on the loop whose Redis connection or state it needs (never blocking a loop),
/// and the answer as the `ControlMachine.Input` that feeds it back. The future never fails:
/// a failure is the input's `Result`.
struct ControlWorker {
    let node: SharedControlContext
    /// The connection's loop and channel (a session's control channel), and its number in the `LoginTable`.
    let loop: any EventLoop
    let channel: any Channel
    let connection: LoginTable.Connection

    private var accounts: Accounts { node.accounts }
    private var router: Router { node.router }
    private var store: MessageStore { node.router.store }

    func run(_ work: ControlWork) -> EventLoopFuture<ControlMachine.Input> {
        switch work {
        case .register(let id, let user, let password, let source):
            return answer(id, accounts.register(user: user, password: password, source: source, on: loop).map { Self.ok(id) })
        case .login(let login, let password, let source, let millis):
            let accounts = self.accounts
            return accounts.login(user: login.user, password: password, device: login.device, source: source, nowMillis: millis, on: loop)
                .map { Self.grant(accounts, $0, user: login.user, device: login.device, nowMillis: millis) }
                .asResult { .loginIssued(login, $0) }
        case .verifyToken(let connect, let token, let millis):
            let accounts = self.accounts
            return accounts.verify(token: token, nowMillis: millis, on: loop).map { token in
                ControlMachine.Grant(user: token.user, device: token.device, issued: accounts.issuedMillis(of: token), revocable: token.revocable)
            }.asResult { .tokenVerified(connect, $0) }
        case .openSession(let id, let request):
            let (router, channel) = (self.router, self.channel)
            return router.loop.flatSubmit { router.openSession(request, control: channel) }.asResult { .sessionOpened(id: id, request, $0) }
        case .logout(let id, let user, let all, let revoking, let millis):
            let (accounts, loop) = (self.accounts, self.loop)
            let ended = all ? accounts.endLogins(of: user, nowMillis: millis, on: loop).map { [self] in endOtherLogins(of: user, .logout) }
                : loop.makeSucceededVoidFuture()
            return answer(id, ended.flatMap { accounts.revoke(revoking, nowMillis: millis, on: loop) }.map { Self.ok(id) })
        case .changePassword(let id, let user, let old, let new, let device, let source, let millis):
            let accounts = self.accounts
            return accounts.changePassword(user: user, old: old, new: new, device: device, source: source, nowMillis: millis, on: loop)
                .map { Self.grant(accounts, $0, user: user, device: device, nowMillis: millis) }
                .asResult { .passwordChanged(id: id, user: user, $0) }
        case .devices(let id, let user, let millis):
            return answer(id, store.devices(of: user, nowMillis: millis, on: loop).map { devices in
                var list = Simp_DeviceList()
                list.devices = devices
                return Simp_Envelope(requestID: id, .deviceList(list))
            })
        case .revokeDevice(let revocation):
            return store.revokeDevice(user: revocation.user, device: revocation.device, nowMillis: revocation.millis, on: loop)
                .map { $0 != nil }.asResult { .revocationStored(revocation, $0) }
        case .history(let id, let user, let peer, let before, let limit):
            // Every client reads frames of up to the protocol's default limit, whatever this server accepts.
            return store.history(between: user, and: peer, before: before, limit: limit, budget: HistoryPaging.budget(), on: loop)
                .map { Optional($0) }.asResult { .historyRead(id: id, peer: peer, $0) }
        case .groupHistory(let id, let user, let group, let peer, let before, let limit):
            return store.groupHistory(group, for: user, before: before, limit: limit, budget: HistoryPaging.budget(), on: loop)
                .asResult { .historyRead(id: id, peer: peer, $0) }
        case .query(let session, let query):
            let router = self.router
            return router.loop.flatSubmit { router.answer(query, sessionID: session) }.map { .queryAnswered }.recover { _ in .queryAnswered }
        case .group(let id, let user, let request, let millis):
            return answer(id, ControlGroupWork(router: router, loop: loop, ids: node.ids).run(request, by: user, id: id, nowMillis: millis))
        case .contact(let id, let flow, let millis):
            var flow = flow
            let first = flow.start()
            return answer(id, Self.carryOut(first, flow, router: router, ids: node.ids, nowMillis: millis, on: loop).map { answer in
                Simp_Envelope(requestID: id, .contactAnswer(answer))
            })
        case .settings(let id, let user, let changes, let filtering):
            return answer(id, settings(id, user: user, changes: changes, filtering: filtering))
        case .markRead(let id, let user, let session, let request, let millis):
            return answer(id, markRead(id, user: user, session: session, request, nowMillis: millis))
        case .presenceCircle(let id, let user):
            return store.presenceCircle(of: user, ignoringOwnSetting: true, on: loop).asResult { .presenceCircleRead(id: id, user: user, $0) }
        case .presence(let id, let user, let users, let millis):
            return answer(id, store.presence(of: users, seenBy: user, nowMillis: millis, on: loop).map { users in
                var answer = Simp_PresenceAnswer()
                answer.users = users
                return Simp_Envelope(requestID: id, .presenceAnswer(answer))
            })
        case .keys(let id, let flow):
            return answer(id, Self.carryOut(flow.start(), flow, store: store, router: router, on: loop).map { Simp_Envelope(requestID: id, $0) })
        case .commits(let id, let flow):
            return answer(id, Self.carryOut(flow.start(), flow, store: store, on: loop).map { Simp_Envelope(requestID: id, $0) })
        case .links(let id, let flow):
            return answer(id, Self.carryOut(flow.start(), flow, store: store, on: loop).map { Simp_Envelope(requestID: id, $0) })
        }
    }

    /// Runs a commit request's steps (`CommitFlow`): each read or script, its result back to the flow.
    private static func carryOut(_ next: CommitFlow.Next, _ flow: CommitFlow, store: MessageStore,
                                 on loop: any EventLoop) -> EventLoopFuture<Simp_Envelope.OneOf_Body> {
        let step: EventLoopFuture<CommitFlow.Next>
        switch next {
        case .answer(let body): return loop.makeSucceededFuture(body)
        case .refuse(let code, let reason): return loop.makeFailedFuture(ServerError(code, reason))
        case .checkFraming(let unchecked, let epoch):
            // Pure decoding, but up to milliseconds for a frame of small vectors: not on the loop.
            step = loop.makeFutureWithTask { flow.framed(unchecked.checking(epoch: epoch)) }
        case .readSubmitter(let user, let device, let peer, let added, let framing):
            step = store.commitSubmitter(user: user, device: device, peer: peer, added: added, on: loop)
                .map { flow.checked($0, framing: framing) }
        case .store(let conversation, let user, let epoch, let entry, let welcome, let kept, let group, let groupInfo):
            step = store.storeCommit(conversation, user: user, epoch: epoch, entry: entry, welcome: welcome, kept: kept, group: group,
                                     groupInfo: groupInfo, on: loop).map { flow.stored($0) }
        case .fetch(let conversation, let user, let field, let external, let from, let maxCommits, let budget, let kept):
            step = store.fetchCommits(conversation, user: user, welcomeField: field, external: external, fromEpoch: from, maxCommits: maxCommits,
                                      budget: budget, kept: kept, on: loop).map { flow.fetched($0) }
        }
        return step.flatMap { carryOut($0, flow, store: store, on: loop) }
    }

    /// Runs a device link's step or fetch (`LinkFlow`).
    private static func carryOut(_ next: LinkFlow.Next, _ flow: LinkFlow, store: MessageStore,
                                 on loop: any EventLoop) -> EventLoopFuture<Simp_Envelope.OneOf_Body> {
        switch next {
        case .answer(let body): return loop.makeSucceededFuture(body)
        case .refuse(let code, let reason): return loop.makeFailedFuture(ServerError(code, reason))
        case .step(let user, let device, let kind, let sender, let body, let nowMillis, let keptMillis):
            return store.linkStep(user: user, device: device, kind: kind.rawValue, sender: sender, body: body, nowMillis: nowMillis,
                                  keptMillis: keptMillis, on: loop).flatMap { carryOut(flow.stepped($0), flow, store: store, on: loop) }
        case .fetch(let user):
            return store.links(of: user, on: loop).flatMap { carryOut(flow.fetched($0), flow, store: store, on: loop) }
        }
    }

    /// Runs a key directory request's steps (`KeyFlow`): each read or store, its result back to the flow.
    private static func carryOut(_ next: KeyFlow.Next, _ flow: KeyFlow, store: MessageStore, router: Router,
                                 on loop: any EventLoop) -> EventLoopFuture<Simp_Envelope.OneOf_Body> {
        let step: EventLoopFuture<KeyFlow.Next>
        switch next {
        case .answer(let body): return loop.makeSucceededFuture(body)
        case .answerAndAnnounce(let body):
            let user = flow.user
            router.loop.execute { router.keysChanged(of: user) }
            return loop.makeSucceededFuture(body)
        case .refuse(let code, let reason): return loop.makeFailedFuture(ServerError(code, reason))
        case .read(let user): step = store.keyDirectory(of: user, on: loop).map { flow.read($0) }
        case .storeIdentity(let user, let key, let replace, let millis):
            step = store.storeIdentity(user: user, key: key, replace: replace, nowMillis: millis, on: loop).map { flow.stored($0) }
        case .storeCertificate(let user, let device, let certificate, let identity, let maxDevices, let millis):
            step = store.storeCertificate(user: user, device: device, certificate: certificate, identity: identity,
                                          maxDevices: maxDevices, nowMillis: millis, on: loop).map { flow.stored($0) }
        case .storePackages(let user, let device, let certificate, let packages, let lastResort, let maxPool):
            step = store.storeKeyPackages(user: user, device: device, certificate: certificate, packages: packages,
                                          lastResort: lastResort, maxPool: maxPool, on: loop).map { flow.stored($0) }
        case .readClaimRights(let user, let claimer):
            step = store.claimRights(of: user, claimer: claimer, on: loop).map { flow.claimRights($0) }
        case .claim(let user, let except, let claimer, let perHour):
            step = store.claimKeyPackages(of: user, except: except, claimer: claimer, perHour: perHour, on: loop).map { flow.claimed($0) }
        }
        return step.flatMap { carryOut($0, flow, store: store, router: router, on: loop) }
    }

    /// Closes the user's other connections here at once and on the other nodes through the
    /// admin channel (`ControlAction.endOtherLogins`).
    func endOtherLogins(of user: String, _ why: AdminRequest.LoginEnd) {
        let closed = node.logins.close(user: user, except: connection, with: .error(.sessionClosed, why.reason))
        node.metrics.loginsEnded.increment(by: Int64(closed))
        store.announce(.endLogins(user: user, why: why, node: store.settings.nodeID, connection: connection), on: router.loop)
    }

    /// The device's connections here close at once; every node (this one again, harmlessly)
    /// closes its own through the admin channel (`ControlAction.endDevice`).
    func endDevice(_ revocation: ControlMachine.Revocation, now: NIODeadline) {
        let (user, device) = (revocation.user, revocation.device)
        let closed = node.logins.revoked(user: user, device: device, at: revocation.millis,
                                         with: .error(.sessionClosed, "this device was revoked from \(user)'s device \(revocation.by)"), now: now)
        node.metrics.loginsEnded.increment(by: Int64(closed))
        store.announce(.endDevice(user: user, device: device, by: revocation.by, at: revocation.millis), on: router.loop)
    }

    private func answer(_ id: UInt64, _ future: EventLoopFuture<Simp_Envelope>) -> EventLoopFuture<ControlMachine.Input> {
        future.asResult { .answered(id: id, $0) }
    }

    private static func ok(_ id: UInt64) -> Simp_Envelope {
        Simp_Envelope(requestID: id, .ok(Simp_Ok()))
    }

    private static func grant(_ accounts: Accounts, _ token: (token: String, expiresAt: Int64), user: String, device: String,
                              nowMillis: Int64) -> ControlMachine.Grant {
        ControlMachine.Grant(user: user, device: device, token: token.token, expiresAt: token.expiresAt,
                             issued: accounts.issuedMillis(expiringAt: token.expiresAt),
                             revocable: accounts.parse(token: token.token, nowMillis: nowMillis)?.revocable)
    }

    /// The settings changed (or read); turning contacts-only on is applied before the answer,
    /// as a block is (`carryOut`).
    private func settings(_ id: UInt64, user: String, changes: [(name: String, value: String?)], filtering: Bool) -> EventLoopFuture<Simp_Envelope> {
        let (router, loop) = (self.router, self.loop)
        return store.settings(of: user, changing: changes, on: loop).flatMap { stored in
            let applied = filtering ? router.loop.submit { router.filtered(user: user, nodes: stored.nodes) }.hop(to: loop)
                : loop.makeSucceededVoidFuture()
            return applied.map { stored }
        }.map { stored in
            var answer = Simp_SettingsAnswer()
            answer.settings = UserSetting.allCases.map { setting in
                var item = Simp_Setting()
                item.name = setting.rawValue
                item.value = stored.settings[setting.rawValue] ?? setting.defaultValue
                return item
            }
            return Simp_Envelope(requestID: id, .settingsAnswer(answer))
        }
    }

    /// The marks left out are counted (`ReadReceipts.LeftOut`), never told to the client.
    private func markRead(_ id: UInt64, user: String, session: UInt64, _ request: Simp_ReadRequest, nowMillis: Int64) -> EventLoopFuture<Simp_Envelope> {
        let (router, ids, metrics) = (self.router, node.ids, node.metrics)
        return router.loop.submit { router.reader(of: session) }.flatMap { reader -> EventLoopFuture<Void> in
            guard let reader else { return router.loop.makeFailedFuture(ServerError(.notConnected, "the session ended")) }
            let sorted = ReadReceipts.sorted(request, reader: reader)
            metrics.readMarksLeftOut(.unconfirmed, sorted.unconfirmed)
            return router.store.genuineReads(sorted.delivered, reader: user, on: router.loop).flatMap { genuine in
                // nil: the reader turned read receipts off, so nothing is told by choice.
                guard let found = genuine else { return router.loop.makeSucceededVoidFuture() }
                let genuine = found.marks
                metrics.readMarksLeftOut(.notMember, found.notMember)
                metrics.readMarksLeftOut(.unknown, sorted.delivered.count - genuine.count - found.notMember)
                let senders = Array(Set(genuine.map(\.fromUser)))
                return router.store.takingReadReceipts(senders, from: user, on: router.loop).map { taking in
                    let notices = ReadReceipts.notices(genuine, reader: reader, sendersTakingReceipts: taking,
                                                       ids: ids, nowMillis: nowMillis)
                    for notice in notices { router.notify(notice) }
                }
            }
        }.map { Simp_Envelope(requestID: id, .ok(Simp_Ok())) }
    }

    /// Runs a contact request's steps (`ContactFlow`) one after another; a notice's id is drawn from `ids`.
    private static func carryOut(_ next: ContactFlow.Next, _ flow: ContactFlow, router: Router, ids: @escaping @Sendable () -> UInt64,
                                 nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<Simp_ContactAnswer> {
        var flow = flow
        switch next {
        case .run(let step, let owner, let peer):
            let current = flow
            return router.store.contactStep(step, owner: owner, peer: peer, on: loop).flatMap { result in
                var flow = current
                let next = flow.finished(step, owner: owner, result)
                return carryOut(next, flow, router: router, ids: ids, nowMillis: nowMillis, on: loop)
            }
        case .notify(let type, let from, let to):
            let notice = ContactFlow.notice(type, from: from, to: to, id: ids(), nowMillis: nowMillis)
            router.loop.execute { router.notify(notice) }
            let after = flow.next()
            return carryOut(after, flow, router: router, ids: ids, nowMillis: nowMillis, on: loop)
        case .filtered(let nodes):
            let user = flow.user
            let after = flow.next()
            let rest = flow
            // Done before the answer: the loop may read a datagram before a task queued
            // earlier, and the blocked sender's next message must not go early.
            return router.loop.submit { router.filtered(user: user, nodes: nodes) }.hop(to: loop).flatMap {
                carryOut(after, rest, router: router, ids: ids, nowMillis: nowMillis, on: loop)
            }
        case .answer(let answer):
            return loop.makeSucceededFuture(answer)
        case .refuse(let code, let reason):
            return loop.makeFailedFuture(ServerError(code, reason))
        }
    }
}

extension EventLoopFuture {
    /// The outcome as an input, success or failure (as a `ServerError`).
    func asResult(_ input: @escaping @Sendable (Result<Value, ServerError>) -> ControlMachine.Input) -> EventLoopFuture<ControlMachine.Input> {
        map { input(.success($0)) }.recover { input(.failure(.wrap($0))) }
    }
}

extension Router {
    /// A session's request the machine passed on (`ControlAction.router`).
    func take(_ call: RouterCall) {
        switch call {
        case .receipt(let session, let receipt): self.receipt(sessionID: session, receipt)
        case .withdraw(let session, let withdraw): self.withdraw(sessionID: session, withdraw)
        case .pathResponse(let session, let token): pathResponse(sessionID: session, token: token)
        case .datagram(let session, let bytes): streamDatagram(sessionID: session, ByteBuffer(bytes: bytes))
        case .closeSession(let session): closeSession(session)
        case .announceKeys(let user): keysChanged(of: user)
        }
    }
}
