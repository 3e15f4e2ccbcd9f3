/// Why the secret tree or a ratchet refused a request. Never carries secret bytes.
public enum SecretTreeError: Error, Equatable, Sendable {
    /// The leaf is not in the tree.
    case leafOutOfRange(LeafIndex, leafCount: UInt32)
    /// The generation is more than the window's `maximumForwardDistance` past the ratchet's next
    /// unused generation.
    case generationTooFarAhead(requested: UInt32, next: UInt64, maximumDistance: UInt32)
    /// The generation's key was already used and deleted: a replay.
    case generationAlreadyUsed(UInt32)
    /// The generation is older than the skipped keys the window keeps: its key, if it was ever
    /// unused, was dropped. (A replay of a generation this old also reads so, since which of the
    /// two it is is no longer known.)
    case generationExpired(UInt32)
    /// Every generation up to 2^32 - 1 has been derived: the ratchet cannot go on.
    case ratchetExhausted
    /// The secrets on the path to the leaf were deleted although the leaf's ratchets were never
    /// derived: the tree's state is inconsistent.
    case secretUnavailable(NodeIndex)
}

/// The out-of-order tolerance of a receiving ratchet (RFC 9420 section 9.2 leaves these bounds to
/// the application).
public struct RatchetWindow: Sendable, Equatable {
    /// How far past its next unused generation a ratchet may be asked for a key: a generation
    /// more than this many steps ahead throws ``SecretTreeError/generationTooFarAhead(requested:next:maximumDistance:)``
    /// without changing the ratchet. Bounds the work one message can cause.
    public var maximumForwardDistance: UInt32
    /// How many keys of generations skipped over (for messages that arrive late) a ratchet keeps.
    /// When more would be kept, the oldest are deleted; asking for one of them then throws
    /// ``SecretTreeError/generationExpired(_:)``.
    public var maximumSkippedKeys: Int

    public init(maximumForwardDistance: UInt32, maximumSkippedKeys: Int) {
        self.maximumForwardDistance = maximumForwardDistance
        self.maximumSkippedKeys = max(0, maximumSkippedKeys)
    }

    /// 1,000 generations forward, 32 skipped keys kept.
    public static let `default` = RatchetWindow(maximumForwardDistance: 1000, maximumSkippedKeys: 32)
}

/// The key and nonce of one generation of a ratchet (RFC 9420 section 9.1). The nonce is the
/// ratchet's: message protection XORs the reuse guard into its first four bytes (section 6.3.1).
public struct RatchetKey: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    public let generation: UInt32
    public let key: SecretBytes
    public let nonce: SecretBytes

    public var description: String { "RatchetKey(generation \(generation), redacted)" }
    public var customMirror: Mirror { Mirror(self, children: ["generation": generation], displayStyle: .struct) }
}

/// One hash ratchet of a leaf (RFC 9420 section 9.1), a value:
///
///     ratchet_nonce_[N]_[j] = DeriveTreeSecret(ratchet_secret_[N]_[j], "nonce", j, AEAD.Nn)
///     ratchet_key_[N]_[j]   = DeriveTreeSecret(ratchet_secret_[N]_[j], "key", j, AEAD.Nk)
///     ratchet_secret_[N]_[j+1] = DeriveTreeSecret(ratchet_secret_[N]_[j], "secret", j, KDF.Nh)
///
/// Deletion (section 9.2): it holds only the ratchet secret of its next unused generation and the
/// keys of skipped generations within its ``RatchetWindow``. A generation's key is deleted when it
/// is handed out, and a ratchet secret as soon as the next one is derived, so a used key cannot be
/// asked for again (``SecretTreeError/generationAlreadyUsed(_:)``).
///
/// A call that throws leaves the ratchet unchanged. To delete a key only once its message has
/// decrypted, take it from a copy and keep the copy on success.
public struct HashRatchet: Sendable, CustomStringConvertible, CustomReflectable {
    public let suite: MLSCipherSuite
    public let window: RatchetWindow
    /// `ratchet_secret_[N]_[next]`; nil once `next` is past 2^32 - 1.
    var secret: SecretBytes?
    /// The next generation neither handed out nor skipped (up to 2^32 once exhausted).
    public private(set) var nextGeneration: UInt64
    /// Keys of skipped generations, kept for messages that arrive late.
    var skipped: [UInt32: RatchetKey]
    /// Every skipped generation below this had its key dropped (or was never kept) for the window.
    var expiredBelow: UInt32

    /// A ratchet at generation 0 from `ratchet_secret_[N]_[0]`.
    public init(suite: MLSCipherSuite, secret: SecretBytes, window: RatchetWindow = .default) {
        self.suite = suite
        self.window = window
        self.secret = secret
        nextGeneration = 0
        skipped = [:]
        expiredBelow = 0
    }

    /// The generations whose skipped keys are still held, ascending.
    public var retainedSkippedGenerations: [UInt32] { skipped.keys.sorted() }

    /// The key of the next generation, for sending; it is deleted from the ratchet.
    public mutating func next() throws -> RatchetKey {
        guard nextGeneration <= UInt64(UInt32.max) else { throw SecretTreeError.ratchetExhausted }
        return try key(for: UInt32(nextGeneration))
    }

