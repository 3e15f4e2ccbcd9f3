import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis

/// Registration, login, token checks and logout. Hashing runs on its own thread pool (scrypt is
/// deliberately slow) behind a bounded queue, and Redis on the store's; results complete on the
/// caller's event loop. No Swift concurrency here, so a busy cooperative pool cannot stall a login.
/// It reads no clock: every time (`nowMillis`, ms since the epoch) is the caller's moment for
/// the request, so a token is stamped with when it was asked for, however long the hash took.
final class Accounts: Sendable {
    let store: MessageStore
    let hasher: PasswordHasher
    let tokens: TokenSigner
    let metrics: ServerMetrics
    private let workers: NIOThreadPool
    private let hashing: NIOLockedValueBox<HashingAdmission>
    /// Registrations one source address may attempt per `registrationWindow`.
    let registrationsPerSource: Int
    /// The fewest bytes a new password may have (`--min-password-length`).
    let minPasswordBytes: Int
    let registrationWindow: TimeAmount = .hours(1)
    /// Hashed when the user does not exist, so the answer takes as long as for a wrong password.
    private let decoySalt: [UInt8]
    /// New passwords' salts and tokens' nonces: randomness handed in, so a test can fix it.
    private let salts: @Sendable () -> [UInt8]
    private let nonces: @Sendable () -> UInt64

    init(store: MessageStore, hasher: PasswordHasher, tokens: TokenSigner, workers: NIOThreadPool, metrics: ServerMetrics,
         limits: ServerLimits = ServerLimits(), salts: @escaping @Sendable () -> [UInt8] = PasswordHasher.newSalt,
         nonces: @escaping @Sendable () -> UInt64 = { UInt64.random(in: 0...UInt64.max) }) {
        self.salts = salts
        self.nonces = nonces
        decoySalt = salts()
        self.store = store
        self.hasher = hasher
        self.tokens = tokens
        self.workers = workers
        self.metrics = metrics
        hashing = NIOLockedValueBox(HashingAdmission(limit: limits.hashingQueue, perSource: limits.hashingPerIP))
        registrationsPerSource = limits.registrationsPerIP
        minPasswordBytes = limits.minPasswordBytes
    }

    /// Why a new password is refused; nil when it may be set.
    func passwordProblem(_ password: String) -> String? {
        guard (minPasswordBytes...1024).contains(password.utf8.count) else {
            return "a password must be \(minPasswordBytes)-1024 bytes"
        }
        return nil
    }

    /// Creates the account, unless `source` (the client's IP address; an IPv6 one counts by its
    /// /64) has registered too often lately or the hashing queue is full.
    func register(user: String, password: String, source: String, on loop: any EventLoop) -> EventLoopFuture<Void> {
        guard UserName.isValid(user) else {
            return loop.makeFailedFuture(ServerError(.invalidName, "user name must be 1-32 characters of a-z 0-9 _ . - and start with a letter or digit"))
        }
        if let problem = passwordProblem(password) { return loop.makeFailedFuture(ServerError(.badRequest, problem)) }
        let salt = salts()
        let hasher = self.hasher
        let source = SourceAddress.bucket(source)
        return store.recordRegistration(source: source, window: registrationWindow, on: loop).flatMap { [self] attempts in
            guard attempts.count <= registrationsPerSource else {
                metrics.exceeded(.registrations)
                return loop.makeFailedFuture(ServerError(.rateLimited,
                    "more than \(registrationsPerSource) registrations from this address within an hour; try again in \(Self.seconds(attempts.left)) s"))
            }
            return hash(for: source, on: loop) { try hasher.hash(password, salt: salt) }
        }.flatMap { [store] hash in
            store.createAccount(user: user, salt: salt, hash: hash, kdf: hasher.kdfName, on: loop)
        }.flatMapThrowing { created in
            guard created else { throw ServerError(.userExists, "user \(user) already exists") }
        }
    }

    /// A token for the user, unless the password is wrong or failed logins made this attempt
    /// wait. Every valid name is treated alike, registered or not: the same counts, answers and
    /// hashing work, so neither the answer nor its timing says whether the user exists.
    /// `source` is the client's IP address (an IPv6 one counts by its /64).
    /// `device`: the one device the token opens a session for (a valid `DeviceName`).
    func login(user: String, password: String, device: String, source: String, nowMillis: Int64,
               on loop: any EventLoop) -> EventLoopFuture<(token: String, expiresAt: Int64)> {
        let source = SourceAddress.bucket(source)
        return checkPassword(user: user, password: password, source: source, nowMillis: nowMillis, on: loop).flatMap { [self] stored in
            succeeded(user, device: device, stored: stored, password: password, source: source, nowMillis: nowMillis, on: loop)
        }
    }

