import Crypto
import Foundation
import NIOCore

/// Which way a datagram travels; part of the nonce, so the two directions never share one.
public enum DatagramDirection: UInt32, Sendable {
    case toServer = 0
    case toClient = 1
}

/// Every datagram after the header is sealed with ChaCha20-Poly1305 under the session key:
/// header (20 bytes, authenticated, in clear) | ciphertext | 16-byte tag.
/// Nonce: direction (4 bytes BE) then packet number (8 bytes BE): unique per key as long as
/// a sender never reuses a packet number, which is why a retransmission is sealed again with
/// a new one.
public enum DatagramSeal {
    public static let tagSize = 16
    public static let keySize = 32

    public static func seal(_ header: DatagramHeader, payload: [UInt8], key: SymmetricKey,
                            direction: DatagramDirection, allocator: ByteBufferAllocator = .init()) throws(DatagramError) -> ByteBuffer {
        guard payload.count <= DatagramHeader.maxPayload else { throw .payloadTooLarge(payload.count) }
        var buffer = allocator.buffer(capacity: DatagramHeader.size + payload.count + tagSize)
        try Datagram.encode(header, payload: EmptyCollection(), into: &buffer)
        // The header just written is the authenticated data; read in place, not copied.
        let box = buffer.withUnsafeReadableBytes { aad in
            try? ChaChaPoly.seal(payload, using: key, nonce: nonce(header.packetNumber, direction), authenticating: aad)
        }
        guard let box else { throw .unsealable }
        buffer.writeBytes(box.ciphertext)
        buffer.writeBytes(box.tag)
        return buffer
    }

    /// Opens what follows the header (the buffer's reader index is at the ciphertext).
    public static func open(_ header: DatagramHeader, sealed buffer: ByteBuffer, key: SymmetricKey,
                            direction: DatagramDirection) throws(DatagramError) -> [UInt8] {
        guard buffer.readableBytes >= tagSize else { throw .unsealable }
        let opened: Data? = withHeaderBytes(header) { aad in
            buffer.withUnsafeReadableBytes { sealed in
                guard let box = try? ChaChaPoly.SealedBox(nonce: nonce(header.packetNumber, direction),
                                                          ciphertext: UnsafeRawBufferPointer(rebasing: sealed.dropLast(tagSize)),
                                                          tag: UnsafeRawBufferPointer(rebasing: sealed.suffix(tagSize))) else { return nil }
                return try? ChaChaPoly.open(box, using: key, authenticating: aad)
            }
        }
        guard let opened else { throw .unsealable }
        return [UInt8](opened)
    }

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

    /// Direction then packet number, big-endian: 12 bytes built on the stack.
    private static func nonce(_ packet: UInt64, _ direction: DatagramDirection) -> ChaChaPoly.Nonce {
        let words = (direction.rawValue.bigEndian, UInt32(truncatingIfNeeded: packet >> 32).bigEndian,
                     UInt32(truncatingIfNeeded: packet).bigEndian)
        return withUnsafeBytes(of: words) { try! ChaChaPoly.Nonce(data: $0) }
    }
}


/// Anti-replay: accepts each packet number once, within a window of the 1,984 most recent.
/// The window is that wide because retransmissions come in bursts: a burst of a few hundred
/// datagrams, reordered on the way, must not make its first datagrams look too old (with
/// 64, the head of a long resend burst was refused again and again). The bitmap is a ring
/// of words, as in RFC 6479: moving ahead clears whole words instead of shifting.
public struct ReplayWindow: Sendable, Equatable {
    static let words = 32
    /// One word is the one being filled, so only the others count as history.
    public static let width = UInt64((words - 1) * 64)
    public private(set) var highest: UInt64 = 0
    private var bitmap = [UInt64](repeating: 0, count: words)

    public init() {}

    /// True the first time a number inside the window is presented; false for repeats and
    /// for numbers too old to judge.
    public mutating func accept(_ number: UInt64) -> Bool {
        guard number > 0 else { return false }
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
