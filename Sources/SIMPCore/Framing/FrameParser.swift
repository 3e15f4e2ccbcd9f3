import NIOCore
import SwiftProtobuf

/// Why a byte stream on the control channel was rejected.
public enum FrameError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The length prefix announced more bytes than the limit allows.
    case tooLarge(length: Int, limit: Int)
    /// A zero length prefix: an envelope is never empty.
    case empty
    /// The frame's bytes are not a valid protobuf envelope.
    case malformed(String)
    /// A frame was begun and not finished in time (a peer holding the server's memory).
    case incomplete(received: Int, within: TimeAmount)

    public var description: String {
        switch self {
        case .tooLarge(let length, let limit): return "frame of \(length) bytes exceeds the limit of \(limit)"
        case .empty: return "frame with zero length"
        case .malformed(let why): return "malformed envelope: \(why)"
        case .incomplete(let received, let within):
            return "a frame must arrive whole within \(within.nanoseconds / 1_000_000) ms; \(received) bytes of it came"
        }
    }

    public var code: Simp_ErrorCode {
        switch self {
        case .tooLarge: return .frameTooLarge
        case .empty, .malformed, .incomplete: return .malformedFrame
        }
    }
}

/// Control-channel framing: a 4-byte big-endian length, then that many bytes of `Simp_Envelope`.
public enum Frame {
    public static let headerSize = 4
    public static let defaultMaxLength = 64 * 1024

    /// Writes one envelope as a frame.
    public static func encode(_ envelope: Simp_Envelope, into buffer: inout ByteBuffer) {
        // serializedBytes cannot fail for a message without required fields (proto3).
        let bytes: [UInt8] = (try? envelope.serializedBytes()) ?? []
        buffer.writeInteger(UInt32(bytes.count), endianness: .big)
        buffer.writeBytes(bytes)
    }

    public static func encode(_ envelope: Simp_Envelope, allocator: ByteBufferAllocator = .init()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 64)
        encode(envelope, into: &buffer)
        return buffer
    }
}

/// Pure incremental parser: feed it whatever the socket read, take out whole envelopes.
/// Split and coalesced reads are the normal case.
public struct FrameParser: Sendable {
    /// Checked against each length prefix as it is read, so it may change between frames.
    public var maxLength: Int
    private var buffer: ByteBuffer

    public init(maxLength: Int = Frame.defaultMaxLength) {
        self.maxLength = maxLength
        self.buffer = Self.noBytes
    }

    /// Takes the read buffer itself when nothing is pending (the usual case: whole frames per
    /// read), so bytes are not copied and an idle connection keeps no buffer of its own.
    public mutating func append(_ bytes: inout ByteBuffer) {
        if buffer.readableBytes == 0 {
            buffer = bytes
            bytes = Self.noBytes
        } else {
            buffer.writeBuffer(&bytes)
        }
    }

    private static let noBytes = ByteBufferAllocator().buffer(capacity: 0)

    public mutating func append<Bytes: Sequence>(contentsOf bytes: Bytes) where Bytes.Element == UInt8 {
        buffer.writeBytes(bytes)
    }

    /// The next whole envelope, nil when more bytes are needed.
    /// The length is checked before any of the frame's bytes are read or allocated.
    public mutating func next() throws(FrameError) -> Simp_Envelope? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self) else {
            return nil
        }
        guard length > 0 else { throw .empty }
        guard length <= maxLength else { throw .tooLarge(length: Int(length), limit: maxLength) }
        guard buffer.readableBytes >= Frame.headerSize + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: Frame.headerSize)
        let body = buffer.readSlice(length: Int(length))!
        if buffer.readableBytes == 0 { buffer = Self.noBytes } else { buffer.discardReadBytes() }
        do {
            return try Simp_Envelope(serializedBytes: Array(body.readableBytesView))
        } catch {
            throw .malformed(String(describing: error))
        }
    }

    public var bufferedBytes: Int { buffer.readableBytes }
}
