import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// One abusive client per finding of docs/SECURITY.md ("Abuse"), each while two other users
/// talk: their messages all arrive, once and in order, and the server's memory stays bounded.
/// Their latency, quiet and during the abuse, is printed here and measured where a figure
/// means something, in a benchmark (`simp-bench --receipt-flood`, `--inbox-flood`): asserted
/// in a test it only measured how busy the machine was (CI saw 28 ms against 5 quiet while
/// the same test gave 5 against 4 alone).
@Suite(.serialized) struct AbuseTests {
    /// 500 history requests for a long conversation, never read: the connection gets at most
    /// 2 answered at a time, stops being read once 1 MiB of answers wait, and is closed.
    @Test func aHistoryFloodThatIsNeverReadIsBoundedAndClosed() async throws {
        let node = try ServerNode(extra: ["--unread-grace", "2", "--metrics-port", "0"])
        defer { node.stop() }
        let talk = try await Conversation.start(on: node.server)
        let mallory = try await talk.client("mallory")
        for _ in 0..<300 { _ = try mallory.client.post(to: "bob", text: String(repeating: "x", count: 1000)) }
        #expect(await mallory.log.wait(timeout: .seconds(60)) { $0.delivered.count == 300 })
        let quiet = try await talk.latencies(20)
        let rssBefore = try residentKiB(node.server.process.pid)

        let peer = try RawPeer(tcpPort: node.server.tcpPort, udpPort: node.server.udpPort, receiveBuffer: 4096)
        _ = try peer.login("mallory", "pw-mallory")
        var history = Simp_HistoryRequest()
        history.peer = "bob"
        history.limit = 1000
        peer.writeRaw((0..<500).flatMap { peer.frame(Simp_Envelope(requestID: UInt64(10 + $0), .history(history))) })
        let during = try await talk.latencies(20)
        let closed = await eventually { try processMetric(node.server, limit: "output_backlog") >= 1 }
        #expect(closed, "the connection that does not read was closed")
        try await expectUnharmed("history flood", talk, quiet: quiet, during: during, server: node.server, rssBefore: rssBefore)
        await talk.close()
        await mallory.client.close()
    }

