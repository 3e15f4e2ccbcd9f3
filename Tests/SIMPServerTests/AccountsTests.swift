import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// The accounts on a real Redis with the time and the randomness handed in: a token is the
/// one the signer makes from the request's time and the nonce given, whatever the clock says.
@Suite(.serialized) struct AccountsTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()
    static let secret = Array(repeating: UInt8(7), count: 32)
    static let requested: Int64 = 1_700_000_000_000

    @Test func aLoginsTokenIsStampedWithTheRequestsTimeAndTheNonceGiven() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        let workers = NIOThreadPool(numberOfThreads: 1)
        workers.start()
        var hasher = PasswordHasher()
        hasher.rounds = 16
        let signer = TokenSigner(secret: Self.secret)
        let accounts = Accounts(store: MessageStore(redis: pool, settings: StoreSettings()), hasher: hasher, tokens: signer,
                                workers: workers, metrics: ServerMetrics(), salts: { [1, 2, 3] }, nonces: { 42 })

        try await accounts.register(user: "alice", password: "pw-alice-long", source: "10.0.0.1", on: loop).get()
        let login = try await accounts.login(user: "alice", password: "pw-alice-long", device: "phone", source: "10.0.0.1",
                                             nowMillis: Self.requested, on: loop).get()
        let expected = signer.issue(user: "alice", device: "phone", nowMillis: Self.requested, nonce: 42)
        #expect(login.token == expected.token && login.expiresAt == expected.expiresAt)

        let verified = try await accounts.verify(token: login.token, nowMillis: Self.requested + 1, on: loop).get()
        #expect(accounts.issuedMillis(of: verified) == Self.requested)
        await #expect(throws: ServerError.self, "expired at the time handed in") {
            try await accounts.verify(token: login.token, nowMillis: login.expiresAt, on: loop).get()
        }

        // A new password ends the tokens issued up to the request's ms; the new one counts from the next.
        let changed = try await accounts.changePassword(user: "alice", old: "pw-alice-long", new: "pw-alice-new", device: "phone",
                                                        source: "10.0.0.1", nowMillis: Self.requested + 10, on: loop).get()
        #expect(changed.token == signer.issue(user: "alice", device: "phone", nowMillis: Self.requested + 11, nonce: 42).token)
        await #expect(throws: ServerError.self, "issued before the change") {
            try await accounts.verify(token: login.token, nowMillis: Self.requested + 20, on: loop).get()
        }
        _ = try await accounts.verify(token: changed.token, nowMillis: Self.requested + 20, on: loop).get()

        await pool.shutdown()
        try await workers.shutdownGracefully()
    }
}
