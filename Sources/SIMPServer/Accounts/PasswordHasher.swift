import _CryptoExtras
import Crypto
import Foundation

/// Passwords are stored only as scrypt hashes with a per-user random salt, at OWASP's
/// minimum parameters by default (N = 2^17, r = 8, p = 1: 128 MiB and a few hundred ms a hash).
struct PasswordHasher: Sendable {
    var rounds = 131_072
    var blockSize = 8
    var parallelism = 1

    /// The memory all hashing may hold at once: hashes run on at most this much divided by one
    /// hash's (128 x N x r bytes), so a login flood cannot exhaust the node's memory.
    static let memoryBudget = 256 << 20
    /// At most two threads: hashing must not take every core from the event loops.
    static func threads(rounds: Int, blockSize: Int = 8) -> Int {
        max(1, min(2, memoryBudget / max(1, 128 * rounds * blockSize)))
    }

    var kdfName: String { "scrypt:\(rounds):\(blockSize):\(parallelism)" }

    func hash(_ password: String, salt: [UInt8]) throws -> [UInt8] {
        try Self.derive(password, salt: salt, rounds: rounds, blockSize: blockSize, parallelism: parallelism)
    }

    /// Checks against a stored hash, with the parameters it was made with.
    func verify(_ password: String, salt: [UInt8], expected: [UInt8], kdf: String) -> Bool {
        let parts = kdf.split(separator: ":")
        guard parts.count == 4, parts[0] == "scrypt",
              let n = Int(parts[1]), let r = Int(parts[2]), let p = Int(parts[3]),
              let actual = try? Self.derive(password, salt: salt, rounds: n, blockSize: r, parallelism: p) else {
            return false
        }
        return constantTimeEqual(actual, expected)
    }

    static func newSalt() -> [UInt8] {
        var rng = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    private static func derive(_ password: String, salt: [UInt8], rounds: Int, blockSize: Int, parallelism: Int) throws -> [UInt8] {
        let key = try KDF.Scrypt.deriveKey(from: Array(password.utf8), salt: salt, outputByteCount: 32,
                                           rounds: rounds, blockSize: blockSize, parallelism: parallelism)
        return key.withUnsafeBytes { Array($0) }
    }
}

/// Compares without an early exit, so timing does not tell how many bytes matched.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}
