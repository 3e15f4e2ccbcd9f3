import Foundation
import NIOCore
import SIMPCore
import Testing
@testable import SIMPClient

/// What an application holds of a client: the connection's state as the engine decides it
/// (injected time), each consumer's bounded stream of events, cancelled requests, the model.
@Suite struct ClientEventStreamTests {
    typealias T = ClientEngineTests

    static func states(_ actions: [ClientEngine.Action]) -> [ConnectionState] {
        actions.compactMap { if case .connectionState(let state) = $0 { state } else { nil } }
    }

    // MARK: the connection's state

    @Test func connectingConnectedReconnectingConnected() {
        var engine = T.engine(servers: 2)
        var seen = Self.states(engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: T.start))
        _ = engine.handle(.sessionWanted(udpPort: 5000), at: T.start)
        _ = engine.handle(.sessionAnswered(.login, .success(T.loginOk())), at: T.start)
        _ = engine.handle(.sessionAnswered(.connect(tokenPresented: false), .success(Simp_Envelope(.connected(T.response())))), at: T.start)
        _ = engine.handle(.sessionOpened(T.response()), at: T.start)
        _ = engine.handle(.control(Simp_Envelope(.bound(ClientEngineTests.udpBound))), at: T.start)
        seen += Self.states(engine.handle(.attemptEnded(index: 0, .connect, .success(())), at: T.start))
        let lost = engine.handle(.controlClosed, at: T.at(1))
        seen += Self.states(lost)
        guard case .reconnect(let index, _) = lost.last else {
            Issue.record("no reconnect: \(lost)")
            return
        }
        seen += Self.states(engine.handle(.reconnectDue(index: index), at: T.at(2)))
        seen += Self.states(engine.handle(.attemptEnded(index: index, .reconnect, .success(())), at: T.at(3)))
        let first = ServerAddress(host: "127.0.0.1", port: 7700), second = ServerAddress(host: "127.0.0.1", port: 7701)
        guard seen.count == 4, case .reconnecting(1, let after) = seen[2] else {
            Issue.record("states: \(seen)")
            return
        }
        #expect(seen == [.connecting, .connected(first), .reconnecting(attempt: 1, after: after), .connected(second)])
        #expect(engine.connectionState == .connected(second))
    }

    @Test func aFailedReconnectSaysTheNextAttempt() {
        var engine = T.connected(servers: 2)
        _ = engine.handle(.controlClosed, at: T.at(1))
        _ = engine.handle(.reconnectDue(index: 1), at: T.at(2))
        let failed = engine.handle(.attemptEnded(index: 1, .reconnect, .failure(ClientError("cannot reach"))), at: T.at(3))
        #expect(Self.states(failed) == [.reconnecting(attempt: 2, after: .zero)])
    }

    @Test func aFailedConnectDisconnectAndCloseAreSaid() {
        var engine = T.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: T.start)
        let refused = ClientError("wrong password", code: .invalidCredentials)
        #expect(Self.states(engine.handle(.attemptEnded(index: 0, .connect, .failure(refused)), at: T.start)) == [.disconnected])

        var connected = T.connected()
        #expect(Self.states(connected.handle(.disconnect, at: T.at(1))) == [.disconnected])
        #expect(Self.states(connected.handle(.disconnect, at: T.at(2))).isEmpty, "only changes are said")
        #expect(Self.states(connected.handle(.close, at: T.at(3))) == [.closed])
        #expect(Self.states(connected.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: T.at(4))).isEmpty,
                "closed is the end")
    }

    @Test func theServerEndingTheSessionIsSaid() {
        var engine = T.connected()
        var error = Simp_Error()
        error.code = .sessionReplaced
        error.reason = "replaced"
        _ = engine.handle(.control(Simp_Envelope(.error(error))), at: T.start)
        #expect(Self.states(engine.handle(.controlClosed, at: T.at(1))) == [.ended(reason: "replaced")])
    }

    // MARK: cancellation

    @Test func aCancelledConnectFailsAtOnceAndClosesTheAttempt() {
        var engine = T.engine()
        _ = engine.handle(.connectRequested(user: "alice", password: "pw", token: nil), at: T.start)
        let cancelled = engine.handle(.connectCancelled, at: T.at(1))
        guard case .connectEnded(.failure(let failure)) = cancelled.first(where: { if case .connectEnded = $0 { true } else { false } }) else {
            Issue.record("connect does not end: \(cancelled)")
            return
        }
        #expect(failure.isCancelled && failure.errorCode == .cancelled)
        #expect(cancelled.contains { if case .closeConnection = $0 { true } else { false } })
        #expect(Self.states(cancelled) == [.disconnected])
        #expect(cancelled.firstIndex { if case .connectionState = $0 { true } else { false } }!
                < cancelled.firstIndex { if case .connectEnded = $0 { true } else { false } }!,
                "the state is said before connect returns")
        #expect(engine.lifecycle.state == .idle)
        // The attempt under way ends later: nothing more is said, nothing retried.
        let late = engine.handle(.attemptEnded(index: 0, .connect, .failure(ClientError("control connection closed"))), at: T.at(2))
        #expect(late.isEmpty)
    }

    @Test func aCancelAfterTheConnectIsOverChangesNothing() {
        var engine = T.connected()
        #expect(engine.handle(.connectCancelled, at: T.at(1)).isEmpty)
        #expect(engine.connectionState == .connected(ServerAddress(host: "127.0.0.1", port: 7700)))
    }

    @Test func aLateErrorAnswerToAForgottenRequestIsIgnored() {
        var engine = T.connected()
        var error = Simp_Error()
        error.code = .storeUnavailable
        #expect(engine.handle(.control(Simp_Envelope(requestID: 7, .error(error))), at: T.start).isEmpty)
        #expect(T.events(engine.handle(.control(Simp_Envelope(.error(error))), at: T.start)).count == 1, "an error of no request is told")
    }

    static func answers(_ actions: [ClientEngine.Action]) -> [(UInt64, Result<Simp_Envelope, ClientError>)] {
        actions.compactMap { if case .answer(let id, let result) = $0 { (id, result) } else { nil } }
    }

    @Test func eachRequestIsOverOnceAndThenForgotten() {
        var engine = T.connected()
        for id in 1...4 { #expect(engine.handle(.requestSent(UInt64(id)), at: T.start).isEmpty) }
        #expect(engine.pendingRequests.count == 4)
        // Answered.
        let page = Simp_Envelope(requestID: 1, .historyResult(Simp_HistoryResponse()))
        let answered = Self.answers(engine.handle(.control(page), at: T.start))
        guard answered.count == 1, answered[0].0 == 1, case .success(let reply) = answered[0].1 else {
            Issue.record("not answered: \(answered)")
            return
        }
        #expect(reply == page)
        // Refused.
        var error = Simp_Error()
        error.code = .storeUnavailable
        let refused = Self.answers(engine.handle(.control(Simp_Envelope(requestID: 2, .error(error))), at: T.start))
        guard refused.count == 1, case .failure(let failure) = refused[0].1 else {
            Issue.record("not refused: \(refused)")
            return
        }
        #expect(failure.code == .storeUnavailable)
        // Cancelled: over at once, its answer later is nobody's (no event, no answer).
        let cancelled = Self.answers(engine.handle(.requestCancelled(3), at: T.at(1)))
        guard cancelled.count == 1, cancelled[0].0 == 3, case .failure(let why) = cancelled[0].1 else {
            Issue.record("not cancelled: \(cancelled)")
            return
        }
        #expect(why.isCancelled)
        #expect(engine.handle(.control(Simp_Envelope(requestID: 3, .historyResult(Simp_HistoryResponse()))), at: T.at(2)).isEmpty)
        #expect(engine.handle(.control(Simp_Envelope(requestID: 3, .error(error))), at: T.at(2)).isEmpty)
        #expect(engine.handle(.requestCancelled(3), at: T.at(2)).isEmpty, "over once")
        #expect(engine.handle(.control(page), at: T.at(2)).isEmpty, "answered once")
        // Timed out.
        let late = Self.answers(engine.handle(.requestTimedOut(4), at: T.at(3)))
        #expect(late.count == 1 && late[0].0 == 4)
        #expect(engine.pendingRequests.isEmpty)
    }

    @Test func aLostConnectionEndsEveryRequestOnIt() {
        var engine = T.connected()
        _ = engine.handle(.requestSent(5), at: T.start)
        _ = engine.handle(.requestSent(6), at: T.start)
        let lost = Self.answers(engine.handle(.requestsLost(why: "control connection closed"), at: T.at(1)))
        #expect(lost.map(\.0) == [5, 6])
        #expect(lost.allSatisfy { if case .failure(let error) = $0.1 { error.message == "control connection closed" } else { false } })
        #expect(engine.pendingRequests.isEmpty)
    }

    @Test func theCancelledErrorHasItsOwnCode() {
        #expect(ClientError.cancelled.errorCode == .cancelled)
        #expect(ClientError.cancelled.code == nil)
        #expect(ErrorCode.cancelled.protocolName == nil, "the client's own")
        #expect(!ClientError("x").isCancelled)
    }

    // MARK: each consumer's stream

    @Test func twoConsumersEachGetEveryEvent() async {
        let hub = EventHub()
        let one = hub.events(limit: 100), two = hub.events(limit: 100)
        let sent: [ClientEvent] = (0..<50).map { .typing(from: "u\($0)") }
        for event in sent { _ = hub.publish(event) }
        hub.finish()
        var first: [ClientEvent] = [], second: [ClientEvent] = []
        for await event in one { first.append(event) }
        for await event in two { second.append(event) }
        #expect(first == sent)
        #expect(second == sent)
    }

    @Test func aSlowConsumerKeepsTheNewestAndIsToldHowManyWereDropped() async {
        let hub = EventHub()
        let slow = hub.events(limit: 10)
        var iterator = slow.makeAsyncIterator()
        _ = hub.publish(.typing(from: "u0"))
        #expect(await iterator.next() == .typing(from: "u0"))
        for n in 1...1000 { _ = hub.publish(.typing(from: "u\(n)")) }
        let told = await iterator.next()
        #expect(told == .eventsDropped(count: 990), "\(String(describing: told))")
        var rest: [ClientEvent] = []
        for _ in 0..<10 { if let event = await iterator.next() { rest.append(event) } }
        #expect(rest == (991...1000).map { .typing(from: "u\($0)") }, "the newest are kept, in order")
        _ = hub.publish(.typing(from: "next"))
        #expect(await iterator.next() == .typing(from: "next"), "the count starts again")
    }

    @Test func theBufferNeverHoldsMoreThanItsLimit() {
        let buffer = BoundedBuffer<ClientEvent>(limit: 5, weight: { _ in 1 }, overflow: { ClientEvent.eventsDropped(count: $0) })
        for n in 0..<1000 {
            buffer.push(.typing(from: "u\(n)"))
            #expect(buffer.count <= 5)
        }
    }

    @Test func batchesCountTheEventsOfTheBatchesDropped() async {
        let hub = EventHub()
        let batches = hub.batches(limit: 2)
        for turn in 0..<5 {
            for n in 0..<3 { _ = hub.publish(.typing(from: "t\(turn)-\(n)")) }
            hub.flushBatch()
        }
        hub.finish()
        var got: [[ClientEvent]] = []
        for await batch in batches { got.append(batch) }
        #expect(got.count == 3)
        #expect(got.first == [.eventsDropped(count: 9)])
        #expect(got.dropFirst().map(\.count) == [3, 3])
    }

    @Test func aConsumerThatStopsIsRemoved() async {
        let hub = EventHub()
        let task = Task {
            for await _ in hub.events(limit: 10) {}
        }
        #expect(await eventually { hub.subscriberCount == 1 })
        task.cancel()
        await task.value
        #expect(hub.subscriberCount == 0, "cancelled")

        var stream: AsyncStream<ClientEvent>? = hub.events(limit: 10)
        #expect(stream != nil && hub.subscriberCount == 1)
        stream = nil
        #expect(hub.subscriberCount == 0, "released")
    }

    @Test func aStreamMadeAfterCloseEndsAtOnce() async {
        let hub = EventHub()
        hub.finish()
        var count = 0
        for await _ in hub.events(limit: 10) { count += 1 }
        #expect(count == 0)
        #expect(hub.subscriberCount == 0)
    }

    @Test func statesStartWithTheCurrentOneAndSayOnlyChanges() async {
        let hub = EventHub()
        hub.publish(ConnectionState.connecting)
        let states = hub.states()
        let server = ServerAddress(host: "127.0.0.1", port: 1)
        hub.publish(ConnectionState.connected(server))
        hub.publish(ConnectionState.connected(server))
        hub.publish(ConnectionState.closed)
        hub.finish()
        var seen: [ConnectionState] = []
        for await state in states { seen.append(state) }
        #expect(seen == [.connecting, .connected(server), .closed])
        #expect(hub.connectionState == .closed)
    }

    // MARK: the model

    #if canImport(Observation)
    @MainActor @Test func theModelKeepsTheLatestEventsAndKnowsWhenToRereadTheHistory() {
        let client = SIMPClient(configuration: T.configuration())
        let model = SIMPClientModel(client: client, recentLimit: 3)
        #expect(model.connectionState == .disconnected)
        #expect(!model.apply(.typing(from: "bob")))
        #expect(model.apply(.delivered(id: "m1", to: "bob", seq: 1)))
        #expect(model.apply(.eventsDropped(count: 4)), "after a gap the history is read again")
        #expect(!model.apply(.error("disk full")))
        #expect(model.recentEvents == [.delivered(id: "m1", to: "bob", seq: 1), .eventsDropped(count: 4), .error("disk full")])
    }
    #endif
}

/// Polls `condition` until it holds (at most 10 s).
private func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<1000 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}
