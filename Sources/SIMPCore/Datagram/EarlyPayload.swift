/// The payload of an EARLY datagram: the recipient's confirmed seq when the server pushed it
/// (u64 BE), then the serialized `Simp_Message` with no seq. The recipient takes it only when
/// it has handed over exactly that much and holds nothing, so an early message can neither
/// overtake a numbered one nor arrive after its own numbered copy unnoticed.
public struct EarlyPayload: Equatable, Sendable {
    public static let headerSize = 8

    public var afterSeq: UInt64
    public var message: [UInt8]

    public init(afterSeq: UInt64, message: [UInt8]) {
        self.afterSeq = afterSeq
        self.message = message
    }

    /// Nil when it would not fit a datagram: such a message goes the numbered way only.
    public func encoded() -> [UInt8]? {
        guard !message.isEmpty, Self.headerSize + message.count <= DatagramHeader.maxPayload else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(Self.headerSize + message.count)
        withUnsafeBytes(of: afterSeq.bigEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: message)
        return bytes
    }

    public init(decoding payload: [UInt8]) throws(EarlyPayloadError) {
        guard payload.count > Self.headerSize else { throw .tooShort(payload.count) }
        afterSeq = payload[0..<Self.headerSize].reduce(0) { $0 << 8 | UInt64($1) }
        message = Array(payload[Self.headerSize...])
    }
}

public enum EarlyPayloadError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooShort(Int)

    public var description: String {
        switch self {
        case .tooShort(let n): return "early payload of \(n) bytes has no message after its 8-byte seq"
        }
    }
}
