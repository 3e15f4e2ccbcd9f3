import NIOCore

/// The MQTT 3.1.1 packets the load needs, and their wire form (OASIS MQTT 3.1.1, sections 2 and 3).
/// Pure: bytes in, packets out, and the reverse.
public enum MQTTPacket: Equatable, Sendable {
    case connect(clientID: String, keepAlive: UInt16)
    case connack(sessionPresent: Bool, returnCode: UInt8)
    case subscribe(packetID: UInt16, topic: String, qos: UInt8)
    case suback(packetID: UInt16, returnCodes: [UInt8])
    /// QoS 1 when it has a packet id, QoS 0 without.
    case publish(topic: String, packetID: UInt16?, payload: ByteBuffer)
    case puback(packetID: UInt16)
    case pingresp
    case disconnect

    /// A remaining length needs at most four bytes (up to 268,435,455).
    public static let maxRemainingLength = 268_435_455
}

public enum MQTTError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformedLength
    case malformedPacket(String)
    case unexpectedPacket(String)
    case connectionRefused(returnCode: UInt8)
    case subscriptionRefused(topic: String, returnCode: UInt8)
    case connectionFailed(String)
    case timedOut(String)

    public var description: String {
        switch self {
        case .malformedLength: return "malformed MQTT packet: remaining length longer than four bytes"
        case .malformedPacket(let why): return "malformed MQTT packet: \(why)"
        case .unexpectedPacket(let what): return "unexpected MQTT packet: \(what)"
        case .connectionRefused(let code): return "broker refused the connection: CONNACK return code \(code) (\(Self.connackReason(code)))"
        case .subscriptionRefused(let topic, let code): return "broker refused the subscription to \(topic): SUBACK return code \(code)"
        case .connectionFailed(let why): return "MQTT connection failed: \(why)"
        case .timedOut(let what): return "MQTT timed out: \(what)"
        }
    }

    /// MQTT 3.1.1 section 3.2.2.3.
    static func connackReason(_ code: UInt8) -> String {
        switch code {
        case 1: return "unacceptable protocol version"
        case 2: return "identifier rejected"
        case 3: return "server unavailable"
        case 4: return "bad user name or password"
        case 5: return "not authorized"
        default: return "reserved"
        }
    }
}

// MARK: - Encoding

extension MQTTPacket {
    /// Bytes on the wire: fixed header, remaining length, body.
    public var encodedLength: Int { 1 + Self.lengthOfRemainingLength(remainingLength) + remainingLength }

    public func encode(into buffer: inout ByteBuffer) {
        buffer.writeInteger(fixedHeader)
        Self.writeRemainingLength(remainingLength, into: &buffer)
        switch self {
        case .connect(let clientID, let keepAlive):
            buffer.writeMQTTString("MQTT")
            buffer.writeInteger(UInt8(4))        // protocol level: 3.1.1
            buffer.writeInteger(UInt8(0x02))     // clean session, no will, no user name or password
            buffer.writeInteger(keepAlive)
            buffer.writeMQTTString(clientID)
        case .connack(let present, let code):
            buffer.writeInteger(UInt8(present ? 1 : 0))
            buffer.writeInteger(code)
        case .subscribe(let id, let topic, let qos):
            buffer.writeInteger(id)
            buffer.writeMQTTString(topic)
            buffer.writeInteger(qos)
        case .suback(let id, let codes):
            buffer.writeInteger(id)
            buffer.writeBytes(codes)
        case .publish(let topic, let id, let payload):
            buffer.writeMQTTString(topic)
            if let id { buffer.writeInteger(id) }
            buffer.writeImmutableBuffer(payload)
        case .puback(let id):
            buffer.writeInteger(id)
        case .pingresp, .disconnect:
            break
        }
    }

    /// Type in the high nibble; the flags SUBSCRIBE (0b0010) and a QoS 1 PUBLISH (0b0010) must carry.
    private var fixedHeader: UInt8 {
        switch self {
        case .connect: return 0x10
        case .connack: return 0x20
        case .publish(_, let id, _): return id == nil ? 0x30 : 0x32
        case .puback: return 0x40
        case .subscribe: return 0x82
        case .suback: return 0x90
        case .pingresp: return 0xD0
        case .disconnect: return 0xE0
        }
    }

    private var remainingLength: Int {
        switch self {
        case .connect(let clientID, _): return 10 + 2 + clientID.utf8.count
        case .connack: return 2
        case .subscribe(_, let topic, _): return 2 + 2 + topic.utf8.count + 1
        case .suback(_, let codes): return 2 + codes.count
        case .publish(let topic, let id, let payload): return 2 + topic.utf8.count + (id == nil ? 0 : 2) + payload.readableBytes
        case .puback: return 2
        case .pingresp, .disconnect: return 0
        }
    }

