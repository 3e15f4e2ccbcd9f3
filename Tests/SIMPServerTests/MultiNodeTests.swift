import Foundation
import SIMPClient
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// Several simp-server processes on one Redis: users on different nodes talk with the
/// guarantees of one node (delivered once, in order, a delivered receipt at the sender).
@Suite(.serialized) struct MultiNodeTests {
    /// "FROM>TO#K": the k-th message from FROM to TO.
    func text(_ from: String, _ to: String, _ k: Int) -> String { "\(from)>\(to)#\(k)" }

    /// Each conversation's texts as received, in arrival order.
    func received(_ user: NodeUser) -> [String: [Int]] {
        var byConversation: [String: [Int]] = [:]
        for message in user.log.messages {
            guard let hash = message.text.firstIndex(of: "#"), let k = Int(message.text[message.text.index(after: hash)...]) else { continue }
            byConversation[String(message.text[..<hash]), default: []].append(k)
        }
        return byConversation
    }

    @Test func usersOnTwoNodesTalkBothWays() async throws {
        let nodes = try Deployment(nodes: 2)
        defer { nodes.stop() }
        let alice = try await nodes.connect("alice", startingAt: 0)
        let bob = try await nodes.connect("bob", startingAt: 1)
        try await nodes.waitForPresence(of: ["alice", "bob"])
        for k in 0..<100 {
            _ = try await alice.client.send(to: "bob", text: text("alice", "bob", k))
            _ = try await bob.client.send(to: "alice", text: text("bob", "alice", k))
        }
        #expect(await bob.log.wait { $0.messages.count >= 100 })
        #expect(await alice.log.wait { $0.messages.count >= 100 })
        #expect(received(bob) == ["alice>bob": Array(0..<100)])
        #expect(received(alice) == ["bob>alice": Array(0..<100)])
        // Each sender hears "delivered" from the other node, for every message.
        #expect(await alice.log.wait { Set($0.delivered).count == 100 })
        #expect(await bob.log.wait { Set($0.delivered).count == 100 })
        await alice.client.close()
        await bob.client.close()
    }

    /// bob's phone on node 1 and laptop on node 2: both get alice's messages, each shows what
    /// the other sent, alice hears `delivered` once per message, and the receipts of what the
    /// phone sent reach the laptop through its node.
    @Test func aUsersDevicesOnTwoNodes() async throws {
        let nodes = try Deployment(nodes: 2)
        defer { nodes.stop() }
        let alice = try await nodes.connect("alice", startingAt: 0)
        let phone = try await nodes.connect("bob", startingAt: 0) { $0.device = "phone" }
        try await nodes.waitForPresence(of: ["alice", "bob"])
        var config = nodes.configuration(startingAt: 1)
        config.device = "laptop"
        let laptop = SIMPClient(configuration: config)
        let laptopLog = EventLog(laptop)
        try await laptop.connect(user: "bob", password: "pw-bob")
        #expect(nodes.node(of: laptop.connectedServer) == 1)
        // The laptop's CONNECT tells node 1 that bob has two devices now.
        #expect(await eventually { (try? nodes.redis.command(["HLEN", "simp:{bob}:presence"]))?.contains(":2") == true })

        let toBob = try await sendAll(alice.client, to: "bob", prefix: "a", count: 50)
        let fromPhone = try await sendAll(phone.client, to: "alice", prefix: "p", count: 50)
        #expect(await phone.log.wait { $0.messages.count >= 50 })
        #expect(await laptopLog.wait { $0.messages.count >= 100 })
        expectExactlyOnceInOrder(received: phone.log.messages, sentIDs: toBob, from: "alice", prefix: "a")
        expectExactlyOnceInOrder(received: laptopLog.messages, sentIDs: toBob, from: "alice", prefix: "a")
        #expect(laptopLog.messages.filter { $0.from == "bob" }.map(\.id) == fromPhone, "the phone's messages, on the laptop")
        #expect(await alice.log.wait { Set($0.delivered).isSuperset(of: toBob) && $0.messages.count >= 50 })
        #expect(alice.log.delivered.count == Set(alice.log.delivered).count, "delivered once per message")
        #expect(await laptopLog.wait { Set($0.delivered).isSuperset(of: fromPhone) }, "receipts of the phone's messages")
        for client in [alice.client, phone.client, laptop] { await client.close() }
    }