    /// The key of `generation`, for receiving; it is deleted from the ratchet. A generation ahead
    /// of the next one ratchets forward (keeping the skipped keys the window allows); an earlier
    /// one is served from the skipped keys, or refused.
    public mutating func key(for generation: UInt32) throws -> RatchetKey {
        let g = UInt64(generation)
        if g < nextGeneration {
            if let key = skipped.removeValue(forKey: generation) { return key }
            throw generation < expiredBelow
                ? SecretTreeError.generationExpired(generation) : SecretTreeError.generationAlreadyUsed(generation)
        }
        guard g - nextGeneration <= UInt64(window.maximumForwardDistance) else {
            throw SecretTreeError.generationTooFarAhead(
                requested: generation, next: nextGeneration, maximumDistance: window.maximumForwardDistance)
        }
        var r = self
        while r.nextGeneration < g {
            let j = UInt32(r.nextGeneration)
            if g - r.nextGeneration <= UInt64(window.maximumSkippedKeys) {
                r.skipped[j] = try r.currentKey()
            } else {
                r.expiredBelow = max(r.expiredBelow, j + 1)
            }
            try r.advance()
        }
        let key = try r.currentKey()
        try r.advance()
        while r.skipped.count > window.maximumSkippedKeys, let oldest = r.skipped.keys.min() {
            r.skipped[oldest] = nil
            r.expiredBelow = max(r.expiredBelow, oldest + 1)
        }
        self = r
        return key
    }

    /// Key and nonce of generation `nextGeneration`.
    func currentKey() throws -> RatchetKey {
        guard let secret, nextGeneration <= UInt64(UInt32.max) else { throw SecretTreeError.ratchetExhausted }
        let j = UInt32(nextGeneration)
        let key = try suite.deriveTreeSecret(secret: secret.bytes, label: Array("key".utf8), generation: j, length: suite.aeadKeyLength)
        let nonce = try suite.deriveTreeSecret(secret: secret.bytes, label: Array("nonce".utf8), generation: j, length: suite.aeadNonceLength)
        return RatchetKey(generation: j, key: SecretBytes(key), nonce: SecretBytes(nonce))
    }

    /// Replaces the ratchet secret by the next generation's, deleting it.
    mutating func advance() throws {
        guard let current = secret, nextGeneration <= UInt64(UInt32.max) else { throw SecretTreeError.ratchetExhausted }
        let j = UInt32(nextGeneration)
        if j == UInt32.max {
            secret = nil
        } else {
            secret = SecretBytes(try suite.deriveTreeSecret(
                secret: current.bytes, label: Array("secret".utf8), generation: j, length: suite.hashLength))
        }
        nextGeneration += 1
    }

    public var description: String {
        "HashRatchet(next generation \(nextGeneration), \(skipped.count) skipped keys, redacted)"
    }
    public var customMirror: Mirror {
        Mirror(self, children: ["nextGeneration": nextGeneration, "retainedSkippedGenerations": retainedSkippedGenerations], displayStyle: .struct)
    }
}

extension HashRatchet {
    /// The ratchet's whole state, secrets included, for ``MLSGroup``'s saved state:
    /// `optional<opaque> secret; uint64 next; uint32 expired_below; (uint32 generation, opaque
    /// key, opaque nonce) skipped<V>` (skipped in generation order).
    func encodeState(to writer: inout TLSWriter) throws {
        try writer.writeOptional(secret) { try $0.writeOpaque($1.bytes) }
        writer.writeUInt64(nextGeneration)
        writer.writeUInt32(expiredBelow)
        try writer.writeVector { w in
            for generation in skipped.keys.sorted() {
                guard let key = skipped[generation] else { continue }
                w.writeUInt32(generation)
                try w.writeOpaque(key.key.bytes)
                try w.writeOpaque(key.nonce.bytes)
            }
        }
    }

    /// A ratchet from ``encodeState(to:)``'s bytes; lengths and generations are checked.
    init(suite: MLSCipherSuite, window: RatchetWindow, stateFrom reader: inout TLSReader) throws {
        let secret = try reader.readOptional { SecretBytes(try $0.readOpaque()) }
        let next = try reader.readUInt64()
        let expired = try reader.readUInt32()
        let keys = try reader.readVector { r in
            RatchetKey(generation: try r.readUInt32(), key: SecretBytes(try r.readOpaque()), nonce: SecretBytes(try r.readOpaque()))
        }
        guard next <= UInt64(UInt32.max) + 1, (secret == nil) == (next > UInt64(UInt32.max)),
              secret.map({ $0.count == suite.hashLength }) ?? true,
              keys.allSatisfy({ UInt64($0.generation) < next && $0.key.count == suite.aeadKeyLength
                  && $0.nonce.count == suite.aeadNonceLength })
        else { throw MLSDecodingError.invalidValue("hash ratchet state") }
        self.suite = suite
        self.window = window
        self.secret = secret
        nextGeneration = next
        expiredBelow = expired
        skipped = Dictionary(keys.map { ($0.generation, $0) }, uniquingKeysWith: { a, _ in a })
    }
}
