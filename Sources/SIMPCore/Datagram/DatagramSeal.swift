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

/// Anti-replay: accepts each packet number once, within a window of the 64 most recent.
public struct ReplayWindow: Sendable, Equatable {
    public static let width: UInt64 = 64
    public private(set) var highest: UInt64 = 0
    private var seen: UInt64 = 0

    public init() {}

    /// True the first time a number inside the window is presented; false for repeats and
    /// for numbers too old to judge.
    public mutating func accept(_ number: UInt64) -> Bool {
        guard number > 0 else { return false }
        if number > highest {
            let shift = number - highest
            seen = shift >= Self.width ? 0 : seen << shift
            seen |= 1
            highest = number
            return true
        }
        let age = highest - number
        guard age < Self.width else { return false }
        let bit: UInt64 = 1 << age
        guard seen & bit == 0 else { return false }
        seen |= bit
        return true
    }
}
