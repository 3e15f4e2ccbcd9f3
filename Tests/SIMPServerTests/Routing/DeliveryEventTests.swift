import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRedis
import Testing
@testable import SIMPServer

/// Every `DeliveryEvent` case, in and out: the event with an injected time, the actions it
/// leads to (the cases DeliveryEngineEventTests' scenarios do not already show).
extension DeliveryEngineEventTests {
    struct Outage: Error {}

    static func stored(_ id: String, from: String, to: String, seq: UInt64) -> [UInt8] {
        var message = Simp_Message()
        message.messageID = id
        message.fromUser = from
        message.toUser = to
        message.content = "text"
        message.seq = seq
        return (try? message.serializedBytes()) ?? []
    }

    // MARK: the node

    @Test func noPushGoesOutBeforeTheUDPSocketIsBound() throws {
        var node = Node.make()
        _ = node.engine.handle(.udpBound(port: nil), at: at())
        let (bob, token) = node.open("bob")
        try node.datagram(.bind, token, from: bob, port: 4001)
        #expect(node.datagrams(to: bob).isEmpty, "the bind's answer waits for a socket")
        node.on(.udpBound(port: 7701))
        try node.datagram(.bind, token, from: bob, port: 4001)
        #expect(node.datagrams(to: bob) == [.pong])
    }

    @Test func aStartedEngineAsksForTimersAgain() throws {
        var node = Node.make()
        node.on(.stopped)
        node.on(.started)
        let alice = try node.online("alice", port: 4000)
        _ = try node.online("bob", port: 4001)
        try node.send("hi", to: "bob", from: alice, port: 4000, order: 1)
        node.on(.due(.flushStores))
        let batch = try #require(node.batches.first)
        node.on(.stored(batch, .success([.stored(seq: 1, bytes: [9])])))
        #expect(node.asked.contains(.tick))
    }

    @Test func aReloadRatesSessionsOpenedAfterIt() throws {
        var node = Node.make()
        node.on(.reloaded(messagesPerSecond: 1, burst: 1, inboxShare: 10))
        #expect(node.actions.isEmpty)
        let alice = try node.online("alice", port: 4000)
        try node.send("x", to: "bob", from: alice, port: 4000, order: 1)
        try node.send("x", to: "bob", from: alice, port: 4000, order: 2)
        #expect(node.sent(to: alice).contains { if case .error(let error) = $0 { error.code == .rateLimited } else { false } })
        #expect(node.engine.limits.inboxShare == 10)
    }

    @Test func drainingWritesDueMarksAndSendsQueuedStoresThenSaysIdle() throws {
        var (node, _, bob) = try aliceStoredAMessageForBob()
        node.on(.receipt(session: bob.id, .with { $0.upToSeq = 1 }), at: at(.milliseconds(1)))
        node.on(.draining, at: at(.milliseconds(2)))
        #expect(node.actions.contains { if case .writeReceipts(let marks) = $0 { marks.map(\.deviceMark) == [1] } else { false } })
        #expect(node.actions.contains { if case .storesIdle = $0 { true } else { false } })
    }

