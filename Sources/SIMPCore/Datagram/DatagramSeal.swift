#if SIMP_OPENSSL_AEAD
import CAEAD
#endif
import Crypto
import Foundation
import NIOCore

/// Which way a datagram travels; part of the nonce, so the two directions never share one.
public enum DatagramDirection: UInt32, Sendable {
    case toServer = 0
    case toClient = 1
}

/// Every datagram after the header is sealed with ChaCha20-Poly1305 (RFC 8439) under the session key:
/// header (20 bytes, authenticated, in clear) | ciphertext | 16-byte tag.
/// Nonce: direction (4 bytes BE) then packet number (8 bytes BE): unique per key as long as
/// a sender never reuses a packet number, which is why a retransmission is sealed again with
/// a new one.
///
/// The cipher is chosen when the package is built (issue 47): on Linux OpenSSL's, through the
/// `CAEAD` target (`SIMP_OPENSSL_AEAD`), with one cipher context per thread, sealing straight
/// into the datagram's buffer; elsewhere, and on Linux with `SIMP_PORTABLE_CRYPTO=1`,
/// swift-crypto's `ChaChaPoly`. Both make the same bytes: docs/vectors/datagrams.json is
/// checked against either build.
public enum DatagramSeal {
    public static let tagSize = 16
    public static let keySize = 32

    /// The ChaCha20-Poly1305 this build seals with, for logs and tests.
    #if SIMP_OPENSSL_AEAD
    public static let implementation = "OpenSSL libcrypto"
    #else
    public static let implementation = "swift-crypto ChaChaPoly"
    #endif

    public static func seal(_ header: DatagramHeader, payload: [UInt8], key: SymmetricKey,
                            direction: DatagramDirection, allocator: ByteBufferAllocator = .init()) throws(DatagramError) -> ByteBuffer {
        guard payload.count <= DatagramHeader.maxPayload else { throw .payloadTooLarge(payload.count) }
        guard key.bitCount == keySize * 8 else { throw .unsealable }
        var buffer = allocator.buffer(capacity: DatagramHeader.size + payload.count + tagSize)
        try Datagram.encode(header, payload: EmptyCollection(), into: &buffer)
        #if SIMP_OPENSSL_AEAD
        let sealed = withAEADInputs(header, key: key, direction: direction) { key, nonce, aad in
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: payload.count + tagSize) { out in
                let done = payload.withUnsafeBufferPointer { plain in
                    simp_aead_seal(key, nonce, aad.baseAddress, aad.count, plain.baseAddress, plain.count,
                                   out.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
                return done == 1 ? payload.count + tagSize : 0
            }
        }
        guard sealed > 0 else { throw .unsealable }
        #else
        // swift-crypto returns nonce | ciphertext | tag in one `Data`; the last two are copied
        // into the buffer once. The nonce and the header it authenticates stay on the stack.
        let box: ChaChaPoly.SealedBox? = withNonceBytes(header.packetNumber, direction) { nonce in
            withHeaderBytes(header) { aad in
                guard let nonce = try? ChaChaPoly.Nonce(data: nonce) else { return nil }
                return try? ChaChaPoly.seal(payload, using: key, nonce: nonce, authenticating: aad)
            }
        }
        guard let box else { throw .unsealable }
        _ = box.combined.withUnsafeBytes { combined in
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: combined[nonceSize...]))
        }
        #endif
        return buffer
    }

    /// Opens what follows the header (the buffer's reader index is at the ciphertext).
    public static func open(_ header: DatagramHeader, sealed buffer: ByteBuffer, key: SymmetricKey,
                            direction: DatagramDirection) throws(DatagramError) -> [UInt8] {
        let sealedCount = buffer.readableBytes
        guard sealedCount >= tagSize, key.bitCount == keySize * 8 else { throw .unsealable }
        #if SIMP_OPENSSL_AEAD
        var opened = false
        let payload = [UInt8](unsafeUninitializedCapacity: sealedCount - tagSize) { out, count in
            opened = withAEADInputs(header, key: key, direction: direction) { key, nonce, aad in
                buffer.withUnsafeReadableBytes { sealed in
                    simp_aead_open(key, nonce, aad.baseAddress, aad.count, sealed.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                   sealed.count, out.baseAddress) == 1
                }
            }
            count = opened ? sealedCount - tagSize : 0
        }
        guard opened else { throw .unsealable }
        return payload
        #else
        // The sealed box is built in one `Data` of its final size (nonce | ciphertext | tag);
        // the plaintext swift-crypto returns is copied once into the payload's array.
        let plaintext: Data? = withNonceBytes(header.packetNumber, direction) { nonce in
            var combined = Data(capacity: nonceSize + sealedCount)
            combined.append(contentsOf: nonce)
            buffer.withUnsafeReadableBytes { combined.append(contentsOf: $0) }
            guard let box = try? ChaChaPoly.SealedBox(combined: combined) else { return nil }
            return withHeaderBytes(header) { aad in try? ChaChaPoly.open(box, using: key, authenticating: aad) }
        }
        guard let plaintext else { throw .unsealable }
        return [UInt8](plaintext)
        #endif
    }

    #if SIMP_OPENSSL_AEAD
    /// The key, nonce and authenticated header, as the C calls take them.
    private static func withAEADInputs<R>(_ header: DatagramHeader, key: SymmetricKey, direction: DatagramDirection,
                                          _ body: (UnsafePointer<UInt8>, UnsafePointer<UInt8>, UnsafeBufferPointer<UInt8>) -> R) -> R {
        key.withUnsafeBytes { key in
            withNonceBytes(header.packetNumber, direction) { nonce in
                withHeaderBytes(header) { aad in
                    body(key.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce.baseAddress!.assumingMemoryBound(to: UInt8.self),
                         aad.bindMemory(to: UInt8.self))
                }
            }
        }
    }
    #endif

    /// The header as the seal authenticated it, re-encoded from its fields on the stack.
    private static func withHeaderBytes<R>(_ header: DatagramHeader, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeTemporaryAllocation(byteCount: DatagramHeader.size, alignment: 1) { raw in
            raw[0] = DatagramHeader.version
            raw[1] = header.kind.rawValue
            raw[2] = 0
            raw[3] = 0
            raw.storeBytes(of: header.sessionID.bigEndian, toByteOffset: 4, as: UInt64.self)
            raw.storeBytes(of: header.packetNumber.bigEndian, toByteOffset: 12, as: UInt64.self)
            return body(UnsafeRawBufferPointer(raw))
        }
    }

    public static func newKey() -> SymmetricKey { SymmetricKey(size: .bits256) }

    /// Sets up the calling thread's cipher context ahead of the first datagram; false when
    /// OpenSSL cannot make one (every seal and open on this thread would then fail). With
    /// swift-crypto there is nothing to set up (it makes a context per call): always true.
    public static func prepareThread() -> Bool {
        #if SIMP_OPENSSL_AEAD
        simp_aead_prepare() == 1
        #else
        true
        #endif
    }

    private static let nonceSize = 12

    /// Direction then packet number, big-endian: 12 bytes built on the stack.
    private static func withNonceBytes<R>(_ packet: UInt64, _ direction: DatagramDirection,
                                          _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let words = (direction.rawValue.bigEndian, UInt32(truncatingIfNeeded: packet >> 32).bigEndian,
                     UInt32(truncatingIfNeeded: packet).bigEndian)
        return withUnsafeBytes(of: words, body)
    }
}


