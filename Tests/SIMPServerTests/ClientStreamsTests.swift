import Foundation
import NIOCore
import NIOPosix
import SIMPCore
import SIMPTestSupport
import Testing
@testable import SIMPClient

/// What an application holds of a client, against a real server: every consumer gets every
/// event, the connection's state follows a server restart, and a cancelled request returns at
/// once while the server's answer is held.
@Suite(.serialized) struct ClientStreamsTests {
    /// What a stream gave, readable while it runs.
    final class Collected<Element: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: [Element] = []
        var all: [Element] {
            lock.lock()
            defer { lock.unlock() }
            return stored
        }

        func append(_ element: Element) {
            lock.lock()
            stored.append(element)
            lock.unlock()
        }

        static func following(_ stream: AsyncStream<Element>) -> (Collected, Task<Void, Never>) {
            let collected = Collected()
            let task = Task {
                for await element in stream { collected.append(element) }
            }
            return (collected, task)
        }
    }

    static func texts(_ events: [ClientEvent]) -> [String] {
        events.compactMap { if case .message(let m) = $0 { m.text } else { nil } }
    }

    @Test func twoConsumersEachGetEveryEventAndTheStateFollowsARestart() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let alice = SIMPClient(configuration: cluster.clientConfiguration())
        let (states, statesTask) = Collected.following(alice.connectionStates())
        let (one, oneTask) = Collected.following(alice.events())
        let (two, twoTask) = Collected.following(alice.events())
        try await alice.connect(user: "alice", password: "pw-alice")
        let (bob, _) = try await cluster.connectedClient("bob")
        let sent = (1...30).map { "m\($0)" }
        for text in sent { _ = try await bob.send(to: "alice", text: text) }
        #expect(await eventually { Self.texts(one.all).count == sent.count && Self.texts(two.all).count == sent.count })
        #expect(Self.texts(one.all) == sent)
        #expect(Self.texts(two.all) == sent)
        #expect(one.all == two.all, "the same events, in the same order")

        try await cluster.restartServer()
        #expect(await eventually { states.all.count > 3 && states.all.last.map { if case .connected = $0 { true } else { false } } == true })
        let server = ServerAddress(host: "127.0.0.1", port: cluster.addresses.tcpPort)
        let seen = states.all
        #expect(Array(seen.prefix(3)) == [.disconnected, .connecting, .connected(server)])
        let between = seen.dropFirst(3).dropLast()
        #expect(!between.isEmpty && between.allSatisfy { if case .reconnecting = $0 { true } else { false } }, "\(seen)")
        guard case .reconnecting(1, _)? = between.first else {
            Issue.record("the first attempt is not said: \(seen)")
            return
        }
        #expect(seen.last == .connected(server))
        #expect(alice.connectionState == .connected(server))

        await alice.close()
        await bob.close()
        await statesTask.value
        await oneTask.value
        await twoTask.value
        #expect(states.all.last == .closed, "the streams end at close")
        await cluster.stop()
    }

    /// A consumer that reads nothing while 40 messages come holds only its buffer's worth,
    /// and is told how many it missed: every event the other consumer got, less those kept.
    @Test func aSlowConsumerStaysBoundedAndIsToldWhatItMissed() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let alice = SIMPClient(configuration: cluster.clientConfiguration())
        let slow = alice.events(bufferingNewest: 5)
        let (all, allTask) = Collected.following(alice.events())
        try await alice.connect(user: "alice", password: "pw-alice")
        let (bob, _) = try await cluster.connectedClient("bob")
        for index in 1...40 { _ = try await bob.send(to: "alice", text: "m\(index)") }
        #expect(await eventually { Self.texts(all.all).count == 40 })
        await alice.close()
        await allTask.value
        var read: [ClientEvent] = []
        for await event in slow { read.append(event) }
        let everything = all.all
        #expect(read.count == 6, "the count, then the 5 newest")
        #expect(read.first == .eventsDropped(count: everything.count - 5))
        #expect(Array(read.dropFirst()) == Array(everything.suffix(5)))
        await bob.close()
        await cluster.stop()
    }

    /// Redis stopped holds the server's answer to a history request (it would come as
    /// STORE_UNAVAILABLE after the server's Redis timeout, or as the client's own timeout).
    @Test func aCancelledRequestReturnsAtOnceAndIsForgotten() async throws {
        let cluster = try await TestCluster.start()
        let (alice, _) = try await cluster.connectedClient("alice")
        try await cluster.register("bob")
        let pid = try #require(cluster.redis.pid)
        kill(pid, SIGSTOP)
        let resumed = { _ = kill(pid, SIGCONT) }
        defer { resumed() }
        let asking = Task { () async throws -> [IncomingMessage] in try await alice.history(with: "bob") }
        #expect(await eventually { await alice.pendingRequests() == 1 }, "the request is on its way")
        asking.cancel()
        let result = await asking.result
        guard case .failure(let error) = result else {
            Issue.record("answered: \(result)")
            return
        }
        let failure = try #require(error as? ClientError)
        #expect(failure.isCancelled && failure.errorCode == .cancelled, "\(error)")
        #expect(await alice.pendingRequests() == 0, "forgotten")
        resumed()
        // The connection goes on: the next request is answered.
        #expect(try await alice.history(with: "bob").isEmpty)
        #expect(await alice.pendingRequests() == 0)
        await alice.close()
        await cluster.stop()
    }

    /// A server that takes connections and never answers: connect and register wait on it
    /// until cancelled.
    @Test func aCancelledConnectOrRegisterReturnsAtOnce() async throws {
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        defer { silent.close(promise: nil) }
        var configuration = ClientConfiguration(host: "127.0.0.1", port: try #require(silent.localAddress?.port))
        configuration.requestTimeout = .seconds(60)
        let client = SIMPClient(configuration: configuration)

        let connecting = Task { () async throws in try await client.connect(user: "alice", password: "pw") }
        #expect(await eventually { await client.pendingRequests() == 1 }, "the login is on its way")
        #expect(client.connectionState == .connecting)
        connecting.cancel()
        guard case .failure(let error) = await connecting.result else {
            Issue.record("connected to a silent server")
            return
        }
        #expect((error as? ClientError)?.isCancelled == true, "\(error)")
        #expect(client.connectionState == .disconnected)
        #expect(await eventually { await client.pendingRequests() == 0 }, "the attempt's connection is closed")

        let registering = Task { () async throws in try await client.register(user: "alice", password: "pw") }
        registering.cancel()
        guard case .failure(let refused) = await registering.result else {
            Issue.record("registered on a silent server")
            return
        }
        #expect((refused as? ClientError)?.isCancelled == true, "\(refused)")
        await client.close()
        #expect(client.connectionState == .closed)
    }
}