    /// Sets a new password when `old` is the user's current one (checked and throttled like a
    /// login): every token issued before now stops opening sessions and the caller ends the
    /// user's other logins. Returns a new token for `device`, so the caller stays logged in.
    func changePassword(user: String, old: String, new: String, device: String, source: String, nowMillis: Int64,
                        on loop: any EventLoop) -> EventLoopFuture<(token: String, expiresAt: Int64)> {
        if let problem = passwordProblem(new) { return loop.makeFailedFuture(ServerError(.badRequest, problem)) }
        let salt = salts()
        let hasher = self.hasher
        let source = SourceAddress.bucket(source)
        return checkPassword(user: user, password: old, source: source, nowMillis: nowMillis, on: loop).flatMap { [self] _ in
            hash(for: source, on: loop) { try hasher.hash(new, salt: salt) }
        }.flatMap { [self] hash in
            // Tokens carry their issue time in ms; one issued in this very ms must not survive,
            // and the new one is issued at the first ms that counts.
            let validFrom = nowMillis + 1
            return store.setPassword(user: user, salt: salt, hash: hash, kdf: hasher.kdfName, tokensFrom: validFrom, on: loop).map { [tokens, nonces] in
                tokens.issue(user: user, device: device, nowMillis: validFrom, nonce: nonces())
            }
        }
    }