    /// 20,000 receipts and 20,000 pings from one connected user: the server reads them at the
    /// request rate (the rest waits in the peer's socket), slows the connection, never closes it.
    @Test func aControlFrameFloodIsSlowedWhileOthersTalk() async throws {
        let cluster = try await TestCluster.start { $0.limits.requestsPerSecond = 1_000; $0.limits.requestBurst = 1_000 }
        let talk = try await Conversation.start(cluster)
        let quiet = try await talk.latencies(20)
        try await cluster.register("mallory")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))
        var receipt = Simp_Receipt()
        receipt.upToSeq = 0
        let receipts = (0..<20_000).flatMap { _ in peer.frame(Simp_Envelope(.receipt(receipt))) }
        let pings = (0..<20_000).flatMap { n in
            var ping = Simp_Ping()
            ping.nonce = UInt64(n)
            return peer.frame(Simp_Envelope(requestID: 100, .ping(ping)))
        }
        let flood = FrameFlood(peer, receipts + pings)
        let during = try await talk.latencies(20)
        #expect(exceeded(cluster, "control_requests") >= 1, "the flood was slowed to the request rate")
        flood.stop()
        #expect(!flood.closedByServer, "a flood is slowed, not cut off")
        printLatency("receipt and ping flood", quiet, during)
        try await talk.expectAllDelivered()
        await talk.close()
        await cluster.stop()
    }

    /// 20,000 receipts each naming 64 missing seqs (about 1.4 MB) from a user with 64 messages
    /// waiting: every receipt is charged what it makes the node do (a unit per 4 seqs), and
    /// what the receipts get resent stays within the session's congestion window and pacing
    /// (each reported seq is a loss: queued to go again once, not once per receipt) and its
    /// data budget, while two others talk. Counted by request, this flood made the node resend
    /// 64 messages per receipt.
    @Test func aReceiptFloodAskingForResendsIsPacedByItsCost() async throws {
        let cluster = try await TestCluster.start()
        let talk = try await Conversation.start(cluster)
        let quiet = try await talk.latencies(20)
        try await cluster.register("mallory")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))
        // 64 messages wait for mallory, who confirms none of them.
        let carol = try await talk.client("carol")
        for k in 0..<64 { _ = try await carol.client.send(to: "mallory", text: "waiting #\(k)") }
        #expect(await carol.log.wait { $0.accepted.count == 64 })

        let resentBefore = cluster.metric("simp_retransmits_total")
        var receipt = Simp_Receipt()
        receipt.upToSeq = 0
        receipt.missing = Array(1...64)
        let flood = FrameFlood(peer, (0..<20_000).flatMap { _ in peer.frame(Simp_Envelope(.receipt(receipt))) })
        let start = ContinuousClock.now
        let during = try await talk.latencies(20)
        flood.stop()
        let seconds = Double((ContinuousClock.now - start).components.seconds) + 1
        let resent = cluster.metric("simp_retransmits_total") - resentBefore
        print("receipt flood: latency p50 \(median(quiet)) ms quiet, \(median(during)) ms during (p99 \(percentile(quiet, 0.99)) / \(percentile(during, 0.99)) ms); "
              + "\(Int(resent)) datagrams resent in \(seconds) s")
        #expect(exceeded(cluster, "control_requests") >= 1, "the flood was paced by its cost")
        #expect(cluster.metric("simp_congestion_events_total") >= 1, "the reported seqs were losses to the session's controller")
        // The budget (64 KiB a second and as a burst) over datagrams of at least 40 bytes, and
        // the retransmit timers' own resends of the 64 unconfirmed pushes.
        #expect(resent <= (seconds + 1) * 64 * 1024 / 40 + 64 * 20, "\(resent) datagrams resent")
        #expect(!flood.closedByServer, "a flood is slowed, not cut off")
        try await talk.expectAllDelivered()
        await carol.client.close()
        await talk.close()
        await cluster.stop()
    }

    /// One user's requests are paced over all of its connections together: two connections,
    /// each far under its own rate, together over the user's, are slowed; every ping is answered.
    @Test func aUsersRequestsArePacedOverAllItsConnections() async throws {
        let cluster = try await TestCluster.start {
            $0.limits.userRequestsPerSecond = 100
            $0.limits.userRequestBurst = 100
        }
        try await cluster.register("mallory")
        let peers = try (0..<2).map { _ in try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort) }
        for peer in peers {
            _ = try peer.login("mallory", "pw-mallory")
            peer.writeRaw((1...150).flatMap { n in
                var ping = Simp_Ping()
                ping.nonce = UInt64(n)
                return peer.frame(Simp_Envelope(requestID: 100, .ping(ping)))
            })
        }
        for peer in peers {
            var pongs = 0
            while pongs < 150, let envelope = try peer.read() {
                if case .pong = envelope.body { pongs += 1 }
            }
            #expect(pongs == 150, "every ping answered, late rather than never")
        }
        #expect(exceeded(cluster, "control_requests") >= 1, "300 requests over a user's burst of 100 were slowed")
        await cluster.stop()
    }

    /// 200 connections that begin a frame and never finish it, one that announces a frame
    /// too large for a connection that has not logged in, and one that sends nothing: each
    /// is told why and closed; the server's memory stays bounded.
    @Test func slowAndSilentConnectionsAreClosedAtTheirDeadlines() async throws {
        let node = try ServerNode(extra: ["--frame-deadline", "1", "--login-deadline", "3", "--max-conns-per-ip", "1000",
                                          "--metrics-port", "0"])
        defer { node.stop() }
        let talk = try await Conversation.start(on: node.server)
        let quiet = try await talk.latencies(20)
        let rssBefore = try residentKiB(node.server.process.pid)
        let port = node.server.tcpPort, udp = node.server.udpPort

        let slow = try (0..<200).map { _ in try RawPeer(tcpPort: port, udpPort: udp) }
        for peer in slow { peer.writeRaw([0, 0, 0x0F, 0xA0] + [UInt8](repeating: 0x0A, count: 100)) }
        let big = try RawPeer(tcpPort: port, udpPort: udp)
        big.writeRaw([0, 0, 0xEA, 0x60] + [UInt8](repeating: 0, count: 1000))
        let silent = try RawPeer(tcpPort: port, udpPort: udp)
        let during = try await talk.latencies(20)

        let bigError = try big.read()
        #expect(bigError?.error.code == .frameTooLarge, "a 60,000-byte frame before login: \(String(describing: bigError))")
        for peer in slow {
            let error = try peer.read()
            #expect(error?.error.code == .malformedFrame && peer.isClosedByServer(), "\(String(describing: error))")
        }
        #expect(try processMetric(node.server, limit: "frame_deadline") == 200)
        let silentError = try silent.read()
        #expect(silentError?.error.code == .notAuthenticated && silent.isClosedByServer())
        #expect(try processMetric(node.server, limit: "login_deadline") >= 1)

        try await expectUnharmed("slow connections", talk, quiet: quiet, during: during, server: node.server, rssBefore: rssBefore)
        await talk.close()
    }

    /// 300 logins for names that do not exist, from one address on 30 connections, and a
    /// sender posting 3,000 messages to an absent user (past its share of that inbox), while
    /// alice and bob talk.
    @Test func aLoginFloodAndAnInboxFillerWhileOthersTalk() async throws {
        let node = try ServerNode(extra: ["--metrics-port", "0", "--max-registrations-per-ip", "100"])
        defer { node.stop() }
        let talk = try await Conversation.start(on: node.server)
        let filler = try await talk.client("mallory")
        let carol = SIMPClient(configuration: talk.configuration)
        try await carol.register(user: "carol", password: "pw-carol")
        let quiet = try await talk.latencies(20)
        let rssBefore = try residentKiB(node.server.process.pid)

        let floods = try (0..<30).map { _ in try RawPeer(tcpPort: node.server.tcpPort, udpPort: node.server.udpPort, source: "127.0.0.2") }
        for (c, flood) in floods.enumerated() {
            flood.writeRaw((1...10).flatMap { i in
                var login = Simp_LoginRequest()
                login.user = "ghost\(c)x\(i)"
                login.password = "guess"
                return flood.frame(Simp_Envelope(requestID: UInt64(i), .login(login)))
            })
        }
        for n in 0..<3_000 { _ = try filler.client.post(to: "carol", text: "fill \(n)") }
        let during = try await talk.latencies(20)

        #expect(await filler.log.wait(timeout: .seconds(60)) { $0.accepted.count + $0.failed.count == 3_000 })
        #expect(filler.log.accepted.count == 2_500, "the filler's share of carol's inbox")
        // At least once each: a resend that crossed the refusal is refused (and counted) again.
        #expect(try processMetric(node.server, limit: "inbox_share") >= 500)
        for flood in floods {
            var answers = 0
            while answers < 10, let envelope = try flood.read() {
                if case .error = envelope.body, envelope.requestID != 0 { answers += 1 }
            }
            #expect(answers == 10, "every login of the flood answered")
        }
        try await expectUnharmed("login flood and inbox filler", talk, quiet: quiet, during: during, server: node.server,
                                 rssBefore: rssBefore)
        await talk.close()
        await filler.client.close()
    }

    /// One sender cannot fill a recipient's inbox: past its share it gets INBOX_SHARE_FULL,
    /// others still reach the recipient, and once the recipient reads, the sender may send again.
    @Test func oneSenderGetsOnlyItsShareOfAnInbox() async throws {
        let cluster = try await TestCluster.start { $0.inboxShare = 20 }
        try await cluster.register("bob")
        let (mallory, malloryLog) = try await cluster.connectedClient("mallory")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        for n in 0..<30 { _ = try mallory.post(to: "bob", text: "spam \(n)") }
        #expect(await malloryLog.wait { $0.accepted.count + $0.failed.count == 30 })
        #expect(malloryLog.accepted.count == 20)
        #expect(malloryLog.failed.count == 10 && malloryLog.failed.allSatisfy { $0.reason.contains("not confirmed") })
        #expect(exceeded(cluster, "inbox_share") >= 10, "each refusal counted (a resend that crossed it, again)")
        let fromAlice = try await alice.send(to: "bob", text: "hello bob")
        #expect(await aliceLog.wait { $0.accepted == [fromAlice] })

        let (bob, bobLog) = try await cluster.connectedClient("bob", register: false)
        #expect(await bobLog.wait { $0.messages.count == 21 })
        #expect(await malloryLog.wait { $0.delivered.count == 20 })
        let later = try await mallory.send(to: "bob", text: "after bob read")
        #expect(await malloryLog.wait { $0.accepted.contains(later) })
        #expect(await bobLog.wait { $0.messages.last?.id == later })
        for client in [mallory, alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// A delivery query is answered only about the asker's own messages: mallory cannot learn
    /// whether bob has read alice's message by naming it.
    @Test func aDeliveryQueryAnswersOnlyTheSender() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, _) = try await cluster.connectedClient("bob")
        let (mallory, malloryLog) = try await cluster.connectedClient("mallory")
        let fromAlice = try await alice.send(to: "bob", text: "private")
        let fromMallory = try await mallory.send(to: "bob", text: "hi")
        #expect(await aliceLog.wait { $0.delivered == [fromAlice] })
        #expect(await malloryLog.wait { $0.delivered == [fromMallory] })
        let seqs = aliceLog.all.compactMap { if case .accepted(_, _, let seq) = $0 { return seq } else { return nil } }
            + malloryLog.all.compactMap { if case .accepted(_, _, let seq) = $0 { return seq } else { return nil } }

        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))
        var query = Simp_DeliveryQuery()
        for (id, seq) in zip([fromAlice, fromMallory], seqs) {
            var item = Simp_Accepted()
            item.messageID = id
            item.toUser = "bob"
            item.seq = seq
            query.messages.append(item)
        }
        peer.writeRaw(peer.frame(Simp_Envelope(.query(query))))
        var answered: [String] = []
        while let envelope = try peer.read() {
            guard case .delivered(let delivered) = envelope.body else { continue }
            answered.append(delivered.messageID)
            if delivered.messageID == fromMallory { break }
        }
        // Both answers would have gone out together: one Redis round trip, one flush.
        #expect(answered == [fromMallory])
        for client in [alice, bob, mallory] { await client.close() }
        await cluster.stop()
    }
}

