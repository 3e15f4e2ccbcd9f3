import Foundation
import NIOCore
@_spi(NIO) import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Clients given every node of a deployment: when the node they are on is killed, they move
/// to another one by themselves, and nothing accepted is lost or shown twice.
@Suite(.serialized) struct FailoverTests {
    /// On one Redis, and on a Redis Cluster of 3 masters with a replica each.
    @Test(arguments: [false, true])
    func clientsOfAKilledNodeMoveToTheOthersAndLoseNothing(onACluster cluster: Bool) async throws {
        let deployment = try Deployment(nodes: 3, cluster: cluster)
        defer { deployment.stop() }
        var users: [NodeUser] = []
        for index in 0..<10 { users.append(try await deployment.connect("fo\(index)", startingAt: index % 3)) }
        try await deployment.waitForPresence(of: users.map(\.name))
        let victims = users.filter { deployment.node(of: $0.client.connectedServer) == 0 }.map(\.name)
        #expect(victims.count == 4, "users 0, 3, 6, 9 start on node-1")

        var traffic = RandomTraffic(users)
        for n in 0..<400 {
            if n == 150 {
                deployment.servers[0].process.signal(SIGKILL)
                _ = deployment.servers[0].process.waitForExit(timeout: 5)
            }
            try await traffic.send(n)
        }

        // Every message reaches its recipient and every sender hears "delivered" (after a
        // failover a notice may be lost; the sender's delivery query catches up).
        for user in users {
            let expected = traffic.sent.filter { $0.key.hasSuffix(">\(user.name)") }.values.reduce(0) { $0 + $1.count }
            #expect(await user.log.wait(timeout: .seconds(60)) { Set($0.messages.map(\.id)).count >= expected }, "\(user.name) received")
        }
        #expect(await traffic.waitForEveryFate(timeout: .seconds(60)) == [], "senders that did not hear every message's fate")

        let byName = Dictionary(uniqueKeysWithValues: users.map { ($0.name, $0) })
        let result = traffic.tally("3 nodes\(cluster ? " on a Redis Cluster" : ""), node-1 killed -9 mid-stream, clients fail over")
        if ProcessInfo.processInfo.environment["SIMP_FAILOVER_DEBUG"] != nil {
            for user in users {
                var seen: [String: IncomingMessage] = [:]
                for m in user.log.messages {
                    if let first = seen[m.id] { print("DUP to \(user.name): \(first.text)@\(first.seq) again @\(m.seq) victims=\(victims)") }
                    seen[m.id] = m
                }
                print("\(user.name) events: \(user.log.all.filter { if case .message = $0 { false } else if case .accepted = $0 { false } else if case .delivered = $0 { false } else { true } })")
                print("\(user.name) seqs: \(user.log.messages.map(\.seq))")
            }
        }
        #expect(result.sent == 400)
        #expect(result.lost == 0)
        #expect(result.duplicates == 0)
        #expect(result.orderViolations == 0)
        #expect(result.failed == 0)
        #expect(result.unsettled == 0)

        // The killed node's users are on the others now, as their clients and Redis say.
        let moved = victims.filter { name in
            let now = deployment.node(of: byName[name]!.client.connectedServer)
            let presence = deployment.presenceNode(of: name)
            return now != nil && now != 0 && presence != nil && presence != "node-1"
        }
        print("switched node: \(moved.count) of \(victims.count) on the killed node")
        #expect(moved.count == victims.count)
        #expect(moved.count > 0)
        for name in victims {
            let events = byName[name]!.log.all
            #expect(events.contains { if case .disconnected = $0 { true } else { false } }, "\(name) saw its node go")
            #expect(events.filter { if case .connected = $0 { true } else { false } }.count >= 2, "\(name) connected again")
        }
        // Nobody else had a reason to move.
        for user in users where !victims.contains(user.name) {
            #expect(!user.log.all.contains { if case .disconnected = $0 { true } else { false } }, "\(user.name) stayed")
        }
        for user in users { await user.client.close() }
    }

    @Test func connectSkipsADeadNodeAndRegistersOnTheNext() async throws {
        let deployment = try Deployment(nodes: 2)
        defer { deployment.stop() }
        deployment.servers[0].process.signal(SIGKILL)
        _ = deployment.servers[0].process.waitForExit(timeout: 5)
        let client = SIMPClient(configuration: deployment.configuration(startingAt: 0))
        let log = EventLog(client)
        try await client.register(user: "skipper", password: "pw")
        try await client.connect(user: "skipper", password: "pw")
        #expect(deployment.node(of: client.connectedServer) == 1)
        #expect(await log.wait { $0.all.contains(.connected(user: "skipper")) })
        await client.close()
    }