    /// Makes every token of the user issued before now invalid (`logout{all}`).
    func endLogins(of user: String, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<Void> {
        store.setTokensFrom(user: user, millis: nowMillis + 1, on: loop)
    }

    /// The stored credentials when `password` is the user's, after the login throttle; a
    /// wrong one is counted as a failed login. `source`: the client's address, bucketed.
    private func checkPassword(user: String, password: String, source: String, nowMillis: Int64,
                               on loop: any EventLoop) -> EventLoopFuture<StoredCredentials> {
        guard UserName.isValid(user), password.utf8.count <= 1024 else {
            return loop.makeFailedFuture(ServerError(.invalidCredentials, "wrong user name or password"))
        }
        return store.loginState(user: user, source: source, nowMillis: nowMillis, on: loop).flatMap { [self] state in
            if let refusal = LoginThrottle.refusal(state.waits, knownSource: state.knownSource) {
                metrics.exceeded(.failedLogins)
                return loop.makeFailedFuture(Self.throttled(user, refusal.lock, refusal.wait))
            }
            return check(password, against: state.credentials, source: source, on: loop).flatMap { valid in
                guard valid, let stored = state.credentials else { return self.failed(user, source: source, on: loop) }
                return loop.makeSucceededFuture(stored)
            }
        }
    }

    private static func throttled(_ user: String, _ lock: LoginThrottle.Lock, _ wait: TimeAmount) -> ServerError {
        let whose = switch lock {
        case .nameFromSource: "for \(user) from this address"
        case .source: "from this address"
        case .name: "for \(user)"
        }
        return ServerError(.loginThrottled, "too many failed logins \(whose); try again in \(seconds(wait)) s")
    }

    /// Whole seconds, rounded up, for a reason a person reads.
    private static func seconds(_ amount: TimeAmount) -> Int64 {
        (max(0, amount.nanoseconds) + 999_999_999) / 1_000_000_000
    }

    private func check(_ password: String, against stored: StoredCredentials?, source: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        let hasher = self.hasher
        let decoySalt = self.decoySalt
        return hash(for: source, on: loop) { () -> Bool in
            guard let stored else {
                _ = try? hasher.hash(password, salt: decoySalt)
                return false
            }
            return hasher.verify(password, salt: stored.salt, expected: stored.hash, kdf: stored.kdf)
        }
    }

    /// Runs a hashing job on the hashing threads if the queue has room for it (in all and for
    /// `source`); otherwise refuses at once, so a flood can neither grow the queue nor make a
    /// real user's login wait behind it.
    private func hash<T: Sendable>(for source: String, on loop: any EventLoop,
                                   _ job: @escaping @Sendable () throws -> T) -> EventLoopFuture<T> {
        if let refusal = hashing.withLockedValue({ $0.admit(source) }) {
            metrics.exceeded(.passwordHashing)
            let reason = switch refusal {
            case .full: "the server is busy checking passwords; try again in a few seconds"
            case .sourceFull: "too many password checks under way from this address; wait for their answers"
            }
            return loop.makeFailedFuture(ServerError(.rateLimited, reason))
        }
        let result = workers.runIfActive(eventLoop: loop, job)
        result.whenComplete { [hashing, metrics] _ in
            metrics.passwordHashes.increment()
            hashing.withLockedValue { $0.release(source) }
        }
        return result
    }

    private func succeeded(_ user: String, device: String, stored: StoredCredentials, password: String, source: String,
                           nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<(token: String, expiresAt: Int64)> {
        metrics.loginsSucceeded.increment()
        upgradeHash(of: user, stored, password: password, source: source, on: loop)
        return store.loginSucceeded(user: user, source: source, nowMillis: nowMillis, on: loop).map { [tokens, nonces] in
            tokens.issue(user: user, device: device, nowMillis: nowMillis, nonce: nonces())
        }
    }

    /// A hash made with weaker parameters than the node's is made again, now that the password
    /// is known, and replaced only if it is still the one checked (a password change since
    /// wins). Best effort: the login does not wait for it, and a refusal (hashing queue full)
    /// leaves it for the next login.
    private func upgradeHash(of user: String, _ stored: StoredCredentials, password: String, source: String, on loop: any EventLoop) {
        guard stored.kdf != hasher.kdfName else { return }
        let salt = salts()
        let hasher = self.hasher
        hash(for: source, on: loop) { try hasher.hash(password, salt: salt) }.flatMap { [store, metrics] hash in
            store.replaceHash(user: user, old: stored.hash, salt: salt, hash: hash, kdf: hasher.kdfName, on: loop).map { replaced in
                if replaced { metrics.passwordHashesUpgraded.increment() }
            }
        }.whenFailure { _ in }
    }

    /// Counts the failure (for the name from this source, for the source, for the name) and sets
    /// the wait each count has earned.
    private func failed<T>(_ user: String, source: String, on loop: any EventLoop) -> EventLoopFuture<T> {
        metrics.loginsFailed.increment()
        return store.recordFailedLogin(user: user, source: source, window: LoginThrottle.window, on: loop).flatMap { [store] counts in
            let locks: [(lock: LoginThrottle.Lock, wait: TimeAmount)] = [
                (.nameFromSource, LoginThrottle.lockout(afterFailures: counts.nameFromSource.count, windowLeft: counts.nameFromSource.left)),
                (.source, LoginThrottle.lockout(afterFailures: counts.source.count, free: LoginThrottle.freeAttemptsPerSource,
                                                windowLeft: counts.source.left)),
                (.name, LoginThrottle.lockout(afterFailures: counts.name.count, free: LoginThrottle.freeAttemptsPerUser,
                                              windowLeft: counts.name.left)),
            ]
            return store.lockLogins(locks.filter { $0.wait > .zero }, user: user, source: source, on: loop)
        }.flatMapThrowing { throw ServerError(.invalidCredentials, "wrong user name or password") }
    }

    /// The token's user, if the token is authentic, unexpired and not revoked.
    func verify(token: String, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<VerifiedToken> {
        guard let verified = tokens.verify(token, nowMillis: nowMillis) else {
            return loop.makeFailedFuture(ServerError(.invalidToken, "token is invalid or expired; log in again"))
        }
        let issuedAt = issuedMillis(of: verified)
        return store.tokenState(tokenID: verified.id.hex, user: verified.user, on: loop).flatMapThrowing { state in
            guard !state.revoked else { throw ServerError(.invalidToken, "token was revoked by logout; log in again") }
            guard issuedAt >= state.validFromMillis else {
                throw ServerError(.invalidToken, "the password was changed or every login ended since this token was issued; log in again")
            }
            return verified
        }
    }

    /// Revokes tokens on every node until they expire.
    func revoke(_ revoked: [RevocableToken], nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<Void> {
        metrics.tokensRevoked.increment(by: Int64(revoked.count))
        return store.revoke(revoked.map { ($0.id.hex, $0.expiresAt - nowMillis) }, on: loop)
    }

    /// When the token was issued (ms since the epoch).
    func issuedMillis(of token: VerifiedToken) -> Int64 {
        issuedMillis(expiringAt: token.expiresAt)
    }

    /// When a token of this node's lifetime that expires at `expiresAt` was issued.
    func issuedMillis(expiringAt expiresAt: Int64) -> Int64 {
        expiresAt - tokens.lifetimeMillis
    }

    /// Verifies a token this node just issued at `nowMillis` (to remember it for logout).
    func parse(token: String, nowMillis: Int64) -> VerifiedToken? {
        tokens.verify(token, nowMillis: nowMillis)
    }
}