// MARK: helpers

/// alice and bob, talking one message at a time, timing each from send to arrival.
private struct Conversation {
    let configuration: ClientConfiguration
    let alice: SIMPClient
    let bob: SIMPClient
    let bobLog: EventLog
    let aliceLog: EventLog
    private let sent = SentIDs()

    static func start(_ cluster: TestCluster) async throws -> Conversation {
        try await start(cluster.clientConfiguration())
    }

    static func start(on server: ServerProcess) async throws -> Conversation {
        var config = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
        config.requestTimeout = .seconds(10)
        return try await start(config)
    }

    private static func start(_ configuration: ClientConfiguration) async throws -> Conversation {
        let pair = try await [connect("alice", configuration), connect("bob", configuration)]
        return Conversation(configuration: configuration, alice: pair[0].client, bob: pair[1].client,
                            bobLog: pair[1].log, aliceLog: pair[0].log)
    }

    private static func connect(_ user: String, _ configuration: ClientConfiguration) async throws -> (client: SIMPClient, log: EventLog) {
        let client = SIMPClient(configuration: configuration)
        let log = EventLog(client)
        try await client.register(user: user, password: "pw-\(user)")
        try await client.connect(user: user, password: "pw-\(user)")
        return (client, log)
    }

    func client(_ user: String) async throws -> (client: SIMPClient, log: EventLog) {
        try await Self.connect(user, configuration)
    }

