import Foundation
import SIMPClient
import Testing

/// `SIMPMessaging` is the seam an application tests through: the same application code runs
/// on `SIMPClient` and on a fake of the application's own (here written as an application
/// would, with the public API only: a plain `import SIMPClient`).
@Suite struct MessagingSeamTests {
    /// Application code: answers the first message, follows the answer until it settles, and
    /// counts what is unread.
    struct Greeter {
        let client: any SIMPMessaging

        func answerFirstMessage(as user: String) async throws(ClientError) -> MessageStatus {
            try await client.connect(user: user, password: "secret")
            for await event in client.events() {
                switch event {
                case .message(let message):
                    let handle = try await client.sendTracked(to: message.from, text: "hello \(message.from)")
                    return await handle.settled()
                default:
                    continue
                }
            }
            throw ClientError("the events ended before a message came")
        }

        func unread() async throws(ClientError) -> Int {
            try await client.conversations().reduce(0) { $0 + $1.unreadCount }
        }
    }

    /// A fake an application writes for its tests: one incoming message after connect, and
    /// every send delivered at once.
    final class FakeMessaging: SIMPMessaging, @unchecked Sendable {
        private let lock = NSLock()
        private var state = ConnectionState.disconnected
        private var sentTexts: [String] = []
        private let feed = MessageStatusFeed()
        private let (stream, continuation) = AsyncStream.makeStream(of: ClientEvent.self)

        var sent: [String] { lock.withLock { sentTexts } }
        var connectionState: ConnectionState { lock.withLock { state } }

        func connectionStates() -> AsyncStream<ConnectionState> {
            AsyncStream { $0.yield(connectionState); $0.finish() }
        }

        func events(bufferingNewest limit: Int) -> AsyncStream<ClientEvent> { stream }

        func connect(user: String, password: String) async throws(ClientError) {
            guard password == "secret" else { throw ClientError("wrong password", code: .invalidCredentials) }
            lock.withLock { state = .connected(ServerAddress(host: "fake", port: 1)) }
            continuation.yield(.connected(user: user))
            continuation.yield(.message(IncomingMessage(id: "m1", from: "bob", to: user, text: "hi", seq: 1,
                                                        sentAt: Date(timeIntervalSince1970: 1_700_000_000))))
        }

        func connect(user: String, token: LoginToken) async throws(ClientError) {
            try await connect(user: user, password: "secret")
        }

        func disconnect() async {
            lock.withLock { state = .disconnected }
        }

        func send(to user: String, text: String) async throws(ClientError) -> String {
            lock.withLock {
                sentTexts.append(text)
                return "s\(sentTexts.count)"
            }
        }

        func sendTracked(to user: String, text: String) async throws(ClientError) -> MessageHandle {
            let id = try await send(to: user, text: text)
            let handle = feed.handle(id: id, to: user)
            var delivered = MessageStatus(id: id, to: user, stage: .delivered)
            delivered.seq = 1
            feed.publish(delivered)
            return handle
        }

        func messages(in conversation: String, before position: Int64?, limit: Int) async throws(ClientError) -> [LocalMessage] { [] }

        func conversations() async throws(ClientError) -> [ConversationSummary] { [] }

        func markShown(in conversation: String, upTo position: Int64?) async throws(ClientError) -> [LocalMessage] { [] }
    }

    @Test func aFakeDrivesTheApplicationsCode() async throws {
        let fake = FakeMessaging()
        let greeter = Greeter(client: fake)
        let status = try await greeter.answerFirstMessage(as: "alice")
        #expect(status.stage == .delivered && status.to == "bob" && status.isSettled)
        #expect(fake.sent == ["hello bob"])
        #expect(fake.connectionState == .connected(ServerAddress(host: "fake", port: 1)))
        #expect(try await greeter.unread() == 0)
        await #expect(throws: ClientError("wrong password", code: .invalidCredentials)) {
            try await fake.connect(user: "alice", password: "guess")
        }
    }

    /// The same code takes the real client; with no data directory its history refuses.
    @Test func theClientIsOne() async {
        let client = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: 1))
        let messaging: any SIMPMessaging = client
        #expect(messaging.connectionState == .disconnected)
        await #expect(throws: ClientError.self) { try await Greeter(client: messaging).unread() }
        await client.close()
    }
}
