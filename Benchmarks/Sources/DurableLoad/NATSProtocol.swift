import Foundation
import NIOCore

/// A message the server delivers (MSG, or HMSG with headers).
struct NATSMessage: Equatable {
    var subject: String
    var sid: String
    var replyTo: String?
    /// The header block of an HMSG ("NATS/1.0 ..." up to its blank line); nil for MSG.
    var headers: String?
    var payload: ByteBuffer

    /// The status an HMSG's first line carries ("NATS/1.0 503"), nil without one. JetStream
    /// sends statuses (no responders, flow control, heartbeats) with an empty payload.
    var status: Int? {
        guard let headers, let line = headers.split(separator: "\r\n", maxSplits: 1).first else { return nil }
        let parts = line.split(separator: " ")
        return parts.count > 1 ? Int(parts[1]) : nil
    }
}

/// What a NATS server sends, in the client protocol.
enum NATSServerOp: Equatable {
    /// The JSON of INFO.
    case info(String)
    case message(NATSMessage)
    case ping
    case pong
    case ok
    /// The text of -ERR, without its quotes.
    case error(String)
}

enum NATSParser {
    /// The server's own limit for a control line is 4 KB; INFO can be longer (it lists URLs).
    static let maxControlLine = 64 * 1024

    /// The next whole operation, consumed from `buffer`; nil (and nothing consumed) if it is not all there yet.
    static func next(from buffer: inout ByteBuffer) throws(DurableLoadError) -> NATSServerOp? {
        guard let lineEnd = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else {
            guard buffer.readableBytes <= maxControlLine else { throw .protocolError("a NATS control line over \(maxControlLine) bytes") }
            return nil
        }
        let lineLength = lineEnd - buffer.readerIndex
        var line = buffer.getString(at: buffer.readerIndex, length: lineLength) ?? ""
        if line.hasSuffix("\r") { line.removeLast() }
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let verb = fields.first?.uppercased() else { throw .protocolError("an empty NATS control line") }
        let afterLine = lineLength + 1
        switch verb {
        case "MSG", "HMSG":
            return try message(fields, headers: verb == "HMSG", afterLine: afterLine, from: &buffer)
        case "PING", "PONG", "+OK":
            buffer.moveReaderIndex(forwardBy: afterLine)
            return verb == "PING" ? .ping : verb == "PONG" ? .pong : .ok
        case "INFO", "-ERR":
            buffer.moveReaderIndex(forwardBy: afterLine)
            let rest = line.dropFirst(verb.count).trimmingCharacters(in: [" ", "\t", "'"])
            return verb == "INFO" ? .info(rest) : .error(rest)
        default:
            throw .protocolError("an unknown NATS operation: \(line.prefix(80))")
        }
    }

    /// MSG <subject> <sid> [reply-to] <#bytes>, or HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>;
    /// then the bytes and CRLF.
    private static func message(_ fields: [Substring], headers: Bool, afterLine: Int,
                                from buffer: inout ByteBuffer) throws(DurableLoadError) -> NATSServerOp? {
        let sizes = headers ? 2 : 1
        guard (3 + sizes...4 + sizes).contains(fields.count),
              let total = Int(fields[fields.count - 1]), total >= 0,
              let headerBytes = headers ? Int(fields[fields.count - 2]) : 0, (0...total).contains(headerBytes) else {
            throw .protocolError("a malformed NATS message line: \(fields.joined(separator: " ").prefix(80))")
        }
        guard buffer.readableBytes >= afterLine + total + 2 else { return nil }
        let start = buffer.readerIndex + afterLine
        guard buffer.getBytes(at: start + total, length: 2) == [13, 10] else {
            throw .protocolError("a NATS message not ended by CRLF after \(total) bytes")
        }
        let message = NATSMessage(
            subject: String(fields[1]), sid: String(fields[2]),
            replyTo: fields.count == 4 + sizes ? String(fields[3]) : nil,
            headers: headers ? buffer.getString(at: start, length: headerBytes) : nil,
            payload: buffer.getSlice(at: start + headerBytes, length: total - headerBytes) ?? ByteBuffer())
        buffer.moveReaderIndex(forwardBy: afterLine + total + 2)
        return .message(message)
    }
}

/// What the client sends.
enum NATSCommand {
    /// Not verbose (no +OK per command); headers and no_responders so that a publish nobody
    /// stores fails at once with a 503 status instead of timing out.
    static func connect(name: String, into buffer: inout ByteBuffer) {
        buffer.writeString(#"CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"protocol":1,"#)
        buffer.writeString(#""lang":"swift","version":"0","name":"\#(name)"}"# + "\r\n")
    }

    static func subscribe(_ subject: String, sid: Int, into buffer: inout ByteBuffer) {
        buffer.writeString("SUB \(subject) \(sid)\r\n")
    }

    static func publish(_ subject: String, replyTo: String?, payload: ByteBuffer, into buffer: inout ByteBuffer) {
        buffer.writeString("PUB \(subject) \(replyTo.map { $0 + " " } ?? "")\(payload.readableBytes)\r\n")
        buffer.writeImmutableBuffer(payload)
        buffer.writeString("\r\n")
    }

    static func ping(into buffer: inout ByteBuffer) { buffer.writeString("PING\r\n") }
    static func pong(into buffer: inout ByteBuffer) { buffer.writeString("PONG\r\n") }
}