/// Anti-replay: accepts each packet number once, within a window of the 1,984 most recent.
/// The window is that wide because retransmissions come in bursts: a burst of a few hundred
/// datagrams, reordered on the way, must not make its first datagrams look too old (with
/// 64, the head of a long resend burst was refused again and again). The bitmap is a ring
/// of words, as in RFC 6479: moving ahead clears whole words instead of shifting.
///
/// The bitmap (256 bytes) is made only at the first gap: while every number up to `highest`
/// has arrived, which is all an idle session's keepalives ever do, a number at or below it is
/// a repeat and nothing else needs keeping.
public struct ReplayWindow: Sendable, Equatable {
    static let words = 32
    /// One word is the one being filled, so only the others count as history.
    public static let width = UInt64((words - 1) * 64)
    public private(set) var highest: UInt64 = 0
    private var bitmap: [UInt64] = []

    public init() {}

    /// True the first time a number inside the window is presented; false for repeats and
    /// for numbers too old to judge.
    public mutating func accept(_ number: UInt64) -> Bool {
        guard number > 0 else { return false }
        if bitmap.isEmpty {
            if number <= highest { return false }
            if number == highest + 1 {
                highest = number
                return true
            }
            bitmap = Self.everythingSeen(upTo: highest)
        }
        if number > highest {
            advance(to: number)
        } else if highest - number >= Self.width {
            return false
        }
        let word = Int((number / 64) % UInt64(Self.words))
        let bit: UInt64 = 1 << (number % 64)
        guard bitmap[word] & bit == 0 else { return false }
        bitmap[word] |= bit
        return true
    }

    /// The bitmap of a window that has seen every number up to `highest`: the other words of
    /// the ring hold older numbers (or are cleared when the window moves into them), and the
    /// current word is seen up to `highest`'s bit.
    private static func everythingSeen(upTo highest: UInt64) -> [UInt64] {
        var bitmap = [UInt64](repeating: ~0, count: words)
        let bit = highest % 64
        bitmap[Int((highest / 64) % UInt64(words))] = bit == 63 ? ~0 : (1 << (bit + 1)) - 1
        return bitmap
    }

    /// Clears the words that the new highest number brings into use.
    private mutating func advance(to number: UInt64) {
        let oldWord = highest / 64
        let newWord = number / 64
        let fresh = min(newWord - oldWord, UInt64(Self.words))
        for step in 0..<fresh {
            bitmap[Int((oldWord + 1 + step) % UInt64(Self.words))] = 0
        }
        highest = number
    }
}
