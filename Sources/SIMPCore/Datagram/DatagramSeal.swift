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
        var buffer = try Datagram.encode(header, payload: [UInt8](), allocator: allocator)
        let aad = Array(buffer.readableBytesView)
        guard let box = try? ChaChaPoly.seal(payload, using: key, nonce: nonce(header.packetNumber, direction),
                                             authenticating: aad) else {
            throw .unsealable
        }
        buffer.writeBytes(box.ciphertext)
        buffer.writeBytes(box.tag)
        return buffer
    }

    /// Opens what follows the header (the buffer's reader index is at the ciphertext).
    public static func open(_ header: DatagramHeader, sealed buffer: ByteBuffer, key: SymmetricKey,
                            direction: DatagramDirection) throws(DatagramError) -> [UInt8] {
        let bytes = Array(buffer.readableBytesView)
        guard bytes.count >= tagSize else { throw .unsealable }
        var aadBuffer = try Datagram.encode(header, payload: [UInt8]())
        let aad = aadBuffer.readBytes(length: aadBuffer.readableBytes)!
        do {
            let box = try ChaChaPoly.SealedBox(nonce: nonce(header.packetNumber, direction),
                                               ciphertext: bytes.dropLast(tagSize), tag: bytes.suffix(tagSize))
            return Array(try ChaChaPoly.open(box, using: key, authenticating: aad))
        } catch {
            throw .unsealable
        }
    }

    public static func newKey() -> SymmetricKey { SymmetricKey(size: .bits256) }

    private static func nonce(_ packet: UInt64, _ direction: DatagramDirection) -> ChaChaPoly.Nonce {
        var bytes = [UInt8]()
        bytes.reserveCapacity(12)
        withUnsafeBytes(of: direction.rawValue.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: packet.bigEndian) { bytes.append(contentsOf: $0) }
        return try! ChaChaPoly.Nonce(data: bytes)
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
