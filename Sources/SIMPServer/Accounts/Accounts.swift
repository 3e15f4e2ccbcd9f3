import Foundation
import NIOPosix
import SIMPCore
import SIMPRedis

/// Registration and login. Hashing runs on its own thread pool: scrypt is deliberately slow.
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

    func register(user: String, password: String) async throws(ServerError) {
        guard UserName.isValid(user) else {
            throw ServerError(.invalidName, "user name must be 1-32 characters of a-z 0-9 _ . - and start with a letter or digit")
        }
        guard !password.isEmpty, password.utf8.count <= 1024 else {
            throw ServerError(.badRequest, "password must be 1-1024 bytes")
        }
        let salt = PasswordHasher.newSalt()
        let hasher = self.hasher
        let hash: [UInt8]
        do {
            hash = try await workers.runIfActive { try hasher.hash(password, salt: salt) }
        } catch {
            throw ServerError(.internal, "password hashing failed: \(error)")
        }
        let created: Bool
        do {
            created = try await store.createAccount(user: user, salt: salt, hash: hash, kdf: hasher.kdfName)
        } catch {
            throw .store(error)
        }
        guard created else { throw ServerError(.userExists, "user \(user) already exists") }
    }

    func login(user: String, password: String) async throws(ServerError) -> (token: String, expiresAt: Int64) {
        let stored: (salt: [UInt8], hash: [UInt8], kdf: String)?
        do {
            stored = try await store.credentials(user: user)
        } catch {
            throw .store(error)
        }
        let hasher = self.hasher
        let valid: Bool
        do {
            valid = try await workers.runIfActive { () -> Bool in
                guard let stored else { return false }
                return hasher.verify(password, salt: stored.salt, expected: stored.hash, kdf: stored.kdf)
            }
        } catch {
            throw ServerError(.internal, "password check failed: \(error)")
        }
        guard valid else { throw ServerError(.invalidCredentials, "wrong user name or password") }
        return tokens.issue(user: user, nowMillis: Self.nowMillis())
    }

    func verify(token: String) -> String? {
        tokens.verify(token, nowMillis: Self.nowMillis())
    }

    static func nowMillis() -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1000)
    }
}
