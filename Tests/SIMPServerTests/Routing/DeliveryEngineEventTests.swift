import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRedis
import Testing
@testable import SIMPServer

/// The engine's decisions as events in and actions out, with an injected time: no socket, no
/// Redis, no clock.
@Suite struct DeliveryEngineEventTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    static let shard = RedisNodeAddress(host: "10.0.0.1", port: 6379)

    /// A node's engine and what it was asked to do since the last look.
    struct Node {
        var engine: DeliveryEngine
        var actions: [DeliveryAction] = []
        var packets: UInt64 = 1

        static func make(minReplicas: Int = 0, messagesPerSecond: Int = 1000, burst: Int = 2000, datagramsOverStream: Bool = true,
                         sealedOnly: Bool = false) -> Node {
            var settings = RouterSettings(nodeID: "n1", heartbeat: .seconds(15), retransmit: RetransmitPolicy())
            settings.sealedOnly = sealedOnly
            settings.datagramsOverStream = datagramsOverStream
            settings.messagesPerSecond = messagesPerSecond
            settings.messageBurst = burst
            let configuration = DeliveryEngine.Configuration(router: settings, presenceTTLSeconds: 90, minReplicas: minReplicas, inboxShare: 2500)
            var engine = DeliveryEngine(configuration: configuration, metrics: ServerMetrics(),
                                        logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
                                        shardOf: { _ in DeliveryEngineEventTests.shard }, randomBytes: Self.counting())
            _ = engine.handle(.udpBound(port: 7701), at: at())
            return Node(engine: engine)
        }

        /// Injected randomness: each draw the next bytes of a counter (never all zero twice).
        static func counting() -> @Sendable (Int) -> [UInt8] {
            let next = NIOLockedValueBox<UInt8>(0)
            return { count in next.withLockedValue { n in (0..<count).map { _ in n &+= 1; return n } } }
        }

        /// Feeds an event and keeps the actions it led to.
        mutating func on(_ event: DeliveryEvent, at now: Moment = at()) {
            actions = engine.handle(event, at: now)
        }

        /// A CONNECT through its steps: the device registered, the numbering checked, the
        /// answer; the actions are those of all three.
        mutating func open(_ user: String, _ device: String = "d1", at now: Moment = at()) -> (session: Session, bindToken: [UInt8]) {
            let request = DeliveryEngine.SessionRequest(user: user, device: device, tokenIssuedMillis: 0, lastSeq: 0)
            var all = engine.handle(.connectAsked(request, attempt: 1), at: now)
            all += engine.handle(.deviceRegistered(request, .registered(deviceMark: 0, devices: 1, nodes: ["n1"]), attempt: 1), at: now)
            let id = all.compactMap { if case .opened(1, let id) = $0 { id } else { nil } }.first ?? UInt64(0)
            all += engine.handle(.numberingRepaired(session: id, moved: .success(0)), at: now)
            actions = all
            let answer = all.compactMap { if case .connectAnswered(1, let response) = $0 { response } else { nil } }.first
            return (engine.sessions[id]!, Array(answer?.bindToken ?? Data()))
        }

        /// Opens a session and binds it from `port`, its inbox read back empty.
        mutating func online(_ user: String, _ device: String = "d1", port: Int, at now: Moment = at()) throws -> Session {
            let (session, token) = open(user, device, at: now)
            try datagram(.bind, token, from: session, port: port, at: now)
            on(.inboxRead(session: session.id, .sync, .success([])), at: now)
            return session
        }

        mutating func datagram(_ kind: DatagramKind, _ payload: [UInt8], from session: Session, port: Int, at now: Moment = at()) throws {
            let header = DatagramHeader(kind: kind, sessionID: session.id, packetNumber: packets)
            packets += 1
            let sealed = try DatagramSeal.seal(header, payload: payload, key: session.key, direction: .toServer)
            let address = try SocketAddress(ipAddress: "192.0.2.1", port: port)
            on(.datagram(AddressedEnvelope(remoteAddress: address, data: sealed)), at: now)
        }

        mutating func send(_ text: String, to user: String, from session: Session, port: Int, order: UInt64, at now: Moment = at()) throws {
            var message = Simp_Message()
            message.messageID = "m\(order)"
            message.toUser = user
            message.content = text
            message.clientSeq = order
            try datagram(.data, try message.serializedBytes(), from: session, port: port, at: now)
        }

        func sent(to session: Session) -> [Simp_Envelope.OneOf_Body] {
            actions.compactMap { if case .send(let envelope, session.id) = $0 { envelope.body } else { nil } }
        }

        func datagrams(to session: Session) -> [DatagramKind] {
            actions.compactMap { if case .datagram(let out) = $0, out.header.sessionID == session.id { out.header.kind } else { nil } }
        }

        var asked: [DeliveryEngine.Due] {
            actions.compactMap {
                switch $0 {
                case .later(let due), .after(_, let due): due
                default: nil
                }
            }
        }

        var batches: [StoreBatch] {
            actions.compactMap { if case .store(let batch, _) = $0 { batch } else { nil } }
        }
    }

    static func at(_ offset: TimeAmount = .zero) -> Moment {
        Moment(deadline: start + offset, millis: 1_700_000_000_000 + offset.nanoseconds / 1_000_000)
    }

    func at(_ offset: TimeAmount = .zero) -> Moment { Self.at(offset) }

    @Test func aBindWritesPresenceBeforeTheInboxIsRead() throws {
        var node = Node.make()
        let (bob, token) = node.open("bob")
        try node.datagram(.bind, token, from: bob, port: 4000, at: at(.seconds(2)))
        #expect(node.sent(to: bob).count == 1)
        #expect(node.datagrams(to: bob) == [.pong])
        let presence = node.actions.firstIndex { if case .setPresence(let entries) = $0 { entries.first?.entry.seenMillis == at(.seconds(2)).millis } else { false } }
        let read = node.actions.firstIndex { if case .readInbox(bob.id, "bob", 0, .sync) = $0 { true } else { false } }
        #expect(presence != nil && read != nil && presence! < read!)
    }

    @Test func aNewerSessionOfADeviceReplacesTheOlderAndOtherDevicesStay() {
        var node = Node.make()
        let phone = node.open("bob", "phone").session
        let laptop = node.open("bob", "laptop").session
        #expect(node.actions.allSatisfy { if case .end = $0 { false } else { true } })
        _ = node.open("bob", "phone")
        let ended = node.actions.compactMap { if case .end(let id, let envelope) = $0 { (id, envelope.body) } else { nil } }
        #expect(ended.count == 1 && ended.first?.0 == phone.id)
        guard case .error(let error)? = ended.first?.1 else { Issue.record("no error"); return }
        #expect(error.code == .sessionReplaced)
        #expect(node.actions.contains { if case .clearPresence("bob", "phone", phone.id, _) = $0 { true } else { false } })
        #expect(node.engine.sessionCount == 2 && node.engine.sessions[laptop.id] != nil)
    }

    @Test func aMessageIsStoredAtTheEndOfTheTickThenPushedAndItsSenderAccepted() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        let bob = try node.online("bob", port: 4001)
        try node.send("hi", to: "bob", from: alice, port: 4000, order: 1)
        #expect(node.asked == [.flushStores] && node.batches.isEmpty)
        node.on(.due(.flushStores), at: at())
        let batch = try #require(node.batches.first)
        #expect(batch.items.map(\.to) == ["bob"] && batch.items.map(\.from) == ["alice"])
        node.on(.stored(batch, .success([.stored(seq: 1, bytes: [9])])))
        #expect(node.sent(to: alice) == [.accepted(.with { $0.messageID = "m1"; $0.toUser = "bob"; $0.seq = 1 })])
        #expect(node.datagrams(to: bob) == [.data])
        #expect(node.asked.contains(.tick))
    }

    /// alice and bob online; alice's message to bob stored as seq 1 and pushed to him.
    func aliceStoredAMessageForBob() throws -> (Node, alice: Session, bob: Session) {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        let bob = try node.online("bob", port: 4001)
        try node.send("hi", to: "bob", from: alice, port: 4000, order: 1)
        node.on(.due(.flushStores), at: at())
        let batch = try #require(node.batches.first)
        node.on(.stored(batch, .success([.stored(seq: 1, bytes: [9])])))
        return (node, alice, bob)
    }

    @Test func aReceiptTellsTheSenderOnceAndItsMarkIsWrittenOnTheTick() throws {
        var (node, alice, bob) = try aliceStoredAMessageForBob()
        node.on(.receipt(session: bob.id, .with { $0.upToSeq = 1 }), at: at(.milliseconds(5)))
        #expect(node.sent(to: alice).count == 1)
        guard case .delivered(let delivered)? = node.sent(to: alice).first else { Issue.record("no delivered"); return }
        #expect(delivered.messageID == "m1" && delivered.seq == 1)
        node.on(.receipt(session: bob.id, .with { $0.upToSeq = 1 }), at: at(.milliseconds(6)))
        #expect(node.sent(to: alice).isEmpty)
        node.on(.due(.tick), at: at(.milliseconds(10)))
        let marks = node.actions.compactMap { if case .writeReceipts(let marks) = $0 { marks } else { nil } }.flatMap { $0 }
        #expect(marks == [ReceiptLedger.Receipt(user: "bob", device: "d1", deviceMark: 1, needsEntries: false)])
    }

    @Test func anUnconfirmedPushGoesAgainWhenItsTimeComesAndAConfirmedOneDoesNot() throws {
        var (node, _, bob) = try aliceStoredAMessageForBob()
        node.on(.due(.tick), at: at(.milliseconds(10)))
        #expect(node.datagrams(to: bob).isEmpty)
        node.on(.due(.tick), at: at(.seconds(5)))
        #expect(node.datagrams(to: bob) == [.data])
        node.on(.receipt(session: bob.id, .with { $0.upToSeq = 1 }), at: at(.seconds(6)))
        node.on(.due(.tick), at: at(.seconds(30)))
        #expect(node.datagrams(to: bob).isEmpty)
    }

    @Test func keepalivesRenewPresenceAThirdOfItsLifetimeAfterItWasWritten() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        try node.datagram(.keepalive, [], from: bob, port: 4001, at: at(.seconds(10)))
        #expect(node.asked.isEmpty)
        try node.datagram(.keepalive, [], from: bob, port: 4001, at: at(.seconds(31)))
        #expect(node.asked == [.presenceRenewal])
        try node.datagram(.keepalive, [], from: bob, port: 4001, at: at(.milliseconds(31_500)))
        #expect(node.asked.isEmpty)
        node.on(.due(.presenceRenewal), at: at(.seconds(32)))
        let renewal = node.actions.compactMap { if case .renewPresence(let entries, let ids) = $0 { (entries, ids) } else { nil } }.first
        #expect(renewal?.1 == [bob.id] && renewal?.0.first?.entry.seenMillis == at(.seconds(32)).millis)
        // Gone from Redis: written whole; the answer brings the user's device count.
        node.on(.presenceRenewed(sessions: [bob.id], [(renewed: false, devices: 3)]), at: at(.seconds(33)))
        #expect(node.actions.contains { if case .setPresence(let entries) = $0 { entries.map(\.user) == ["bob"] } else { false } })
        #expect(bob.devices == 3)
    }

    /// A gap is listed in `missing` when a datagram above it first has to wait, then only
    /// every 200 ms: datagrams that wait meanwhile bring only the gaps above those looked at.
    @Test func aGapIsListedOnceAndThenEvery200Milliseconds() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        func listed() -> [[UInt64]] {
            node.sent(to: alice).compactMap { if case .missing(let missing) = $0 { missing.clientSeqs } else { nil } }
        }
        try node.send("x", to: "bob", from: alice, port: 4000, order: 3, at: at(.milliseconds(1)))
        #expect(listed() == [[1, 2]])
        try node.send("x", to: "bob", from: alice, port: 4000, order: 4, at: at(.milliseconds(2)))
        #expect(listed().isEmpty, "no new gap")
        try node.send("x", to: "bob", from: alice, port: 4000, order: 6, at: at(.milliseconds(3)))
        #expect(listed() == [[5]], "only the new gap")
        try node.send("x", to: "bob", from: alice, port: 4000, order: 7, at: at(.milliseconds(201)))
        #expect(listed() == [[1, 2, 5]], "200 ms after the full list, every gap again")
    }

    @Test func aSessionOverItsRateHearsOfItAtMostOnceASecond() throws {
        var node = Node.make(messagesPerSecond: 1, burst: 1)
        let alice = try node.online("alice", port: 4000)
        var errors = 0
        for order in 1...3 {
            try node.send("x", to: "bob", from: alice, port: 4000, order: UInt64(order), at: at(.milliseconds(Int64(order))))
            errors += node.sent(to: alice).filter { if case .error(let error) = $0 { error.code == .rateLimited } else { false } }.count
        }
        #expect(errors == 1)
        try node.send("x", to: "bob", from: alice, port: 4000, order: 4, at: at(.milliseconds(1500)))
        try node.send("x", to: "bob", from: alice, port: 4000, order: 5, at: at(.milliseconds(1501)))
        #expect(node.sent(to: alice).contains { if case .error(let error) = $0 { error.code == .rateLimited } else { false } })
    }

    @Test func aStoreShortOfReplicasWaitsForItsShardThenFailsAfterTheLimit() throws {
        var node = Node.make(minReplicas: 1)
        let alice = try node.online("alice", port: 4000)
        try node.send("hi", to: "bob", from: alice, port: 4000, order: 1)
        node.on(.due(.flushStores), at: at())
        let batch = try #require(node.batches.first)
        node.on(.stored(batch, .success([.replicasShort(online: 0)])))
        #expect(node.sent(to: alice).isEmpty && node.asked == [.replicaProbe])
        node.on(.due(.replicaProbe), at: at(.milliseconds(500)))
        #expect(node.actions.contains { if case .probeReplicas(Self.shard) = $0 { true } else { false } })
        node.on(.replicasProbed(Self.shard, .success(0)))
        #expect(node.asked.isEmpty)
        node.on(.due(.replicaProbe), at: at(.seconds(11)))
        #expect(node.actions.contains { if case .markFailed(_, .replicasUnavailable) = $0 { true } else { false } })
        guard case .failed(let failed)? = node.sent(to: alice).first else { Issue.record("not failed"); return }
        #expect(failed.code == .replicasUnavailable)
    }

    @Test func aShardWithItsReplicasBackLetsItsStoresGo() throws {
        var node = Node.make(minReplicas: 1)
        let alice = try node.online("alice", port: 4000)
        try node.send("hi", to: "bob", from: alice, port: 4000, order: 1)
        node.on(.due(.flushStores), at: at())
        let batch = try #require(node.batches.first)
        node.on(.stored(batch, .success([.replicasShort(online: 0)])))
        node.on(.due(.replicaProbe), at: at(.milliseconds(500)))
        node.on(.replicasProbed(Self.shard, .success(1)))
        #expect(node.asked == [.flushStores])
        node.on(.due(.flushStores), at: at(.milliseconds(501)))
        #expect(node.batches.first?.items.map(\.id) == ["m1"])
    }

    @Test func aStoppedEngineAsksForNoTimer() throws {
        var node = Node.make()
        let alice = try node.online("alice", port: 4000)
        let bob = try node.online("bob", port: 4001)
        node.on(.stopped)
        try node.send("hi", to: "bob", from: alice, port: 4000, order: 1)
        node.on(.due(.flushStores), at: at())
        let batch = try #require(node.batches.first)
        node.on(.stored(batch, .success([.stored(seq: 1, bytes: [9])])))
        #expect(node.datagrams(to: bob) == [.data])
        #expect(!node.asked.contains(.tick))
    }

    @Test func aFailedSyncIsReadAgainASecondLater() throws {
        var node = Node.make()
        let (bob, token) = node.open("bob")
        try node.datagram(.bind, token, from: bob, port: 4001)
        struct Outage: Error {}
        node.on(.inboxRead(session: bob.id, .sync, .failure(Outage())))
        let retry = node.actions.compactMap { if case .after(let delay, .read(bob.id, .sync)) = $0 { delay } else { nil } }
        #expect(retry == [.seconds(1)])
        node.on(.due(.read(session: bob.id, .sync)), at: at(.seconds(1)))
        #expect(node.actions.contains { if case .readInbox(bob.id, _, _, .sync) = $0 { true } else { false } })
    }
}

