import Crypto

/// Comparison of secret-derived bytes (MACs, tags, derived secrets) without early exit: through
/// swift-crypto's constant-time `SymmetricKey` equality. Lengths are not secret and may differ.
public enum ConstantTime {
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return SymmetricKey(data: a) == SymmetricKey(data: b)
    }
}
