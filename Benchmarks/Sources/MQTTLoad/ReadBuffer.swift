import NIOCore

/// A connection's received bytes not yet parsed into whole packets (MQTT's, NATS'): reads
/// go in, the parser takes packets from `bytes`, and `compact()` keeps only a partial packet.
public struct ReadBuffer {
    public var bytes = ByteBuffer()

    public init() {}

    /// The common case, whole packets, parses straight from NIO's read buffer.
    public mutating func append(_ read: inout ByteBuffer) {
        if bytes.readableBytes == 0 {
            bytes = read
        } else {
            bytes.writeBuffer(&read)
        }
    }

    /// After parsing: lets NIO reuse its read buffer when all was taken, or keeps only the
    /// part of a packet left, instead of letting the buffer grow.
    public mutating func compact() {
        if bytes.readableBytes == 0 {
            bytes = ByteBuffer()
        } else if bytes.readerIndex > 0 {
            bytes.discardReadBytes()
        }
    }
}