extension DeliveryEngineEventTests {
    func drops(_ node: Node, _ reason: String) -> Double {
        metricValue(node.engine.metrics.render(), "simp_datagrams_dropped_total{reason=\"\(reason)\"}")
    }

    /// PROTOCOL section 3: once bound, a BIND from the validated address is answered whatever
    /// its token; from another address it is dropped and counted, and answers nothing.
    @Test func aBoundSessionsBindIsAPathCheckFromItsAddressAndDroppedFromAnother() throws {
        var node = Node.make()
        let bob = try node.online("bob", port: 4001)
        try node.datagram(.bind, Array(repeating: 1, count: 16), from: bob, port: 4001)
        #expect(node.datagrams(to: bob) == [.pong] && node.sent(to: bob).count == 1)
        try node.datagram(.bind, Array(repeating: 1, count: 16), from: bob, port: 4999)
        #expect(node.actions.isEmpty)
        #expect(drops(node, "unvalidated_address") == 1)
    }

    @Test func aWrongTokenBeforeTheBindIsRefusedAndCounted() throws {
        var node = Node.make()
        let (bob, _) = node.open("bob")
        try node.datagram(.bind, Array(repeating: 1, count: 16), from: bob, port: 4001)
        guard case .error(let error)? = node.sent(to: bob).first else { Issue.record("no error"); return }
        #expect(error.code == .invalidToken && drops(node, "bad_bind_token") == 1)
        #expect(!bob.isBound)
    }
}