    /// On one Redis, and on a Redis Cluster of 3 masters with a replica each.
    @Test(arguments: [false, true])
    func thirtyUsersOnThreeNodesExchangeThreeThousandMessages(onACluster cluster: Bool) async throws {
        let nodes = try Deployment(nodes: 3, cluster: cluster)
        defer { nodes.stop() }
        var users: [NodeUser] = []
        for index in 0..<30 { users.append(try await nodes.connect("user\(index)", startingAt: index % 3)) }
        try await nodes.waitForPresence(of: users.map(\.name))

        var generator = SystemRandomNumberGenerator()
        var sent: [String: Int] = [:]  // conversation -> messages sent
        var sentBy: [String: Int] = [:]
        for _ in 0..<3_000 {
            let from = users.randomElement(using: &generator)!
            var to = users.randomElement(using: &generator)!
            while to.name == from.name { to = users.randomElement(using: &generator)! }
            let conversation = "\(from.name)>\(to.name)"
            let k = sent[conversation, default: 0]
            sent[conversation] = k + 1
            sentBy[from.name, default: 0] += 1
            _ = try await from.client.send(to: to.name, text: text(from.name, to.name, k))
        }

        for user in users {
            let expected = sent.filter { $0.key.hasSuffix(">\(user.name)") }.mapValues { Array(0..<$0) }
            let total = expected.values.reduce(0) { $0 + $1.count }
            #expect(await user.log.wait(timeout: .seconds(60)) { $0.messages.count >= total }, "\(user.name)")
            #expect(received(user) == expected, "\(user.name): once each, in order per conversation")
        }
        for user in users {
            let count = sentBy[user.name, default: 0]
            #expect(await user.log.wait(timeout: .seconds(60)) { Set($0.delivered).count == count },
                    "\(user.name) heard delivered for \(Set(user.log.delivered).count) of \(count)")
            #expect(user.log.failed.isEmpty)
        }
        for user in users { await user.client.close() }
    }
}

/// A node's claim on its id: one live node per id; a killed node's id is free again within
/// the record's lifetime, and a stopped one's at once.
@Suite(.serialized) struct NodeIDTests {
    func start(_ redis: RedisServerProcess, _ id: String) throws -> ChildProcess {
        try ChildProcess(try productPath("simp-server"),
                         ["--port", "0", "--udp-port", "0", "--redis", redis.url, "--node-id", id, "--scrypt-rounds", "1024", "--min-password-length", "1",
                          "--e2e", "optional"])
    }

    func ready(_ process: ChildProcess) -> Bool {
        process.waitForLine(timeout: 20) { $0.hasPrefix("simp-server listening") } != nil
    }

    @Test func aSecondNodeWithTheSameIDRefusesToStart() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let first = try start(redis, "node-a")
        #expect(ready(first))
        let second = try start(redis, "node-a")
        #expect(second.waitForExit(timeout: 20) == 1)
        #expect(second.stderr.contains("node id node-a is in use by a running simp-server on this Redis"), "\(second.stderr)")
        let other = try start(redis, "node-b")
        #expect(ready(other))
        for process in [first, other] {
            process.signal(SIGTERM)
            #expect(process.waitForExit(timeout: 10) == 0)
        }
    }

    @Test func aKilledNodesIDIsFreeAgainAndAStoppedOnesAtOnce() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let killed = try start(redis, "node-a")
        #expect(ready(killed))
        killed.signal(SIGKILL)
        _ = killed.waitForExit(timeout: 10)
        let successor = try start(redis, "node-a")
        #expect(ready(successor), "\(successor.stderr)")
        #expect(successor.stderr.contains("node id node-a is held in Redis; waiting"))

        successor.signal(SIGTERM)
        #expect(successor.waitForExit(timeout: 10) == 0)
        #expect(try redis.command(["EXISTS", "simp:node:node-a"]) == ":0\r\n")
        let next = try start(redis, "node-a")
        #expect(ready(next))
        #expect(!next.stderr.contains("is held in Redis"))
        next.signal(SIGTERM)
        _ = next.waitForExit(timeout: 10)
    }

    /// A renewal shows as more time left than a moment ago; only running down means no one renews.
    @Test func verdictsFromTwoConsecutiveReadings() {
        let held = NodeRecordReading(holder: "t1", millisLeft: 2_500)
        #expect(NodeIDCheck.verdict(previous: held, now: .init(holder: nil, millisLeft: -2)) == .free)
        #expect(NodeIDCheck.verdict(previous: held, now: .init(holder: "t1", millisLeft: 2_300)) == .wait)
        #expect(NodeIDCheck.verdict(previous: held, now: .init(holder: "t1", millisLeft: 2_900)) == .inUse)
        #expect(NodeIDCheck.verdict(previous: held, now: .init(holder: "t2", millisLeft: 100)) == .inUse)
    }
}
