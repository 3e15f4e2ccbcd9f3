import Foundation
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis

/// Registration and login. Hashing runs on its own thread pool (scrypt is deliberately slow)
/// and Redis on the store's; results complete on the caller's event loop. No Swift
/// concurrency here, so a busy cooperative pool cannot stall a login.
final class Accounts: Sendable {
    let store: MessageStore
    let hasher: PasswordHasher
    let tokens: TokenSigner
    private let workers: NIOThreadPool

    init(store: MessageStore, hasher: PasswordHasher, tokens: TokenSigner, workers: NIOThreadPool) {
        self.store = store
        self.hasher = hasher
        self.tokens = tokens
        self.workers = workers
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

    func login(user: String, password: String, on loop: any EventLoop) -> EventLoopFuture<(token: String, expiresAt: Int64)> {
        let hasher = self.hasher
        return store.credentials(user: user, on: loop).flatMap { [workers] stored in
            workers.runIfActive(eventLoop: loop) { () -> Bool in
                guard let stored else { return false }
                return hasher.verify(password, salt: stored.salt, expected: stored.hash, kdf: stored.kdf)
            }
        }.flatMapThrowing { [tokens] valid in
            guard valid else { throw ServerError(.invalidCredentials, "wrong user name or password") }
            return tokens.issue(user: user, nowMillis: Self.nowMillis())
        }
    }

    func verify(token: String) -> String? {
        tokens.verify(token, nowMillis: Self.nowMillis())
    }

    static func nowMillis() -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1000)
    }
}