    @Test func aResubscribedNodeReadsEveryBoundSessionsInbox() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        node.on(.resubscribed)
        #expect(node.actions.contains { if case .readInbox(bob.id, "bob", _, .catchUp) = $0 { true } else { false } })
    }

    // MARK: sessions

    @Test func aConnectRegistersTheDeviceWithItsTime() {
        var node = Node.make()
        let request = DeliveryEngine.SessionRequest(user: "bob", device: "phone", tokenIssuedMillis: 5, lastSeq: 0)
        node.on(.connectAsked(request, attempt: 9), at: at(.seconds(3)))
        guard case .registerDevice(9, let asked, let millis)? = node.actions.first else { Issue.record("\(node.actions)"); return }
        #expect(asked.device == "phone" && millis == at(.seconds(3)).millis)
    }

    /// Session ids come from the engine's randomness: never 0, never one in use.
    @Test func sessionIDsAreNeverZeroOrTaken() {
        var node = Node.make()
        let first = node.open("bob", "phone").session
        let idBytes = (0..<8).map { UInt8(truncatingIfNeeded: first.id >> (56 - 8 * $0)) }
        let draws = NIOLockedValueBox<[[UInt8]]>([Array(repeating: 0, count: 8), idBytes, idBytes, Array(repeating: 9, count: 8)])
        let counting = Node.counting()
        let scripted: @Sendable (Int) -> [UInt8] = { count in
            count == 8 ? draws.withLockedValue { $0.isEmpty ? counting(8) : $0.removeFirst() } : counting(count)
        }
        var engine = DeliveryEngine(configuration: node.engine.configuration, metrics: ServerMetrics(),
                                    logger: node.engine.logger, randomBytes: scripted)
        let request = DeliveryEngine.SessionRequest(user: "bob", device: "phone", tokenIssuedMillis: 0, lastSeq: 0)
        _ = engine.handle(.deviceRegistered(request, .registered(deviceMark: 0, devices: 1, nodes: []), attempt: 1), at: at())
        let laptop = DeliveryEngine.SessionRequest(user: "bob", device: "laptop", tokenIssuedMillis: 0, lastSeq: 0)
        let taken = engine.handle(.deviceRegistered(laptop, .registered(deviceMark: 0, devices: 2, nodes: []), attempt: 2), at: at())
        let ids = engine.sessions.all.map(\.id).sorted()
        #expect(ids == [first.id, 0x0909_0909_0909_0909].sorted(), "0 drawn first, then the id in use")
        #expect(taken.contains { if case .opened(2, UInt64(0x0909_0909_0909_0909)) = $0 { true } else { false } },
                "0 and the id in use were drawn again")
    }

    @Test func aRefusedRegistrationRefusesTheConnectAndOpensNothing() {
        var node = Node.make()
        let request = DeliveryEngine.SessionRequest(user: "bob", device: "phone", tokenIssuedMillis: 5, lastSeq: 0)
        node.on(.deviceRegistered(request, .tooMany(devices: 10), attempt: 3))
        guard case .connectRefused(3, let error)? = node.actions.first else { Issue.record("\(node.actions)"); return }
        #expect((error as? ServerError)?.code == .tooManyDevices)
        #expect(node.engine.sessionCount == 0)
    }

    @Test func aUserWhoFiltersTakesNothingEarly() {
        var node = Node.make()
        var request = DeliveryEngine.SessionRequest(user: "bob", device: "phone", tokenIssuedMillis: 5, lastSeq: 0)
        request.takesEarly = true
        node.on(.deviceRegistered(request, .registered(deviceMark: 0, devices: 1, nodes: [], filtered: true), attempt: 1))
        guard case .opened(1, let id)? = node.actions.first(where: { if case .opened = $0 { true } else { false } }) else {
            Issue.record("\(node.actions)")
            return
        }
        #expect(node.engine.sessions[id]?.takesEarly == false)
        #expect(node.actions.contains { if case .repairNumbering(id, "bob", 0) = $0 { true } else { false } })
    }

    @Test func aFailedNumberingCheckRefusesTheConnectAndClosesTheSession() {
        var node = Node.make()
        let request = DeliveryEngine.SessionRequest(user: "bob", device: "phone", tokenIssuedMillis: 5, lastSeq: 0)
        node.on(.deviceRegistered(request, .registered(deviceMark: 0, devices: 1, nodes: []), attempt: 4))
        let id = node.actions.compactMap { if case .opened(4, let id) = $0 { id } else { nil } }.first ?? UInt64(0)
        node.on(.numberingRepaired(session: id, moved: .failure(Outage())))
        #expect(node.actions.contains { if case .connectRefused(4, _) = $0 { true } else { false } })
        #expect(node.actions.contains { if case .closed(id) = $0 { true } else { false } })
        #expect(node.engine.sessionCount == 0)
    }

    @Test func aSessionClosedBeforeItsAnswerRefusesItsConnect() {
        var node = Node.make()
        let request = DeliveryEngine.SessionRequest(user: "bob", device: "phone", tokenIssuedMillis: 5, lastSeq: 0)
        node.on(.deviceRegistered(request, .registered(deviceMark: 0, devices: 1, nodes: []), attempt: 5))
        let id = node.actions.compactMap { if case .opened(5, let id) = $0 { id } else { nil } }.first ?? UInt64(0)
        node.on(.controlClosed(session: id))
        #expect(node.actions.contains { if case .connectRefused(5, _) = $0 { true } else { false } })
        #expect(node.actions.contains { if case .clearPresence("bob", "phone", id, _) = $0 { true } else { false } })
        node.on(.numberingRepaired(session: id, moved: .success(0)))
        #expect(node.actions.isEmpty, "answered once")
    }

    @Test func aConnectsAnswerCarriesTheSessionItsKeyAndTheSocket() {
        var node = Node.make()
        let (bob, token) = node.open("bob")
        guard case .connectAnswered(1, let response)? = node.actions.last else { Issue.record("\(node.actions)"); return }
        #expect(response.sessionID == bob.id && Array(response.bindToken) == token && response.udpPort == 7701)
        #expect(response.user == "bob" && response.devices == 1)
    }

    @Test func anAdministratorEndsOnlyTheSessionNamed() {
        var node = Node.make()
        let phone = node.open("bob", "phone").session
        let laptop = node.open("bob", "laptop").session
        node.on(.closedByAdministrator(user: "bob", session: phone.id))
        let ended = node.actions.compactMap { if case .end(let id, _) = $0 { id } else { nil } }
        #expect(ended == [phone.id])
        #expect(node.engine.sessions[laptop.id] != nil)
        node.on(.closedByAdministrator(user: "bob", session: nil))
        #expect(node.actions.compactMap { if case .end(let id, _) = $0 { id } else { nil } } == [laptop.id])
    }

    // MARK: clients

    @Test func aPathResponseMovesTheSessionToItsNewAddress() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        // A datagram from a new address is challenged there; only the control connection answers.
        try node.datagram(.keepalive, [], from: bob, port: 4555)
        let challenge = node.actions.compactMap { if case .datagram(let out) = $0, out.header.kind == .challenge { out.payload } else { nil } }.first
        let token = try #require(challenge)
        node.on(.pathResponse(session: bob.id, token: token))
        guard case .bound(let bound)? = node.sent(to: bob).first else { Issue.record("\(node.actions)"); return }
        #expect(bound.address == "192.0.2.1:4555")
        #expect(node.asked == [.tick], "presence, naming the new address, is written on the tick")
        node.on(.pathResponse(session: bob.id, token: token))
        #expect(node.actions.isEmpty, "a token answers once")
    }

    @Test func aWithdrawnMessageTheServerNeverHadFailsWithdrawn() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        // Order 2 waits for order 1, which never came.
        try node.send("x", to: "bob", from: alice, port: 4000, order: 2)
        node.on(.withdraw(session: alice.id, .with { $0.clientSeq = 1; $0.messageID = "m1"; $0.toUser = "bob" }))
        guard case .failed(let failed)? = node.sent(to: alice).first else { Issue.record("\(node.actions)"); return }
        #expect(failed.messageID == "m1" && failed.code == .withdrawn)
        #expect(node.asked == [.flushStores], "order 2 is released to the store")
    }

    @Test func aDeliveryQueryAsksTheStoreAndIsAnsweredOnceItsFramesAreQueued() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        let item = Simp_Accepted.with { $0.messageID = "m1"; $0.toUser = "bob"; $0.seq = 4 }
        node.on(.deliveryQuery(session: alice.id, .with { $0.messages = [item] }, ask: 7))
        #expect(node.actions.contains { if case .readConfirmed(7, alice.id, "alice", [item]) = $0 { true } else { false } })
        node.on(.confirmedRead(session: alice.id, [item], ask: 7))
        #expect(node.sent(to: alice).count == 1)
        guard case .queryAnswered(7)? = node.actions.last else { Issue.record("\(node.actions)"); return }
    }

    @Test func anEmptyOrOversizedQueryIsAnsweredAtOnce() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        node.on(.deliveryQuery(session: alice.id, Simp_DeliveryQuery(), ask: 1))
        #expect(node.actions.count == 1 && node.actions.contains { if case .queryAnswered(1) = $0 { true } else { false } })
        let many = (0...DeliveryEngine.maxQueryItems).map { i in Simp_Accepted.with { $0.messageID = "m\(i)" } }
        node.on(.deliveryQuery(session: alice.id, .with { $0.messages = many }, ask: 2))
        #expect(node.sent(to: alice).contains { if case .error(let error) = $0 { error.code == .badRequest } else { false } })
        #expect(node.actions.contains { if case .queryAnswered(2) = $0 { true } else { false } })
    }

    // MARK: the server and other nodes

    @Test func aServerNoticeIsStoredLikeAMessageAndAnswersNobody() throws {
        var node = Node.make()
        var notice = StoreRequest(from: "", id: "n1", to: "bob", bytes: Self.stored("n1", from: "", to: "bob", seq: 0))
        notice.notice = true
        node.on(.serverNotice(notice))
        #expect(node.asked == [.flushStores])
        node.on(.due(.flushStores))
        let batch = try #require(node.batches.first)
        node.on(.stored(batch, .success([.stored(seq: 1, bytes: [9])])))
        #expect(node.actions.allSatisfy { if case .send = $0 { false } else { true } })
    }

    @Test func noticesFromOtherNodes() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        let bob = try node.online("bob", port: 4001)
        node.on(.notice(.inbox(user: "bob")))
        #expect(node.actions.contains { if case .readInbox(bob.id, "bob", _, .catchUp) = $0 { true } else { false } })
        node.on(.notice(.delivered(sender: "alice", messages: [.with { $0.messageID = "m1"; $0.toUser = "bob"; $0.seq = 2 }])))
        #expect(node.sent(to: alice).count == 1)
        node.on(.notice(.devices(user: "bob", count: 2)))
        #expect(bob.devices == 2 && node.actions.isEmpty)
        node.on(.notice(.typing(from: "alice", to: "bob")))
        #expect(node.datagrams(to: bob) == [.typing])
        node.on(.notice(.presence(PresenceChange(user: "alice", online: true, since: 1), watchers: ["bob"])))
        #expect(node.datagrams(to: bob) == [.presence])
        node.on(.notice(.filtered(user: "bob")))
        #expect(bob.takesEarly == false)
    }

    @Test func aFilteredUserIsToldToItsOtherNodes() throws {
        var node = Node.make()
        node.on(.filtered(user: "bob", nodes: ["n1", "n2"]))
        #expect(node.actions.count == 1)
        guard case .publish(.filtered(user: "bob"), let nodes)? = node.actions.first else { Issue.record("\(node.actions)"); return }
        #expect(nodes == ["n2"])
    }

    @Test func presenceGoesToWatchersHereAndIsPublishedToOtherNodes() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        let change = PresenceChange(user: "alice", online: true, since: 1)
        node.on(.presenceWatchers(change, byNode: ["n1": ["bob"], "n2": ["carol"]]))
        #expect(node.datagrams(to: bob) == [.presence])
        #expect(node.actions.contains { if case .publish(.presence(change, watchers: ["carol"]), ["n2"]) = $0 { true } else { false } })
    }

    @Test func typingGoesToTheRecipientHereAndIsPublishedToOtherNodes() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        node.on(.typingNodes(from: "alice", to: "bob", nodes: ["n1", "n3"]))
        #expect(node.datagrams(to: bob) == [.typing])
        #expect(node.actions.contains { if case .publish(.typing(from: "alice", to: "bob", sealed: nil), ["n3"]) = $0 { true } else { false } })
    }

    // MARK: the store's answers

    /// The whole batch fails only when the Redis client is shut down: each message hears so.
    @Test func aBatchTheStoreCouldNotTakeAtAllFailsEachMessage() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        try node.send("hi", to: "bob", from: alice, port: 4000, order: 1)
        node.on(.due(.flushStores))
        let batch = try #require(node.batches.first)
        #expect(node.actions.contains { if case .store(_, let floors) = $0 { floors == [:] } else { false } }, "bob has no session here")
        node.on(.stored(batch, .failure(Outage())))
        guard case .failed(let failed)? = node.sent(to: alice).first else { Issue.record("\(node.actions)"); return }
        #expect(failed.messageID == "m1")
    }

    @Test func entriesAReceiptNamedArePushed() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        node.on(.entriesRead(session: bob.id, .success([Self.stored("m1", from: "alice", to: "bob", seq: 1)])))
        #expect(node.datagrams(to: bob) == [.data])
        node.on(.entriesRead(session: bob.id, .failure(Outage())))
        #expect(node.actions.isEmpty)
    }

    @Test func writtenMarksTellSendersAndResumeHeldGroupsAndFailedOnesAreTriedAgain() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        let mark = ReceiptLedger.Receipt(user: "bob", device: "d1", deviceMark: 1, needsEntries: true)
        let written = MessageStore.ReceiptWritten(entries: [Self.stored("m1", from: "alice", to: "bob", seq: 1)], heldGroups: ["team"])
        node.on(.receiptsWritten([mark], [.success(written)]))
        #expect(node.sent(to: alice).count == 1)
        #expect(node.actions.contains { if case .resumeGroupCopies("bob", ["team"]) = $0 { true } else { false } })
        node.on(.receiptsWritten([mark], [.failure(RedisError(.io, "down"))]))
        #expect(node.asked == [.tick])
    }

    @Test func presenceWrittenFirstAnnouncesTheUserOnline() {
        var node = Node.make()
        let entry = PresenceEntry(node: "n1", session: 1, address: "192.0.2.1:4000", seenMillis: 77)
        node.on(.presenceWritten([MessageStore.Presence(user: "bob", device: "d1", entry: entry)], first: [true]))
        #expect(node.actions.contains { if case .announcePresence(PresenceChange(user: "bob", online: true, since: 77)) = $0 { true } else { false } })
        node.on(.presenceWritten([MessageStore.Presence(user: "bob", device: "d1", entry: entry)], first: [false]))
        #expect(node.actions.isEmpty)
    }

    @Test func presenceClearedWithNoDeviceLeftAnnouncesTheUserOffline() throws {
        var node = Node.make()
        node.on(.presenceCleared(user: "bob", devicesPresent: 0, millis: 88))
        #expect(node.actions.contains { if case .announcePresence(PresenceChange(user: "bob", online: false, since: 88)) = $0 { true } else { false } })
        node.on(.presenceCleared(user: "bob", devicesPresent: 1, millis: 89))
        #expect(node.actions.isEmpty)
        _ = try node.online("bob", port: 4001)
        node.on(.presenceCleared(user: "bob", devicesPresent: 0, millis: 90))
        #expect(node.actions.isEmpty, "a session of bob's is here")
    }

    // MARK: the group relay

    @Test func groupCopiesArePushedToTheMembersSessionsHere() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        var message = Simp_Message()
        message.messageID = "g1"
        message.fromUser = "alice"
        message.toUser = "#team"
        message.seq = 3
        let push = Push(stored: message, bytes: try message.serializedBytes(), recipient: "bob")
        node.on(.groupCopied(member: "bob", [GroupCopy(seq: 3, push: push)]))
        #expect(node.datagrams(to: bob) == [.data])
        #expect(bob.numberingFloor == 3)
    }

    /// A notice read back from the inbox (a device back from away catching up) tells nobody it
    /// was delivered, as it does when pushed on its store: a KEYS_CHANGED notice's confirmation
    /// by 2,000 recipients would tell its user 2,000 times. Until 2026-12-01 an invitation read
    /// back told its inviter "delivered" for an id the inviter never sent.
    @Test(arguments: [Simp_Message.MessageType.keysChanged, .contactRequest, .contactAccepted, .groupInvited, .read])
    func aNoticeReadBackFromTheInboxIsACopy(type: Simp_Message.MessageType) throws {
        var message = Simp_Message()
        message.messageID = "n1"
        message.type = type
        message.fromUser = "alice"
        message.toUser = "bob"
        message.seq = 4
        #expect(Push(stored: message, bytes: try message.serializedBytes(), recipient: "bob").isCopy)
        message.type = .text
        #expect(!Push(stored: message, bytes: try message.serializedBytes(), recipient: "bob").isCopy)
    }

    @Test func aGroupMessagesAnswersGoToTheSendingDevice() throws {
        var node = Node.make()
        let alice = try node.online("alice", "d1", port: 4000)
        let request = StoreRequest(from: "alice", id: "g1", to: "#team", bytes: [], device: "d1")
        let accepted = Simp_Envelope(.accepted(.with { $0.messageID = "g1" }))
        node.on(.groupAnswered(request, [accepted]))
        #expect(node.sent(to: alice).count == 1)
    }

    @Test func aRecheckReadsTheMembersInbox() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        node.on(.groupRecheck(member: "bob"))
        #expect(node.actions.contains { if case .readInbox(bob.id, "bob", _, .catchUp) = $0 { true } else { false } })
    }
}
