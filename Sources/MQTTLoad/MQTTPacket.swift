import NIOCore

/// The MQTT 3.1.1 packets the load needs, and their wire form (OASIS MQTT 3.1.1, section 2-3).
/// Pure: bytes in, packets out, and the reverse.
public enum MQTTPacket: Equatable, Sendable {
    case connect(clientID: String, keepAlive: UInt16)
    case connack(sessionPresent: Bool, returnCode: UInt8)
    case subscribe(packetID: UInt16, topic: String, qos: UInt8)
    case suback(packetID: UInt16, returnCodes: [UInt8])
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
    case refused(returnCode: UInt8)
    case unexpected(String)

    public var description: String {
        switch self {
        case .malformedLength: return "MQTT remaining length longer than four bytes"
        case .malformedPacket(let why): return "malformed MQTT packet: \(why)"
        case .refused(let code): return "broker refused the connection (CONNACK return code \(code))"
        case .unexpected(let what): return "unexpected MQTT packet: \(what)"
        }
    }
}

extension MQTTPacket {
    public func encode(into buffer: inout ByteBuffer) {
        var body = ByteBuffer()
        let header: UInt8
        switch self {
        case .connect(let clientID, let keepAlive):
            header = 0x10
            body.writeMQTTString("MQTT")
            body.writeInteger(UInt8(4))        // protocol level 3.1.1
            body.writeInteger(UInt8(0x02))     // clean session
            body.writeInteger(keepAlive)
            body.writeMQTTString(clientID)
        case .connack(let present, let code):
            header = 0x20
            body.writeInteger(UInt8(present ? 1 : 0))
            body.writeInteger(code)
        case .subscribe(let id, let topic, let qos):
            header = 0x82
            body.writeInteger(id)
            body.writeMQTTString(topic)
            body.writeInteger(qos)
        case .suback(let id, let codes):
            header = 0x90
            body.writeInteger(id)
            body.writeBytes(codes)
        case .publish(let topic, let id, var payload):
            header = id == nil ? 0x30 : 0x32
            body.writeMQTTString(topic)
            if let id { body.writeInteger(id) }
            body.writeBuffer(&payload)
        case .puback(let id):
            header = 0x40
            body.writeInteger(id)
        case .pingresp:
            header = 0xD0
        case .disconnect:
            header = 0xE0
        }
        buffer.writeInteger(header)
        Self.writeRemainingLength(body.readableBytes, into: &buffer)
        buffer.writeBuffer(&body)
    }

    static func writeRemainingLength(_ length: Int, into buffer: inout ByteBuffer) {
        var value = length
        repeat {
            var byte = UInt8(value % 128)
            value /= 128
            if value > 0 { byte |= 0x80 }
            buffer.writeInteger(byte)
        } while value > 0
    }

    /// The next whole packet, nil when more bytes are needed; consumes it from `buffer`.
    public static func decode(from buffer: inout ByteBuffer) throws(MQTTError) -> MQTTPacket? {
        let start = buffer.readerIndex
        guard let header = buffer.getInteger(at: start, as: UInt8.self) else { return nil }
        var length = 0
        var multiplier = 1
        var offset = 1
        while true {
            guard offset <= 4 else { throw .malformedLength }
            guard let byte = buffer.getInteger(at: start + offset, as: UInt8.self) else { return nil }
            length += Int(byte & 0x7F) * multiplier
            multiplier *= 128
            offset += 1
            if byte & 0x80 == 0 { break }
        }
        guard buffer.readableBytes >= offset + length else { return nil }
        buffer.moveReaderIndex(forwardBy: offset)
        var body = buffer.readSlice(length: length)!
        return try parse(header: header, body: &body)
    }

    private static func parse(header: UInt8, body: inout ByteBuffer) throws(MQTTError) -> MQTTPacket {
        switch header >> 4 {
        case 2:
            guard let flags = body.readInteger(as: UInt8.self), let code = body.readInteger(as: UInt8.self) else {
                throw .malformedPacket("CONNACK shorter than 2 bytes")
            }
            return .connack(sessionPresent: flags & 1 == 1, returnCode: code)
        case 3:
            let qos = (header >> 1) & 0x03
            guard let topic = body.readMQTTString() else { throw .malformedPacket("PUBLISH without a topic") }
            var id: UInt16?
            if qos > 0 {
                guard let packetID = body.readInteger(as: UInt16.self) else { throw .malformedPacket("PUBLISH without a packet id") }
                id = packetID
            }
            return .publish(topic: topic, packetID: id, payload: body)
        case 4:
            guard let id = body.readInteger(as: UInt16.self) else { throw .malformedPacket("PUBACK without a packet id") }
            return .puback(packetID: id)
        case 9:
            guard let id = body.readInteger(as: UInt16.self) else { throw .malformedPacket("SUBACK without a packet id") }
            return .suback(packetID: id, returnCodes: Array(body.readableBytesView))
        case 13:
            return .pingresp
        default:
            throw .unexpected("type \(header >> 4)")
        }
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