    /// A host that does not answer at all costs the connect timeout, not the request timeout:
    /// with an hour's request timeout, only the connect timeout lets the test end in its limit.
    @Test(.timeLimit(.minutes(1))) func aNodeThatNeverAnswersCostsTheConnectTimeout() async throws {
        let silent = try SilentListener()
        let deployment = try Deployment(nodes: 1)
        defer { deployment.stop() }
        var config = deployment.configuration(startingAt: 0)
        config.servers.insert(ServerAddress(host: "127.0.0.1", port: silent.port), at: 0)
        config.connectTimeout = .milliseconds(500)
        config.requestTimeout = .seconds(3600)
        let client = SIMPClient(configuration: config)
        try await client.register(user: "patient", password: "pw")
        try await client.connect(user: "patient", password: "pw")
        #expect(client.connectedServer == config.servers[1])
        await client.close()
    }

    @Test func connectNamesEveryServerWhenNoneAnswers() async throws {
        let ports = try (0..<2).map { _ in try freeTCPPort() }
        var config = ClientConfiguration(servers: ports.map { ServerAddress(host: "127.0.0.1", port: $0) })
        config.connectTimeout = .seconds(1)
        let client = SIMPClient(configuration: config)
        do {
            try await client.connect(user: "nobody", password: "pw")
            Issue.record("connected to nothing")
        } catch {
            #expect(error.code == nil)
            #expect(error.message == "no server could be reached: cannot reach 127.0.0.1:\(ports[0]): connection refused; "
                + "cannot reach 127.0.0.1:\(ports[1]): connection refused")
        }
        await client.close()
    }

    @Test func aRefusalIsNotTriedOnTheOtherNodesNorRepeatedInTheBackground() async throws {
        let deployment = try Deployment(nodes: 2)
        defer { deployment.stop() }
        // Events recorded on the client's loop, as they happen: once `connect` has thrown,
        // a reconnect it started would already be in the log.
        let log = EventLog()
        let client = SIMPClient(configuration: deployment.configuration(startingAt: 0)) { log.record($0) }
        try await client.register(user: "refused", password: "right")
        do {
            try await client.connect(user: "refused", password: "wrong")
            Issue.record("logged in with a wrong password")
        } catch {
            #expect(error.code == .invalidCredentials)
            #expect(!error.message.contains("no server could be reached"))
        }
        try await client.eventLoop.submit {}.get()
        #expect(log.all.isEmpty, "no reconnect in the background after connect threw: \(log.all)")
        await client.close()
    }

    /// A node that hangs (SIGSTOP) keeps its sockets open: its clients notice the silence by
    /// the heartbeat (three beats) and move on, and what they sent meanwhile is delivered.
    @Test func aFrozenNodeIsLeftWhenItsHeartbeatStops() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let nodes = try (1...2).map { index in
            try ServerProcess(redisURL: redis.url, extra: ["--node-id", "node-\(index)", "--heartbeat", "0.5"])
        }
        defer {
            for node in nodes {
                node.process.signal(SIGKILL)
                _ = node.process.waitForExit(timeout: 10)
            }
        }
        let addresses = nodes.map { ServerAddress(host: "127.0.0.1", port: $0.tcpPort) }
        func client(_ servers: [ServerAddress]) -> SIMPClient {
            var config = ClientConfiguration(servers: servers)
            config.reconnectBase = .milliseconds(50)
            config.reconnectCap = .milliseconds(500)
            config.requestTimeout = .seconds(2)
            return SIMPClient(configuration: config)
        }
        let alice = client(addresses)
        let bob = client(addresses.reversed())
        let aliceLog = EventLog(alice)
        let bobLog = EventLog(bob)
        for (user, c) in [("frozen-a", alice), ("frozen-b", bob)] {
            try await c.register(user: user, password: "pw")
            try await c.connect(user: user, password: "pw")
        }
        #expect(alice.connectedServer == addresses[0])
        nodes[0].process.signal(SIGSTOP)
        var ids: [String] = []
        for k in 0..<20 { ids.append(try await alice.send(to: "frozen-b", text: "m\(k)")) }
        #expect(await aliceLog.wait { _ in alice.connectedServer == addresses[1] }, "\(aliceLog.all)")
        #expect(await bobLog.wait { $0.messages.count >= 20 })
        #expect(bobLog.messages.map(\.text) == (0..<20).map { "m\($0)" })
        #expect(await aliceLog.wait { Set($0.delivered) == Set(ids) })
        nodes[0].process.signal(SIGCONT)
        await alice.close()
        await bob.close()
    }

    /// Each node's certificate names only its own host: the failover works only if the name
    /// checked follows the server tried.
    @Test func theTLSNameFollowsTheServerTried() async throws {
        let first = try DevCertificate(names: "IP:127.0.0.1")
        let second = try DevCertificate(names: "DNS:localhost")
        let bothCAs = first.directory.appendingPathComponent("both.pem")
        try (String(contentsOfFile: first.certificate, encoding: .utf8) + String(contentsOfFile: second.certificate, encoding: .utf8))
            .write(to: bothCAs, atomically: true, encoding: .utf8)
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let nodes = try [(first, "node-1"), (second, "node-2")].map { certificate, id in
            try ServerProcess(redisURL: redis.url, extra: ["--node-id", id, "--tls-cert", certificate.certificate, "--tls-key", certificate.key])
        }
        defer {
            for node in nodes where node.process.waitForExit(timeout: 0) == nil {
                node.process.signal(SIGTERM)
                _ = node.process.waitForExit(timeout: 10)
            }
        }
        var config = ClientConfiguration(servers: [ServerAddress(host: "127.0.0.1", port: nodes[0].tcpPort),
                                                   ServerAddress(host: "localhost", port: nodes[1].tcpPort)])
        config.tls = ClientTLS(caFile: bothCAs.path)
        config.reconnectBase = .milliseconds(50)
        config.reconnectCap = .milliseconds(500)
        let client = SIMPClient(configuration: config)
        let log = EventLog(client)
        try await client.register(user: "tlsuser", password: "pw")
        try await client.connect(user: "tlsuser", password: "pw")
        #expect(client.connectedServer == config.servers[0])
        nodes[0].process.signal(SIGKILL)
        _ = nodes[0].process.waitForExit(timeout: 5)
        #expect(await log.wait { _ in client.connectedServer == config.servers[1] }, "\(log.all)")
        await client.close()
    }

    /// Found by the failover test: the store script took a recipient's first store on a node
    /// where it has no session for the first store after a Redis restart and left `base` (0)
    /// in its numbering record; the recipient's next CONNECT then moved the messages it had
    /// already received past its lastSeq (Scripts.renumber), and it was shown them again.
    /// CONNECT now records Redis' run id, so the store takes the user as checked.
    @Test func aFirstStoreFromAnotherNodeDoesNotRenumberSeenMessages() async throws {
        let deployment = try Deployment(nodes: 2)
        defer { deployment.stop() }
        let alice = SIMPClient(configuration: deployment.configuration(startingAt: 0))
        try await alice.register(user: "alice", password: "pw")
        try await alice.register(user: "bob", password: "pw")
        // Bob is on node-2 and takes the pushes without confirming them (a receipt lost with
        // its node, say).
        let bob = try RawPeer(tcpPort: deployment.servers[1].tcpPort, udpPort: deployment.servers[1].udpPort)
        try bob.connectAndBind(token: try bob.login("bob", "pw"))
        try await deployment.waitForPresence(of: ["bob"])
        let log = EventLog(alice)
        try await alice.connect(user: "alice", password: "pw")
        for k in 1...3 { _ = try await alice.send(to: "bob", text: "m\(k)") }
        #expect(await log.wait { $0.accepted.count == 3 })
        // Bob's client has seen seqs 1-3 and connects again, to node-1.
        let again = try RawPeer(tcpPort: deployment.servers[0].tcpPort, udpPort: deployment.servers[0].udpPort)
        var connect = Simp_ConnectRequest()
        connect.token = try again.login("bob", "pw")
        connect.lastSeq = 3
        guard case .connected? = try again.request(2, .connect(connect))?.body else { throw TestSupportError("connect refused") }
        let seq = try deployment.redis.command(["GET", "simp:{bob}:seq"])
        #expect(seq == "$1\r\n3\r\n", "the messages bob saw were numbered again past his lastSeq")
        await alice.close()
    }

}

/// A TCP port whose accept queue is full: the kernel drops further SYNs, as a host that is
/// down would, so a connect to it waits until its own timeout.
final class SilentListener {
    let port: Int
    private let listener: Int32
    private let filler: Int32

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        self.filler = filler
        var address = RawPeer.loopback(0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 0) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        guard bound else { throw TestSupportError("cannot listen") }
        // The one connection a backlog of 0 admits; never accepted.
        var target = RawPeer.loopback(port)
        let connected = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestSupportError("cannot fill the accept queue") }
    }

    deinit {
        close(filler)
        close(listener)
    }
}