#if canImport(Observation)
@MainActor @Suite(.serialized) struct ClientModelTests {
    /// Polls `condition` on the main actor until it holds (at most 30 s).
    static func until(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<600 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return condition()
    }

    /// The model a UI shows: the connection's state, the local history's conversations (read
    /// again after a message), the latest events.
    @MainActor @Test func theModelFollowsTheClient() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-model-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = cluster.clientConfiguration()
        configuration.dataDirectory = directory
        let alice = SIMPClient(configuration: configuration)
        let model = SIMPClientModel(client: alice, recentLimit: 10)
        model.start()
        try await alice.connect(user: "alice", password: "pw-alice")
        let server = ServerAddress(host: "127.0.0.1", port: cluster.addresses.tcpPort)
        #expect(await Self.until { model.connectionState == .connected(server) })
        let (bob, _) = try await cluster.connectedClient("bob")
        _ = try await bob.send(to: "alice", text: "hi")
        #expect(await Self.until { model.conversations.first?.conversation == "bob" && model.conversations.first?.unreadCount == 1 })
        #expect(model.conversations.first?.lastMessage.text == "hi")
        #expect(model.recentEvents.contains(.connected(user: "alice")))
        #expect(model.recentEvents.count <= 10)
        await alice.close()
        #expect(await Self.until { model.connectionState == .closed })
        model.stop()
        await bob.close()
        await cluster.stop()
    }
}
#endif