    /// Send-to-arrival times of `count` messages sent one after the other, in ms.
    func latencies(_ count: Int) async throws -> [Double] {
        var times: [Double] = []
        for _ in 0..<count {
            let start = Date()
            let id = try await alice.send(to: "bob", text: "ping \(sent.count)")
            sent.append(id)
            guard await bobLog.wait(timeout: .seconds(30), until: { $0.arrivalTimes[id] != nil }),
                  let arrival = bobLog.arrivalTimes[id] else {
                Issue.record("message \(id) did not arrive")
                continue
            }
            times.append(arrival.timeIntervalSince(start) * 1000)
        }
        return times
    }

    func expectAllDelivered() async throws {
        let ids = sent.all
        #expect(await aliceLog.wait { Set($0.delivered) == Set(ids) })
        #expect(bobLog.messages.filter { $0.from == "alice" }.map(\.id) == ids, "every message once, in order")
        #expect(aliceLog.failed.isEmpty)
    }

    func close() async {
        await alice.close()
        await bob.close()
    }
}

private final class SentIDs: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [String] = []
    func append(_ id: String) { lock.withLock { ids.append(id) } }
    var all: [String] { lock.withLock { ids } }
    var count: Int { all.count }
}


/// What the abuse must leave intact: the conversation's latency and messages, and the
/// server's memory (under 64 MiB of growth).
private func expectUnharmed(_ what: String, _ talk: Conversation, quiet: [Double], during: [Double], server: ServerProcess,
                            rssBefore: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let rssAfter = try residentKiB(server.process.pid)
    printLatency(what, quiet, during)
    print("\(what): RSS \(rssBefore / 1024) -> \(rssAfter / 1024) MiB")
    #expect(rssAfter - rssBefore < 64 * 1024, "server memory grew by \(rssAfter - rssBefore) KiB", sourceLocation: sourceLocation)
    try await talk.expectAllDelivered()
}

private func printLatency(_ what: String, _ quiet: [Double], _ during: [Double]) {
    print("\(what): latency p50 \(median(quiet)) ms quiet, \(median(during)) ms during")
}

private func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .infinity }
    let sorted = values.sorted()
    return (sorted[sorted.count / 2] * 10).rounded() / 10
}

private func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return .infinity }
    let sorted = values.sorted()
    return (sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 10).rounded() / 10
}

private func exceeded(_ cluster: TestCluster, _ limit: String) -> Double {
    cluster.metric(#"simp_limit_exceeded_total{limit="\#(limit)"}"#)
}

/// A limit counter of a server process, read from its /metrics endpoint.
private func processMetric(_ server: ServerProcess, limit: String) throws -> Double {
    let text = try httpExchange(port: try server.metricsPort(), path: "/metrics")
    return metricValue(text, #"simp_limit_exceeded_total{limit="\#(limit)"}"#)
}

