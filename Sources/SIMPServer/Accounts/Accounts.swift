import Foundation
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis

/// Registration, login, token checks and logout. Hashing runs on its own thread pool (scrypt is
/// deliberately slow) and Redis on the store's; results complete on the caller's event loop.
/// No Swift concurrency here, so a busy cooperative pool cannot stall a login.
final class Accounts: Sendable {
    let store: MessageStore
    let hasher: PasswordHasher
    let tokens: TokenSigner
    let metrics: ServerMetrics
    private let workers: NIOThreadPool
    /// Failed logins are counted until this long after the last one.
    let failureWindowSeconds = 900
    /// Hashed when the user does not exist, so the answer takes as long as for a wrong password.
    private let decoySalt = PasswordHasher.newSalt()

    init(store: MessageStore, hasher: PasswordHasher, tokens: TokenSigner, workers: NIOThreadPool, metrics: ServerMetrics) {
        self.store = store
        self.hasher = hasher
        self.tokens = tokens
        self.workers = workers
        self.metrics = metrics
    }

    func register(user: String, password: String, on loop: any EventLoop) -> EventLoopFuture<Void> {
        guard UserName.isValid(user) else {
            return loop.makeFailedFuture(ServerError(.invalidName, "user name must be 1-32 characters of a-z 0-9 _ . - and start with a letter or digit"))
        }
        guard !password.isEmpty, password.utf8.count <= 1024 else {
            return loop.makeFailedFuture(ServerError(.badRequest, "password must be 1-1024 bytes"))
        }
        let salt = PasswordHasher.newSalt()
        let hasher = self.hasher
        return workers.runIfActive(eventLoop: loop) {
            try hasher.hash(password, salt: salt)
        }.flatMap { [store] hash in
            store.createAccount(user: user, salt: salt, hash: hash, kdf: hasher.kdfName, on: loop)
        }.flatMapThrowing { created in
            guard created else { throw ServerError(.userExists, "user \(user) already exists") }
        }
    }

    /// A token for the user, unless the password is wrong or failed logins locked the user out
    /// (from `source`, the client's IP address, or from everywhere).
    func login(user: String, password: String, source: String, on loop: any EventLoop) -> EventLoopFuture<(token: String, expiresAt: Int64)> {
        guard UserName.isValid(user), password.utf8.count <= 1024 else {
            return loop.makeFailedFuture(ServerError(.invalidCredentials, "wrong user name or password"))
        }
        return store.loginState(user: user, source: source, on: loop).flatMap { [self] stored, lock in
            if let refusal = Self.throttled(user, lock) {
                metrics.exceeded(.failedLogins)
                return loop.makeFailedFuture(refusal)
            }
            return check(password, against: stored, on: loop).flatMap { valid in
                valid ? self.succeeded(user, source: source, on: loop) : self.failed(user, source: source, exists: stored != nil, on: loop)
            }
        }
    }

    private static func throttled(_ user: String, _ lock: LoginLock) -> ServerError? {
        func wait(_ millis: Int64) -> String { "try again in \((millis + 999) / 1000) s" }
        if lock.sourceMillis > 0 {
            return ServerError(.loginThrottled, "too many failed logins for \(user) from this address; \(wait(lock.sourceMillis))")
        }
        if lock.userMillis > 0 {
            return ServerError(.loginThrottled, "too many failed logins for \(user); \(wait(lock.userMillis))")
        }
        return nil
    }

    private func check(_ password: String, against stored: StoredCredentials?, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        let hasher = self.hasher
        let decoySalt = self.decoySalt
        return workers.runIfActive(eventLoop: loop) { () -> Bool in
            guard let stored else {
                _ = try? hasher.hash(password, salt: decoySalt)
                return false
            }
            return hasher.verify(password, salt: stored.salt, expected: stored.hash, kdf: stored.kdf)
        }
    }

    private func succeeded(_ user: String, source: String, on loop: any EventLoop) -> EventLoopFuture<(token: String, expiresAt: Int64)> {
        store.clearFailedLogins(user: user, source: source, on: loop).map { [tokens] in
            tokens.issue(user: user, nowMillis: Self.nowMillis())
        }
    }

    /// Counts the failure against an existing user and locks further attempts, from this source
    /// or from all, once there is one too many.
    private func failed(_ user: String, source: String, exists: Bool, on loop: any EventLoop) -> EventLoopFuture<(token: String, expiresAt: Int64)> {
        metrics.loginsFailed.increment()
        let refusal = ServerError(.invalidCredentials, "wrong user name or password")
        guard exists else { return loop.makeFailedFuture(refusal) }
        return store.recordFailedLogin(user: user, source: source, windowSeconds: failureWindowSeconds, on: loop).flatMap { [store] failures in
            let locks: [(String?, TimeAmount)] = [
                (source, LoginThrottle.lockout(afterFailures: failures.fromSource)),
                (nil, LoginThrottle.lockout(afterFailures: failures.total, free: LoginThrottle.freeAttemptsPerUser)),
            ]
            let pending = locks.filter { $0.1 > .zero }.map { store.lockLogins(user: user, from: $0.0, for: $0.1, on: loop) }
            return EventLoopFuture.andAllSucceed(pending, on: loop)
        }.flatMapThrowing { throw refusal }
    }

    /// The token's user, if the token is authentic, unexpired and not revoked.
    func verify(token: String, on loop: any EventLoop) -> EventLoopFuture<VerifiedToken> {
        guard let verified = tokens.verify(token, nowMillis: Self.nowMillis()) else {
            return loop.makeFailedFuture(ServerError(.invalidToken, "token is invalid or expired; log in again"))
        }
        return store.isRevoked(tokenID: verified.id, on: loop).flatMapThrowing { revoked in
            guard !revoked else { throw ServerError(.invalidToken, "token was revoked by logout; log in again") }
            return verified
        }
    }

    /// Revokes tokens (by their verified form) on every node until they expire.
    func revoke(_ revoked: [VerifiedToken], on loop: any EventLoop) -> EventLoopFuture<Void> {
        let now = Self.nowMillis()
        metrics.tokensRevoked.increment(by: Int64(revoked.count))
        return store.revoke(revoked.map { ($0.id, $0.expiresAt - now) }, on: loop)
    }

    /// Verifies a token this node just issued (to remember it for logout).
    func parse(token: String) -> VerifiedToken? {
        tokens.verify(token, nowMillis: Self.nowMillis())
    }

    static func nowMillis() -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1000)
    }
}