    /// Seven bits a byte, least significant first; the high bit says another byte follows.
    static func writeRemainingLength(_ length: Int, into buffer: inout ByteBuffer) {
        precondition((0...maxRemainingLength).contains(length), "MQTT packet too long: \(length) bytes")
        var value = length
        repeat {
            var byte = UInt8(value % 128)
            value /= 128
            if value > 0 { byte |= 0x80 }
            buffer.writeInteger(byte)
        } while value > 0
    }

    static func lengthOfRemainingLength(_ length: Int) -> Int {
        switch length {
        case ..<128: return 1
        case ..<16_384: return 2
        case ..<2_097_152: return 3
        default: return 4
        }
    }
}

// MARK: - Decoding

extension MQTTPacket {
    /// The next whole packet, consumed from `buffer`; nil (and nothing consumed) while more bytes are needed.
    public static func decode(from buffer: inout ByteBuffer) throws(MQTTError) -> MQTTPacket? {
        let start = buffer.readerIndex
        guard let header = buffer.getInteger(at: start, as: UInt8.self),
              let (length, lengthBytes) = try readRemainingLength(in: buffer, at: start + 1),
              buffer.readableBytes >= 1 + lengthBytes + length,
              var body = buffer.getSlice(at: start + 1 + lengthBytes, length: length) else { return nil }
        buffer.moveReaderIndex(forwardBy: 1 + lengthBytes + length)
        return try parse(header: header, body: &body)
    }

    /// The remaining length at `index` and how many bytes it took; nil if they have not all arrived.
    private static func readRemainingLength(in buffer: ByteBuffer, at index: Int) throws(MQTTError) -> (Int, Int)? {
        var length = 0
        for position in 0..<4 {
            guard let byte = buffer.getInteger(at: index + position, as: UInt8.self) else { return nil }
            length += Int(byte & 0x7F) << (7 * position)
            if byte & 0x80 == 0 { return (length, position + 1) }
        }
        throw .malformedLength
    }

    /// What a broker sends a client (section 3); anything else is refused, as are reserved flags.
    private static func parse(header: UInt8, body: inout ByteBuffer) throws(MQTTError) -> MQTTPacket {
        let type = header >> 4
        guard type == 3 || header & 0x0F == 0 else { throw .malformedPacket("reserved flags \(header & 0x0F) set on type \(type)") }
        switch type {
        case 2:
            guard body.readableBytes == 2, let flags = body.readInteger(as: UInt8.self), let code = body.readInteger(as: UInt8.self) else {
                throw .malformedPacket("CONNACK of \(body.readableBytes) bytes, not 2")
            }
            return .connack(sessionPresent: flags & 1 == 1, returnCode: code)
        case 3:
            return try parsePublish(qos: (header >> 1) & 0x03, body: &body)
        case 4:
            guard body.readableBytes == 2, let id = body.readInteger(as: UInt16.self) else {
                throw .malformedPacket("PUBACK of \(body.readableBytes) bytes, not 2")
            }
            return .puback(packetID: id)
        case 9:
            guard body.readableBytes >= 3, let id = body.readInteger(as: UInt16.self) else {
                throw .malformedPacket("SUBACK without a return code")
            }
            return .suback(packetID: id, returnCodes: Array(body.readableBytesView))
        case 13:
            guard body.readableBytes == 0 else { throw .malformedPacket("PINGRESP with a body") }
            return .pingresp
        default:
            throw .unexpectedPacket("type \(type) from the broker")
        }
    }

    private static func parsePublish(qos: UInt8, body: inout ByteBuffer) throws(MQTTError) -> MQTTPacket {
        guard qos < 3 else { throw .malformedPacket("PUBLISH with QoS 3") }
        // This client subscribes with QoS 1 at most, and a QoS 2 PUBLISH would need PUBREC, not PUBACK.
        guard qos < 2 else { throw .unexpectedPacket("PUBLISH with QoS 2") }
        guard let topic = body.readMQTTString() else { throw .malformedPacket("PUBLISH without a topic") }
        guard qos > 0 else { return .publish(topic: topic, packetID: nil, payload: body) }
        guard let id = body.readInteger(as: UInt16.self) else { throw .malformedPacket("PUBLISH without a packet id") }
        return .publish(topic: topic, packetID: id, payload: body)
    }
}

extension ByteBuffer {
    mutating func writeMQTTString(_ string: String) {
        writeInteger(UInt16(string.utf8.count))
        writeString(string)
    }

    mutating func readMQTTString() -> String? {
        guard let length = readInteger(as: UInt16.self) else { return nil }
        return readString(length: Int(length))
    }
}
