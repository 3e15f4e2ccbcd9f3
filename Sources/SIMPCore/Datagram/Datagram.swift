import NIOCore

/// The kinds of UDP datagram (byte 1 of the header).
public enum DatagramKind: UInt8, Sendable {
    /// Client -> server: proves the client owns its session from this source address.
    case bind = 1
    /// Either direction: one serialized `Simp_Message`.
    case data = 2
    /// Client -> server: holds the NAT mapping open and refreshes presence.
    case keepalive = 3
    /// Server -> client: answer to bind and keepalive, so the client knows the path works.
    case pong = 4
    /// Server -> client, to a new source address: a 16-byte token the client returns over TCP.
    case challenge = 5
    /// Server -> client, only to a client that asked for them at CONNECT: several serialized
    /// `Simp_Message`s for one session (`DatagramBundle`), one seal and one send for them all.
    case bundle = 6
    /// Server -> client, only to a client that asked for them at CONNECT: one message pushed
    /// before its store answered (`EarlyPayload`), so it has no seq yet.
    case early = 7
    /// Either way, never stored nor sent again: the user is typing. Client -> server, the
    /// user typed to (a user name); server -> client, the user typing (a user name).
    case typing = 8
    /// Server -> client, never stored nor sent again: a user the client's user may see came
    /// online or went offline (`PresenceChange`).
    case presence = 9
    /// Server -> client, never stored nor sent again: the key directory of a user the client's
    /// user may see (or its own) changed: a device became one others can add, or one was
    /// revoked (a user name). A hint to check the conversations with that user against the
    /// directory now; the directory stays what the client verifies.
    case keys = 10
}

public enum DatagramError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooShort(Int)
    case badVersion(UInt8)
    case unknownKind(UInt8)
    case reservedNotZero
    case payloadTooLarge(Int)
    /// Sealing failed, or the tag did not verify (tampered, wrong key, wrong direction).
    case unsealable

    public var description: String {
        switch self {
        case .tooShort(let n): return "datagram of \(n) bytes is shorter than the \(DatagramHeader.size)-byte header"
        case .badVersion(let v): return "unsupported datagram version \(v)"
        case .unknownKind(let k): return "unknown datagram kind \(k)"
        case .reservedNotZero: return "reserved header bytes are not zero"
        case .payloadTooLarge(let n): return "payload of \(n) bytes exceeds \(DatagramHeader.maxPayload)"
        case .unsealable: return "datagram does not open under the session key"
        }
    }
}

/// Fixed 20-byte header before each datagram's payload, so the server can route before parsing:
/// version(1) kind(1) reserved(2) sessionId(8, BE) packetNumber(8, BE).
public struct DatagramHeader: Equatable, Sendable {
    public static let version: UInt8 = 1
    public static let size = 20
    /// The safe path MTU payload budget (as QUIC assumes); larger content is refused, never fragmented.
    public static let maxPayload = 1200

    public var kind: DatagramKind
    public var sessionID: UInt64
    public var packetNumber: UInt64

    public init(kind: DatagramKind, sessionID: UInt64, packetNumber: UInt64) {
        self.kind = kind
        self.sessionID = sessionID
        self.packetNumber = packetNumber
    }
}

public enum Datagram {
    /// The largest datagram either side accepts: header, payload budget and seal tag.
    public static let maxSize = DatagramHeader.size + DatagramHeader.maxPayload + DatagramSeal.tagSize

    /// The session id a datagram claims, read without validating anything else; for
    /// attributing a datagram that is refused before it can be opened.
    public static func sessionID(peeking buffer: ByteBuffer) -> UInt64? {
        guard buffer.readableBytes >= DatagramHeader.size,
              buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) == DatagramHeader.version else { return nil }
        return buffer.getInteger(at: buffer.readerIndex + 4, endianness: .big, as: UInt64.self)
    }

    public static func encode(_ header: DatagramHeader, payload: some Collection<UInt8>, into buffer: inout ByteBuffer) throws(DatagramError) {
        guard payload.count <= DatagramHeader.maxPayload else { throw .payloadTooLarge(payload.count) }
        buffer.writeInteger(DatagramHeader.version)
        buffer.writeInteger(header.kind.rawValue)
        buffer.writeInteger(UInt16(0))
        buffer.writeInteger(header.sessionID, endianness: .big)
        buffer.writeInteger(header.packetNumber, endianness: .big)
        buffer.writeBytes(payload)
    }

    public static func encode(_ header: DatagramHeader, payload: some Collection<UInt8>, allocator: ByteBufferAllocator = .init()) throws(DatagramError) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: DatagramHeader.size + payload.count)
        try encode(header, payload: payload, into: &buffer)
        return buffer
    }

    /// Reads the header and leaves the buffer's reader index at the payload.
    public static func decodeHeader(_ buffer: inout ByteBuffer) throws(DatagramError) -> DatagramHeader {
        let total = buffer.readableBytes
        guard total >= DatagramHeader.size else { throw .tooShort(total) }
        guard total <= Datagram.maxSize else {
            throw .payloadTooLarge(total - DatagramHeader.size)
        }
        let version = buffer.readInteger(as: UInt8.self)!
        guard version == DatagramHeader.version else { throw .badVersion(version) }
        let rawKind = buffer.readInteger(as: UInt8.self)!
        guard let kind = DatagramKind(rawValue: rawKind) else { throw .unknownKind(rawKind) }
        // Must be zero: the seal authenticates the header as re-encoded from these fields.
        guard buffer.readInteger(as: UInt16.self)! == 0 else { throw .reservedNotZero }
        let session = buffer.readInteger(endianness: .big, as: UInt64.self)!
        let packet = buffer.readInteger(endianness: .big, as: UInt64.self)!
        return DatagramHeader(kind: kind, sessionID: session, packetNumber: packet)
    }
}
